//! `cron`: the agent schedules work from a conversation — create, list, pause, resume and
//! remove jobs that deliver back into that conversation.
//!
//! A job made here is an ordinary stored job (same validation, same ledger, same scheduler as
//! a config or `herald cron add` job) that belongs to the lane it was created in: its source
//! column records the owner, its stored name is the model's name scoped by the lane (two
//! conversations may both have "morning"), and it delivers only into that lane. Every action
//! sees only the caller's own jobs: a config job, a CLI job or another lane's job answers
//! exactly like one that does not exist. A scheduled run may not schedule more work.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::sync::Notify;

use crate::agent::tools::{Tool, ToolContext, ToolError};
use crate::domain::cron::{
    check_job, parse_target, Deliverable, JobSpec, Schedule, MAX_JOB_NAME_LEN,
};
use crate::domain::{Amount, LaneKey};
use crate::llm::ToolSpec;
use crate::store::{CronJobRow, Store};

/// Jobs one conversation may own at once.
pub const MAX_JOBS_PER_LANE: usize = 20;
/// Longest name the model may choose (the stored name adds the lane's prefix).
pub const MAX_TOOL_JOB_NAME_LEN: usize = 40;

pub struct CronTool {
    pub store: Arc<dyn Store>,
    /// The platforms this deployment delivers to (a job is checked against them).
    pub platforms: Deliverable,
    /// `tools.require_approval` names `cron`: every action asks.
    pub approval: bool,
    /// `tools.require_approval` names `cron.create` (the default): creating a job asks.
    pub approval_create: bool,
    /// The shortest interval between runs of a job made here (`cron.chat_min_interval_secs`);
    /// jobs from the config or the CLI are the operator's and keep the schedule's own floor.
    pub min_interval: std::time::Duration,
    /// Poked after a change so the scheduler looks at once instead of within 30 s.
    pub poke: Arc<Notify>,
    /// `budget.cron_run`: a job made here may not give itself more per run than that.
    pub max_budget: Option<Amount>,
    /// `budget.currency`, to show a job's budget in.
    pub currency: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    action: String,
    name: Option<String>,
    schedule: Option<String>,
    prompt: Option<String>,
    timezone: Option<String>,
    budget: Option<f64>,
}

/// The stored name of the job the model calls `name` in `lane`: the lane's key made
/// name-safe, a dot, and the name; a lane key too long for that is replaced by a hash of it.
pub fn stored_name(lane: &LaneKey, name: &str) -> String {
    let readable = format!("{}.{name}", lane.as_str().replace(':', "_"));
    if readable.len() <= MAX_JOB_NAME_LEN {
        readable
    } else {
        format!("{}{name}", hashed_prefix(lane))
    }
}

fn hashed_prefix(lane: &LaneKey) -> String {
    let digest = hex::encode(Sha256::digest(lane.as_str().as_bytes()));
    format!("lane-{}.", &digest[..16])
}

/// The name the model gave a job of its lane.
fn own_name(lane: &LaneKey, stored: &str) -> String {
    let readable = format!("{}.", lane.as_str().replace(':', "_"));
    stored
        .strip_prefix(&readable)
        .or_else(|| stored.strip_prefix(&hashed_prefix(lane)))
        .unwrap_or(stored)
        .to_string()
}

fn bad(msg: impl Into<String>) -> ToolError {
    ToolError::BadArguments(msg.into())
}

fn fmt(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

impl CronTool {
    /// The caller's jobs, by name.
    async fn owned_jobs(&self, lane: &LaneKey) -> Result<Vec<CronJobRow>, ToolError> {
        let jobs = self
            .store
            .cron_jobs()
            .await
            .map_err(|e| ToolError::Failed(format!("cannot read the jobs: {e}")))?;
        Ok(jobs
            .into_iter()
            .filter(|r| r.owner.as_ref() == Some(lane))
            .collect())
    }

    /// The caller's job called `name`; anything else answers like a missing job.
    async fn owned(&self, lane: &LaneKey, name: Option<&str>) -> Result<CronJobRow, ToolError> {
        let name = name.ok_or_else(|| bad("this action needs the job's `name`"))?;
        let row = self
            .store
            .cron_job_get(&stored_name(lane, name))
            .await
            .map_err(|e| ToolError::Failed(format!("cannot read the job: {e}")))?;
        row.filter(|r| r.owner.as_ref() == Some(lane))
            .ok_or_else(|| bad(format!("no cron job named {name:?} (see action \"list\")")))
    }

    fn next_fire(&self, row: &CronJobRow, now: DateTime<Utc>) -> (String, String) {
        match check_job(&row.spec, &self.platforms) {
            Err(e) => (format!("invalid: {e}"), "-".into()),
            Ok(_) if row.paused => ("paused".into(), "-".into()),
            Ok(job) => {
                let anchor = DateTime::from_timestamp_millis(row.anchor_at).unwrap_or(now);
                let next = job
                    .schedule
                    .next_after(now, anchor)
                    .map_or("never".to_string(), fmt);
                ("active".into(), next)
            }
        }
    }

    async fn create(&self, ctx: &ToolContext, args: Args) -> Result<String, ToolError> {
        let name = args.name.unwrap_or_default();
        if name.len() > MAX_TOOL_JOB_NAME_LEN {
            return Err(bad(format!(
                "invalid cron job name {name:?}: use 1-{MAX_TOOL_JOB_NAME_LEN} characters from A-Z a-z 0-9 . _ -"
            )));
        }
        // Deliveries go only into the conversation the job was made in.
        let target = parse_target(ctx.lane.as_str(), &self.platforms)
            .ok()
            .filter(|t| t.lane_key() == ctx.lane)
            .ok_or_else(|| {
                ToolError::Refused("this conversation cannot receive scheduled deliveries".into())
            })?;
        let mut spec = JobSpec {
            name: name.clone(),
            schedule: args.schedule.unwrap_or_default(),
            prompt: args.prompt.unwrap_or_default(),
            deliver: vec![target.to_string()],
            timezone: args.timezone,
            catch_up: None,
            enabled: true,
            budget: self.job_budget(args.budget)?,
        };
        // The same checks as `herald cron add`, reported with the model's own name.
        let job = check_job(&spec, &self.platforms)
            .map_err(|e| bad(format!("cannot add the job ({}): {e}", e.key())))?;
        if let Some(gap) = shortest_gap(&job.schedule, Utc::now()) {
            if gap < self.min_interval {
                return Err(bad(format!(
                    "cannot add the job: schedule {:?} runs every {}, more often than a job made in a \
                     conversation may run (at most once every {}, the operator's cron.chat_min_interval_secs)",
                    spec.schedule,
                    human(gap),
                    human(self.min_interval)
                )));
            }
        }
        if self.owned_jobs(&ctx.lane).await?.len() >= MAX_JOBS_PER_LANE {
            return Err(bad(format!(
                "this conversation already has {MAX_JOBS_PER_LANE} cron jobs, the most it may have; remove one first"
            )));
        }
        spec.name = stored_name(&ctx.lane, &name);
        let now = Utc::now();
        let added = self
            .store
            .cron_job_add_owned(&spec, &ctx.lane, &ctx.person, now.timestamp_millis())
            .await
            .map_err(|e| ToolError::Failed(format!("cannot store the job: {e}")))?;
        if !added {
            return Err(bad(format!("a cron job named {name:?} already exists")));
        }
        self.poke.notify_one();
        tracing::info!(job = %spec.name, lane = %ctx.lane, person = %ctx.person, "cron job created from a conversation");
        let next = job
            .schedule
            .next_after(now, now)
            .map_or("never".to_string(), fmt);
        Ok(format!(
            "added cron job {name:?} ({:?}); it delivers into this conversation; next run {next}",
            job_schedule(&spec)
        ))
    }

    /// The `budget` argument as an amount, no more than the operator's `budget.cron_run`.
    fn job_budget(&self, units: Option<f64>) -> Result<Option<Amount>, ToolError> {
        let Some(units) = units else {
            return Ok(None);
        };
        let amount = Amount::from_units(units)
            .ok_or_else(|| bad(format!("budget {units} must be an amount from 0 up")))?;
        if let Some(max) = self.max_budget.filter(|m| amount > *m) {
            return Err(bad(format!(
                "budget {} is more than a scheduled run may spend here ({}, the operator's budget.cron_run)",
                amount.in_currency(&self.currency),
                max.in_currency(&self.currency)
            )));
        }
        Ok(Some(amount))
    }

    async fn list(&self, ctx: &ToolContext) -> Result<String, ToolError> {
        let now = Utc::now();
        let jobs: Vec<_> = self
            .owned_jobs(&ctx.lane)
            .await?
            .iter()
            .map(|row| {
                let (state, next) = self.next_fire(row, now);
                json!({
                    "name": own_name(&ctx.lane, &row.name),
                    "schedule": row.spec.schedule,
                    "timezone": row.spec.timezone,
                    "prompt": row.spec.prompt,
                    "budget": row.spec.budget.map(|a| a.in_currency(&self.currency)),
                    "state": state,
                    "next": next,
                })
            })
            .collect();
        Ok(json!({ "jobs": jobs }).to_string())
    }

    async fn set_paused(
        &self,
        ctx: &ToolContext,
        name: Option<&str>,
        paused: bool,
    ) -> Result<String, ToolError> {
        let row = self.owned(&ctx.lane, name).await?;
        self.store
            .cron_job_set_paused(&row.name, paused, Utc::now().timestamp_millis())
            .await
            .map_err(|e| ToolError::Failed(format!("cannot change the job: {e}")))?;
        self.poke.notify_one();
        let name = own_name(&ctx.lane, &row.name);
        Ok(if paused {
            format!("paused cron job {name:?}")
        } else {
            format!("resumed cron job {name:?}; times that passed while it was paused do not run")
        })
    }

    async fn remove(&self, ctx: &ToolContext, name: Option<&str>) -> Result<String, ToolError> {
        let row = self.owned(&ctx.lane, name).await?;
        self.store
            .cron_job_remove(&row.name)
            .await
            .map_err(|e| ToolError::Failed(format!("cannot remove the job: {e}")))?;
        self.poke.notify_one();
        Ok(format!(
            "removed cron job {:?}",
            own_name(&ctx.lane, &row.name)
        ))
    }
}

/// The shortest time between two runs of `schedule` (`None` for a one-shot). A cron
/// expression's gaps are read off its next runs: enough of them to cover a day of a
/// minute-level expression, which is where its shortest gap shows.
fn shortest_gap(schedule: &Schedule, now: DateTime<Utc>) -> Option<std::time::Duration> {
    match schedule {
        Schedule::Every(d) => Some(*d),
        Schedule::Once(_) => None,
        Schedule::Cron { .. } => {
            let mut prev = schedule.next_after(now, now)?;
            let mut shortest: Option<chrono::TimeDelta> = None;
            for _ in 0..1500 {
                let Some(next) = schedule.next_after(prev, now) else {
                    break;
                };
                let gap = next - prev;
                shortest = Some(shortest.map_or(gap, |s| s.min(gap)));
                prev = next;
            }
            shortest.and_then(|g| g.to_std().ok())
        }
    }
}

/// "5 minutes", "1 second", "90 seconds": a duration as a person reads it.
fn human(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    let (n, unit) = match secs {
        s if s >= 3600 && s % 3600 == 0 => (s / 3600, "hour"),
        s if s >= 60 && s % 60 == 0 => (s / 60, "minute"),
        s => (s, "second"),
    };
    format!("{n} {unit}{}", if n == 1 { "" } else { "s" })
}

fn job_schedule(spec: &JobSpec) -> String {
    match &spec.timezone {
        Some(tz) => format!("{} {tz}", spec.schedule),
        None => spec.schedule.clone(),
    }
}

#[async_trait]
impl Tool for CronTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "cron".into(),
            description: "Schedule work in this conversation. `create` a job (name, schedule, prompt, optional \
                timezone, optional budget: the most one run may spend): at each scheduled time the prompt is run and the answer is delivered here. \
                Schedules: a cron expression (`0 7 * * 1-5`), an interval (`every 30m`), or an RFC 3339 \
                time for a one-shot. `list` shows this conversation's jobs; `pause`, `resume` and \
                `remove` take the job's name."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["create", "list", "pause", "resume", "remove"]},
                    "name": {"type": "string", "description": "the job's name: 1-40 characters from A-Z a-z 0-9 . _ -"},
                    "schedule": {"type": "string", "description": "cron expression, `every <n><s|m|h|d>`, or an RFC 3339 time (create)"},
                    "prompt": {"type": "string", "description": "what to do at each run (create)"},
                    "timezone": {"type": "string", "description": "IANA time zone for cron expressions, default UTC (create)"},
                    "budget": {"type": "number", "description": "the most one run may spend, in the operator's currency (create)"}
                },
                "required": ["action"]
            }),
        }
    }

    fn requires_approval(&self) -> bool {
        self.approval
    }

    /// `create` asks when `cron.create` is listed; the other actions only touch jobs the
    /// conversation already owns. Arguments that do not parse ask nothing: the call fails on
    /// the same parse and does nothing.
    fn requires_approval_for(&self, arguments: &str) -> bool {
        self.approval
            || (self.approval_create
                && serde_json::from_str::<Args>(arguments).is_ok_and(|a| a.action == "create"))
    }

    async fn call(&self, ctx: &ToolContext, arguments: &str) -> Result<String, ToolError> {
        if ctx.lane.is_cron() {
            return Err(ToolError::Refused(
                "a scheduled run cannot schedule more work".into(),
            ));
        }
        if crate::domain::Person::parse(&ctx.person).is_none() {
            return Err(ToolError::Refused(
                "there is no person here to own a job".into(),
            ));
        }
        let args: Args = serde_json::from_str(arguments)
            .map_err(|e| bad(format!("arguments are not valid JSON for cron: {e}")))?;
        match args.action.as_str() {
            "create" => self.create(ctx, args).await,
            "list" => self.list(ctx).await,
            "pause" => self.set_paused(ctx, args.name.as_deref(), true).await,
            "resume" => self.set_paused(ctx, args.name.as_deref(), false).await,
            "remove" => self.remove(ctx, args.name.as_deref()).await,
            other => Err(bad(format!(
                "unknown action {other:?}; use create, list, pause, resume or remove"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_names_are_scoped_by_lane_and_read_back() {
        let a = LaneKey::new("telegram:111");
        let b = LaneKey::new("telegram:999");
        assert_eq!(stored_name(&a, "morning"), "telegram_111.morning");
        assert_ne!(stored_name(&a, "morning"), stored_name(&b, "morning"));
        assert_eq!(own_name(&a, &stored_name(&a, "morning")), "morning");
        let long = LaneKey::new("discord:123456789012345678:876543210987654321");
        let name = "a".repeat(MAX_TOOL_JOB_NAME_LEN);
        let stored = stored_name(&long, &name);
        assert!(stored.len() <= MAX_JOB_NAME_LEN, "{stored}");
        assert_eq!(own_name(&long, &stored), name);
        let spec = JobSpec {
            name: stored,
            schedule: "every 1h".into(),
            prompt: "p".into(),
            deliver: vec!["web:x".into()],
            timezone: None,
            catch_up: None,
            enabled: true,
            budget: None,
        };
        assert!(spec
            .validate(&crate::config::Config::default().deliverable())
            .is_ok());
    }
}
