//! `herald handoff show <lane>`: the lane's latest capsule and its build status, read straight
//! from the store (the daemon need not run). The status line comes first so that a degraded
//! capsule cannot pass for a summary.

use clap::Subcommand;

use crate::config::Config;
use crate::domain::LaneKey;
use crate::store;

#[derive(Subcommand)]
pub enum HandoffCmd {
    /// Print the lane's latest capsule with its status (ok, degraded, too_short, …).
    Show {
        /// The lane, e.g. telegram:12345 or web:alice.
        lane: String,
    },
}

pub async fn handoff(config: &Config, cmd: HandoffCmd) -> anyhow::Result<()> {
    let store = store::connect(&config.store_url(), 2).await?;
    store.migrate().await?;
    let result = match cmd {
        HandoffCmd::Show { lane } => show(&*store, &LaneKey::parse(&lane)).await,
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
