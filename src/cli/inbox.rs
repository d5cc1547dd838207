//! `herald inbox`: the operator's hand on dead letters — inbound messages given up after
//! `inbox.max_attempts` starts that all ended without a result (a crash, a kill, a panic, or
//! the store refusing the turn), and outbox rows given up for good — and sending one back.

use clap::Subcommand;

use super::Access;
use crate::config::Config;

#[derive(Subcommand)]
pub enum InboxCmd {
    /// Dead-lettered inbound messages (newest first), then outbox rows given up for good.
    Dead {
        #[arg(long, default_value_t = 50)]
        limit: i64,
    },
    /// Send a dead message back: pending again with no attempt counted. Nothing is woken: a
    /// running daemon's rescan (`lanes.rescan_secs`) takes it up.
    Retry { id: i64 },
}

/// Characters of a message's text a listing shows.
const PREVIEW_CHARS: usize = 60;

pub async fn inbox(config: &Config, cmd: InboxCmd) -> anyhow::Result<()> {
    let (name, access) = match &cmd {
        InboxCmd::Dead { .. } => ("inbox dead", Access::Read),
        InboxCmd::Retry { .. } => ("inbox retry", Access::Write),
    };
    let store = super::open_store(config, name, access).await?;
    match cmd {
        InboxCmd::Dead { limit } => {
            let dead = store.inbox_dead(limit).await?;
            if dead.is_empty() {
                println!("no dead inbound messages");
            } else {
                println!(
                    "dead inbound messages (send one back with `herald inbox retry ID`):\n\
                     id  lane  dead since  attempts  reason  text"
                );
            }
            for d in &dead {
                println!(
                    "{}  {}  {}  {}  {}  {:?}",
                    d.row.id,
                    d.row.lane,
                    super::fmt_ms(d.dead_at),
                    d.row.attempts,
                    d.reason(),
                    d.preview(PREVIEW_CHARS)
                );
            }
            let failed = store.outbox_failed(limit).await?;
            if !failed.is_empty() {
                println!(
                    "outbox rows given up (not sent):\nid  lane  created  attempts  error  text"
                );
            }
            for o in &failed {
                let text: String = o.text.chars().take(PREVIEW_CHARS).collect();
                println!(
                    "{}  {}  {}  {}  {}  {:?}",
                    o.id,
                    o.lane,
                    super::fmt_ms(o.created_at),
                    o.attempts,
                    o.last_error.as_deref().unwrap_or(""),
                    text
                );
            }
        }
        InboxCmd::Retry { id } => {
            if !store.inbox_retry(id).await? {
                store.close().await;
                anyhow::bail!("inbox row {id} is not a dead message (see `herald inbox dead`)");
            }
            println!(
                "inbox row {id} is pending again with no attempt counted; a running daemon takes \
                 it up at its next rescan (within lanes.rescan_secs, {} s); nothing was woken",
                config.lanes.rescan_secs
            );
        }
    }
    store.close().await;
    Ok(())
}
