//! `herald handoff show <lane>`: the lane's latest capsule and its build status, read straight
//! from the store (the daemon need not run). The status line comes first so that a degraded
//! capsule cannot pass for a summary.
//!
//! `herald handoff nightly [--dry-run]`: the nightly closer's pass, now. It takes the same role
//! lease as the daemon's scheduled pass, so the two never overlap; the sessions it closes are
//! closed by the daemon's lane workers when they pick the rotation events up.

use std::sync::Arc;

use clap::Subcommand;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::domain::LaneKey;
use crate::handoff::{Builder, NightlyCloser, PassKind};
use crate::llm::writer_chain;
use crate::store;

#[derive(Subcommand)]
pub enum HandoffCmd {
    /// Print the lane's latest capsule with its status (ok, degraded, too_short, …).
    Show {
        /// The lane, e.g. telegram:12345 or web:alice.
        lane: String,
    },
    /// Run the nightly closer now: capsules for idle conversations, within `nightly_cap`.
    Nightly {
        /// Only list the conversations a pass would take.
        #[arg(long)]
        dry_run: bool,
    },
}

pub async fn handoff(config: &Config, cmd: HandoffCmd) -> anyhow::Result<()> {
    let name = match &cmd {
        HandoffCmd::Show { .. } => "handoff show",
        HandoffCmd::Nightly { .. } => "handoff nightly",
    };
    // Both read conversations a daemon wrote; neither has anything to do in a new database.
    let access = match &cmd {
        HandoffCmd::Nightly { dry_run: false } => super::Access::Write,
        _ => super::Access::Read,
    };
    let store = super::open_store(config, name, access).await?;
    let result = match cmd {
        HandoffCmd::Show { lane } => show(&*store, &LaneKey::parse(&lane)).await,
        HandoffCmd::Nightly { dry_run } => nightly(config, store.clone(), dry_run).await,
    };
    store.close().await;
    result
}

async fn show(store: &dyn store::Store, lane: &LaneKey) -> anyhow::Result<()> {
    let Some(c) = store.capsule_latest(lane).await? else {
        anyhow::bail!("no handoff capsule for lane {lane}");
    };
    println!(
        "lane {}  status {}  session {}  {} messages  written {}{}{}",
        c.lane,
        c.status,
        c.session_id,
        c.message_count,
        super::fmt_ms(c.created_at),
        if c.pending {
            "  pending (the next session receives it)"
        } else {
            ""
        },
        if c.confidential { "  confidential" } else { "" },
    );
    if !c.text.is_empty() {
        println!("\n{}", c.text.trim_end());
    }
    Ok(())
}

async fn nightly(
    config: &Config,
    store: Arc<dyn store::Store>,
    dry_run: bool,
) -> anyhow::Result<()> {
    let chain = crate::llm::main_chain(config)?;
    let replica = format!("cli-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    // No router here: the events land in the inbox and the daemon's rescan takes them.
    let (finished, _) = tokio::sync::broadcast::channel(1);
    let auth = crate::hooks::Authorizer::from_config(config);
    let (ingest, _wakes) = crate::lanes::Ingest::new(store.clone(), auth, finished);
    let builder = Arc::new(Builder::new(
        store,
        writer_chain(config, &chain)?,
        config.handoff.clone(),
        replica,
        ingest,
    ));
    let closer = NightlyCloser::new(builder, &config.handoff)?;
    let now = chrono::Utc::now();
    if dry_run {
        let candidates = closer.candidates(now).await?;
        let r = closer.rules();
        println!(
            "{} conversation(s) a pass would take now (cap {}, at least {} messages, idle {} min, \
             active within {} h):",
            candidates.len(),
            r.cap,
            r.min_messages,
            r.idle.as_secs() / 60,
            r.active_within.as_secs() / 3600
        );
        for c in candidates {
            println!(
                "{}  session {}  {} messages  last message {}",
                c.lane,
                c.session_id,
                c.messages,
                super::fmt_ms(c.last_at)
            );
        }
        return Ok(());
    }
    let report = closer
        .pass(now, PassKind::Manual, &CancellationToken::new())
        .await?;
    if report.busy {
        anyhow::bail!("a nightly pass is running elsewhere (role lease held); try again later");
    }
    println!(
        "{} candidate(s), {} taken{}",
        report.candidates,
        report.builds.len(),
        if report.capped { ", budget spent" } else { "" }
    );
    for (lane, status) in &report.builds {
        println!("{lane}  {status}");
    }
    Ok(())
}
