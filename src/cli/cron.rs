//! `herald cron list|add|remove|pause|resume|run|log`: job management against the store.
//!
//! These commands change stored jobs only; a running daemon sees the change on its next
//! scheduler pass (within 30 s). Jobs are checked when they are added, against the platforms
//! this config runs, so a bad target fails here with a clear message rather than at fire time.
//! Config-file jobs are owned by the file: the CLI may pause, resume and run them, not remove
//! or shadow them.

use anyhow::{bail, Context};
use chrono::{DateTime, Utc};
use clap::Subcommand;

use crate::config::Config;
use crate::cron::{check_job, ledger, JobSpec};
use crate::domain::Amount;
use crate::store::{CronFire, CronJobRow, FireStatus, JobSource, OutboxStatus, Store};

#[derive(Subcommand, Debug, Clone)]
pub enum CronCmd {
    /// List jobs with their targets, state, last fire and next fire.
    List,
    /// Add a job (checked now; the running daemon picks it up within 30 s).
    Add {
        #[arg(long)]
        name: String,
        /// `0 7 * * 1-5`, `every 30m`, or an RFC 3339 time for a one-shot.
        #[arg(long)]
        schedule: String,
        #[arg(long)]
        prompt: String,
        /// Delivery target (repeatable): telegram:<chat>[:<thread>], discord:<channel>[:<thread>], web:<lane>.
        #[arg(long = "deliver", required = true)]
        deliver: Vec<String>,
        /// IANA time zone for cron expressions (default UTC).
        #[arg(long)]
        timezone: Option<String>,
        /// After downtime: `once` (default) or `skip`.
        #[arg(long = "catch-up")]
        catch_up: Option<String>,
        /// The most one run may spend, in `budget.currency` (default: `budget.cron_run`).
        #[arg(long)]
        budget: Option<f64>,
    },
    /// Remove a job added with `cron add` (its ledger stays).
    Remove { name: String },
    /// Stop firing a job until `resume`.
    Pause { name: String },
    /// Fire again; times that passed while paused never run.
    Resume { name: String },
    /// Fire once now, besides the schedule.
    Run { name: String },
    /// Show the fire ledger, newest first.
    Log {
        name: Option<String>,
        #[arg(long, default_value_t = 20)]
        limit: i64,
    },
}

/// Runs one command against the configured store and prints its report.
pub async fn cron(config: &Config, cmd: CronCmd) -> anyhow::Result<()> {
    use super::Access::{Read, Write};
    let (name, access) = match &cmd {
        CronCmd::List => ("cron list", Read),
        CronCmd::Log { .. } => ("cron log", Read),
        CronCmd::Add { .. } => ("cron add", Write),
        CronCmd::Remove { .. } => ("cron remove", Write),
        CronCmd::Pause { .. } => ("cron pause", Write),
        CronCmd::Resume { .. } => ("cron resume", Write),
        CronCmd::Run { .. } => ("cron run", Write),
    };
    if let CronCmd::Add {
        name: job,
        schedule,
        prompt,
        deliver,
        timezone,
        catch_up,
        budget,
    } = &cmd
    {
        // A wrong argument is reported as such before the store is looked at (which may not
        // exist yet, or be behind this release's migrations).
        let spec = JobSpec {
            name: job.clone(),
            schedule: schedule.clone(),
            prompt: prompt.clone(),
            deliver: deliver.clone(),
            timezone: timezone.clone(),
            catch_up: catch_up.clone(),
            enabled: true,
            budget: job_budget(*budget)?,
        };
        check_job(&spec, &config.deliverable())
            .map_err(|e| anyhow::anyhow!("cannot add the job ({}): {e}", flag(e.key())))?;
    }
    let store = super::open_store(config, name, access).await?;
    let out = execute(store.as_ref(), config, cmd, Utc::now()).await;
    store.close().await;
    print!("{}", out?);
    Ok(())
}

/// The command's work, returning what to print (tests call this directly).
pub async fn execute(
    store: &dyn Store,
    config: &Config,
    cmd: CronCmd,
    now: DateTime<Utc>,
) -> anyhow::Result<String> {
    let now_ms = now.timestamp_millis();
    Ok(match cmd {
        CronCmd::List => list(store, config, now).await?,
        CronCmd::Add {
            name,
            schedule,
            prompt,
            deliver,
            timezone,
            catch_up,
            budget,
        } => {
            let spec = JobSpec {
                name,
                schedule,
                prompt,
                deliver,
                timezone,
                catch_up,
                enabled: true,
                budget: job_budget(budget)?,
            };
            let job = check_job(&spec, &config.deliverable())
                .map_err(|e| anyhow::anyhow!("cannot add the job ({}): {e}", flag(e.key())))?;
            if !store.cron_job_add(&spec, now_ms).await? {
                bail!("a cron job named {:?} already exists", job.name);
            }
            format!("added cron job {:?}\n", job.name)
        }
        CronCmd::Remove { name } => {
            let row = existing(store, &name).await?;
            if row.source == JobSource::Config {
                bail!(
                    "cron job {name:?} comes from the config file; delete its [[cron.jobs]] table there (or pause it)"
                );
            }
            store.cron_job_remove(&name).await?;
            format!("removed cron job {name:?}\n")
        }
        CronCmd::Pause { name } => {
            existing(store, &name).await?;
            store.cron_job_set_paused(&name, true, now_ms).await?;
            format!("paused cron job {name:?}\n")
        }
        CronCmd::Resume { name } => {
            existing(store, &name).await?;
            store.cron_job_set_paused(&name, false, now_ms).await?;
            format!("resumed cron job {name:?}\n")
        }
        CronCmd::Run { name } => {
            let row = existing(store, &name).await?;
            let job = check_job(&row.spec, &config.deliverable())
                .with_context(|| format!("cron job {name:?} cannot run here"))?;
            match ledger::start_manual(store, &job, "cli", now).await? {
                Some((fire, inbox)) => format!(
                    "queued a manual run of {name:?} (fire {fire}, inbox {inbox}); the daemon runs it within a few seconds\n"
                ),
                None => bail!("a run of {name:?} was queued at this very millisecond; try again"),
            }
        }
        CronCmd::Log { name, limit } => {
            let mut out = String::new();
            for f in store.cron_fires(name.as_deref(), limit).await? {
                let inbox = f.inbox_id;
                out.push_str(&fire_line(&live(store, f).await?));
                out.push('\n');
                out.push_str(&failed_deliveries(store, inbox).await?);
            }
            if out.is_empty() {
                out.push_str("no cron runs\n");
            }
            out
        }
    })
}

async fn existing(store: &dyn Store, name: &str) -> anyhow::Result<CronJobRow> {
    store
        .cron_job_get(name)
        .await?
        .with_context(|| format!("no cron job named {name:?} (see `herald cron list`)"))
}

/// `--budget` as an amount: a number of currency units from 0 up.
fn job_budget(units: Option<f64>) -> anyhow::Result<Option<Amount>> {
    units
        .map(|u| {
            Amount::from_units(u).with_context(|| {
                format!("cannot add the job (--budget): {u} must be an amount from 0 to 1000000000")
            })
        })
        .transpose()
}

fn flag(key: &str) -> String {
    format!("--{}", key.replace('_', "-"))
}

async fn list(store: &dyn Store, config: &Config, now: DateTime<Utc>) -> anyhow::Result<String> {
    let mut out = String::new();
    for row in store.cron_jobs().await? {
        let spec = &row.spec;
        let tz = spec
            .timezone
            .as_deref()
            .map(|t| format!(" ({t})"))
            .unwrap_or_default();
        let (state, next) = match check_job(spec, &config.deliverable()) {
            Err(e) => (format!("invalid: {e}"), "-".to_string()),
            Ok(_) if !spec.enabled => ("disabled".into(), "-".into()),
            Ok(_) if row.paused => match &row.paused_reason {
                Some(why) => (format!("paused: {why}"), "-".into()),
                None => ("paused".into(), "-".into()),
            },
            Ok(job) => {
                let anchor = DateTime::from_timestamp_millis(row.anchor_at).unwrap_or(now);
                let next = job
                    .schedule
                    .next_after(now, anchor)
                    .map_or("never".to_string(), |t| fmt(t.timestamp_millis()));
                ("active".into(), next)
            }
        };
        let last = match store.cron_fires(Some(&row.name), 1).await?.pop() {
            Some(f) => {
                let f = live(store, f).await?;
                format!("{} {}", fmt(f.scheduled_at), f.status.as_str())
            }
            None => "never".into(),
        };
        // A chat job names the conversation that owns it (created there by the agent).
        let source = match &row.owner {
            Some(lane) => format!("{} {lane}", row.source.as_str()),
            None => row.source.as_str().to_string(),
        };
        let budget = spec
            .budget
            .map(|a| format!("  budget {}", a.in_currency(&config.budget.currency)))
            .unwrap_or_default();
        // Whose caps its runs count against: the chat job's maker, or the system.
        let payer = crate::budget::job_payer(&config.people, &row);
        out.push_str(&format!(
            "{}  schedule {:?}{tz}  deliver {}{budget}  payer {payer}  {state} ({source})  last {last}  next {next}\n",
            row.name,
            spec.schedule,
            spec.deliver.join(","),
        ));
    }
    if out.is_empty() {
        out.push_str("no cron jobs\n");
    }
    Ok(out)
}

/// The fire as it stands now. A scheduler writes a finished run into the ledger on its next
/// pass — up to 30 s later, or longer for a manual run it never saw — so a `claimed` row whose
/// inbox event is already settled is shown with that outcome, read the same way the
/// scheduler will record it. Nothing is written.
async fn live(store: &dyn Store, mut f: CronFire) -> anyhow::Result<CronFire> {
    if f.status != FireStatus::Claimed {
        return Ok(f);
    }
    let Some(inbox) = (match f.inbox_id {
        Some(id) => store.inbox_get(id).await?,
        None => None,
    }) else {
        return Ok(f);
    };
    if let Some(out) = ledger::outcome(store, &f, &inbox).await? {
        f.status = out.status;
        f.attempts = out.attempts;
        f.started_at = out.started_at.or(f.started_at);
        f.ended_at = Some(out.ended_at);
        f.deliveries = out.deliveries;
        f.note = out.note;
    }
    Ok(f)
}

/// The deliveries of a run that the platform refused for good (a closed WhatsApp window
/// without a template, a chat the bot was removed from), one indented line each with the
/// reason, so a brief that never arrived says why where the operator looks for it.
async fn failed_deliveries(store: &dyn Store, inbox: Option<i64>) -> anyhow::Result<String> {
    let Some(inbox) = inbox else {
        return Ok(String::new());
    };
    let mut out = String::new();
    for row in store.outbox_for_inbox(inbox).await? {
        if row.status != OutboxStatus::Failed {
            continue;
        }
        let target = match &row.thread_id {
            Some(t) => format!("{}:{}:{t}", row.platform, row.chat_id),
            None => format!("{}:{}", row.platform, row.chat_id),
        };
        let why = row.last_error.as_deref().unwrap_or("no reason recorded");
        out.push_str(&format!("    delivery to {target} failed: {why}\n"));
    }
    Ok(out)
}

fn fire_line(f: &CronFire) -> String {
    let duration = match (f.started_at, f.ended_at) {
        (Some(s), Some(e)) => format!("  {} ms", e - s),
        _ => String::new(),
    };
    format!(
        "#{} {}  {}{}  {}  attempts {}  missed {}  deliveries {}{duration}  {}",
        f.id,
        f.job,
        fmt(f.scheduled_at),
        if f.manual { " (manual)" } else { "" },
        f.status.as_str(),
        f.attempts,
        f.missed_count,
        f.deliveries,
        f.note.as_deref().unwrap_or(""),
    )
}

fn fmt(ms: i64) -> String {
    DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}
