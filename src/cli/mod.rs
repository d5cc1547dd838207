//! Operator commands that run against the store without starting the daemon.

pub mod cron;
pub mod doctor;
mod doctor_config;
mod handoff;
mod memory;
mod pairing;
pub mod progress;
mod prompt;
mod sessions_io;
mod skills;
mod tools;

use std::path::PathBuf;

use clap::Subcommand;

pub use memory::{memory, MemoryCmd};
pub use pairing::{pairing, PairingCmd};
pub use prompt::{prompt, PromptCmd};
pub use skills::{skills, SkillsCmd};
pub use tools::{tools, ToolsCmd};

use crate::config::Config;
use crate::domain::{LaneKey, Role};
use crate::store;

pub use handoff::{handoff, HandoffCmd};
pub use sessions_io::{
    compact_dry_run, export_jsonl, export_to, import_file, parse_transcript, Parsed,
};

#[derive(Subcommand)]
pub enum SessionsCmd {
    /// List sessions, newest first.
    List {
        /// Only this lane (e.g. telegram:12345).
        #[arg(long)]
        lane: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: i64,
    },
    /// Print one session's transcript.
    Show {
        id: String,
        /// Include compacted and retracted rows.
        #[arg(long)]
        all: bool,
    },
    /// Full-text search over transcripts (one hit per session, newest first).
    Search {
        query: String,
        #[arg(long, default_value_t = 10)]
        limit: i64,
        /// Only messages of these roles (comma-separated: user,assistant,tool,system).
        #[arg(long, value_delimiter = ',')]
        role: Vec<String>,
    },
    /// Write a session as JSON lines: the system prompt, then every message with its flags.
    Export {
        id: String,
        /// Only `jsonl` for now.
        #[arg(long, default_value = "jsonl")]
        format: String,
    },
    /// Import a transcript (an export, or an OpenAI chat-format message list) as a new closed
    /// session.
    Import {
        file: PathBuf,
        /// Lane of the new session (default `import:<file stem>`).
        #[arg(long)]
        lane: Option<String>,
    },
    /// Print the projection compaction would insert for a session.
    Compact {
        id: String,
        /// Print only; change nothing (the daemon compacts live sessions before a turn).
        #[arg(long)]
        dry_run: bool,
    },
}

/// Applies pending migrations one at a time, naming each on stdout (a bar on a terminal's
/// stderr), so an operator upgrading a large database sees which step it is on.
pub async fn migrate(config: &Config) -> anyhow::Result<()> {
    let store = store::connect(&config.store_url(), 2).await?;
    let unknown = store.migrations_unknown().await?;
    if !unknown.is_empty() {
        store.close().await;
        anyhow::bail!(store::unknown_migrations_message(&unknown));
    }
    let pending = store.migrations_pending().await?;
    if pending.is_empty() {
        println!(
            "nothing to do: the {} store has every migration applied",
            store.backend()
        );
        store.close().await;
        return Ok(());
    }
    let bar = progress::bar(pending.len() as u64, "migrations");
    for m in &pending {
        bar.set_message(format!("{} {}", m.version, m.description));
        store.migrate_to(m.version).await?;
        bar.suspend(|| println!("applied {} {}", m.version, m.description));
        bar.inc(1);
    }
    bar.finish_and_clear();
    println!(
        "{} migrations applied to the {} store",
        pending.len(),
        store.backend()
    );
    store.close().await;
    Ok(())
}

/// Opens the daemon's store for a command. A command that only reads (or that acts on rows a
/// daemon must have written, like a pairing code) refuses a SQLite file that does not exist:
/// creating one would answer "nothing here" about the wrong database, and leave a stray file.
pub(crate) async fn open_store(
    config: &Config,
    command: &str,
    needs_existing: bool,
) -> anyhow::Result<std::sync::Arc<dyn store::Store>> {
    let url = config.store_url();
    if needs_existing {
        if let Some(path) = doctor::sqlite_path(&url) {
            if !std::path::Path::new(&path).exists() {
                anyhow::bail!(
                    "no database at {path}: `herald {command}` reads the daemon's database and \
                     creates none. Run it with the daemon's configuration and environment (the \
                     same --config, --data-dir and HERALD_* variables; under systemd see \
                     docs/operating.md), or run `herald migrate` to create an empty one"
                );
            }
        }
    }
    let store = store::connect(&url, 2).await?;
    store.migrate().await?;
    Ok(store)
}

pub async fn sessions(config: &Config, cmd: SessionsCmd) -> anyhow::Result<()> {
    let (name, needs_existing) = match &cmd {
        SessionsCmd::List { .. } => ("sessions list", true),
        SessionsCmd::Show { .. } => ("sessions show", true),
        SessionsCmd::Search { .. } => ("sessions search", true),
        SessionsCmd::Export { .. } => ("sessions export", true),
        SessionsCmd::Compact { .. } => ("sessions compact", true),
        SessionsCmd::Import { .. } => ("sessions import", false),
    };
    let store = open_store(config, name, needs_existing).await?;
    match cmd {
        SessionsCmd::List { lane, limit } => {
            let lane = lane.map(|l| LaneKey::parse(&l));
            let list = store.sessions_list(lane.as_ref(), limit).await?;
            if list.is_empty() {
                println!("no sessions");
            }
            for s in list {
                println!(
                    "{}  {}  started {}  {}",
                    s.id,
                    s.lane,
                    fmt_ms(s.started_at),
                    match (&s.ended_at, &s.end_reason) {
                        (Some(t), Some(r)) => format!("ended {} ({r})", fmt_ms(*t)),
                        (Some(t), None) => format!("ended {}", fmt_ms(*t)),
                        _ => "open".to_string(),
                    }
                );
            }
        }
        SessionsCmd::Show { id, all } => {
            let Some(s) = store.session_get(&id).await? else {
                anyhow::bail!("no session {id}");
            };
            println!("session {} in {} (model {})", s.id, s.lane, s.model);
            for m in store.messages(&id, !all).await? {
                let flags = match (m.active, m.compacted) {
                    (true, _) => "",
                    (false, true) => " [compacted]",
                    (false, false) => " [retracted]",
                };
                println!("#{} {}{}: {}", m.id, m.role.as_str(), flags, m.content);
            }
        }
        SessionsCmd::Export { id, format } => {
            if format != "jsonl" {
                anyhow::bail!("unknown export format {format:?} (supported: jsonl)");
            }
            let bar = progress::bar_beside_stdout(0, "messages");
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            export_to(store.as_ref(), &id, &mut out, &bar).await?;
            bar.finish_and_clear();
        }
        SessionsCmd::Import { file, lane } => {
            let bar = progress::bar(0, "messages");
            let res = import_file(store.as_ref(), &file, lane.as_deref(), &bar).await;
            bar.finish_and_clear();
            let (id, n) = res?;
            println!("imported {n} messages as session {id}");
        }
        SessionsCmd::Compact { id, dry_run } => {
            if !dry_run {
                anyhow::bail!(
                    "only --dry-run is available here: the daemon compacts a session before a \
                     turn, under the lane's lease"
                );
            }
            print!("{}", compact_dry_run(store.as_ref(), config, &id).await?);
        }
        SessionsCmd::Search { query, limit, role } => {
            let roles = role
                .iter()
                .map(|r| Role::parse(r.trim()).ok_or_else(|| anyhow::anyhow!("unknown role {r:?}")))
                .collect::<anyhow::Result<Vec<Role>>>()?;
            let hits = store
                .search(store::SearchScope::AllLanes, &query, &roles, limit)
                .await?;
            if hits.is_empty() {
                println!("no matches");
            }
            for h in hits {
                println!(
                    "{}  #{}  {}  {}",
                    h.session_id,
                    h.message_id,
                    h.role.as_str(),
                    h.snippet
                );
            }
        }
    }
    store.close().await;
    Ok(())
}

pub(crate) fn fmt_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}

/// Resolves on SIGINT or SIGTERM.
pub async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
