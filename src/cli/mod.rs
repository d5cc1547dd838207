//! Operator commands that run against the store without starting the daemon.

pub mod cron;
pub mod doctor;
mod doctor_config;
pub mod doctor_files;
pub mod doctor_routing;
pub mod eval;
mod handoff;
pub mod hooks;
mod inbox;
mod memory;
mod pairing;
pub mod progress;
mod prompt;
pub mod reload;
mod sessions_io;
mod skills;
mod tools;
pub mod usage;

use std::path::PathBuf;

use clap::Subcommand;

pub use inbox::{inbox, InboxCmd};
pub use memory::{memory, MemoryCmd};
pub use pairing::{pairing, PairingCmd};
pub use prompt::{prompt, PromptCmd};
pub use skills::{skills, SkillsCmd};
pub use tools::{tools, ToolsCmd};
pub use usage::{usage, UsageArgs};

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
        /// A session id, or the start of one (e.g. the 12 characters the admin page shows).
        id: String,
        /// Include compacted and retracted rows.
        #[arg(long)]
        all: bool,
    },
    /// Full-text search over transcripts: one hit per session (its newest match), newest
    /// sessions first.
    Search {
        /// Words that must all occur; a word ending in * is a prefix (`hel*` finds "hello").
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

/// What a command does to the store. Neither migrates: only `migrate` and `serve` change the
/// schema, so an operator who installs a new binary and looks around before restarting does
/// not migrate the live store under the old daemon, without a backup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Opened read-only (SQLite read-only file, Postgres read-only transactions).
    Read,
    /// Writes rows (approve a pairing code, add a cron job, import a session).
    Write,
}

/// Opens the daemon's store for a command. It must exist and carry exactly this binary's
/// migrations: a missing SQLite file is not created (that would answer "nothing here" about
/// the wrong database and leave a stray file), an unmigrated or older store is left alone
/// with "run `herald migrate`", and a store a newer release migrated is refused.
pub(crate) async fn open_store(
    config: &Config,
    command: &str,
    access: Access,
) -> anyhow::Result<std::sync::Arc<dyn store::Store>> {
    let url = config.store_url();
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
    let store = match access {
        Access::Read => store::connect_read_only(&url).await?,
        Access::Write => store::connect(&url, 2).await?,
    };
    if let Err(e) = schema_matches(store.as_ref(), command).await {
        store.close().await;
        return Err(e);
    }
    Ok(store)
}

/// The store carries every migration this binary ships and none it does not know.
async fn schema_matches(store: &dyn store::Store, command: &str) -> anyhow::Result<()> {
    let unknown = store.migrations_unknown().await?;
    if !unknown.is_empty() {
        anyhow::bail!(store::unknown_migrations_message(&unknown));
    }
    let pending = store.migrations_pending().await?;
    let Some(first) = pending.first() else {
        return Ok(());
    };
    // Migrations apply in order: with the first one pending, none is applied.
    let state = if pending.iter().any(|m| m.version == 1) {
        "has no Herald tables yet".to_string()
    } else {
        format!(
            "lacks {} migration(s) of this release, from {} {}",
            pending.len(),
            first.version,
            first.description
        )
    };
    anyhow::bail!(
        "the {} store {state}: run `herald migrate` (after a backup, with any daemon of the \
         older release stopped), then `herald {command}` again; `herald {command}` itself \
         changes no schema",
        store.backend()
    )
}

pub async fn sessions(config: &Config, cmd: SessionsCmd) -> anyhow::Result<()> {
    let (name, access) = match &cmd {
        SessionsCmd::List { .. } => ("sessions list", Access::Read),
        SessionsCmd::Show { .. } => ("sessions show", Access::Read),
        SessionsCmd::Search { .. } => ("sessions search", Access::Read),
        SessionsCmd::Export { .. } => ("sessions export", Access::Read),
        SessionsCmd::Compact { .. } => ("sessions compact", Access::Read),
        SessionsCmd::Import { .. } => ("sessions import", Access::Write),
    };
    let store = open_store(config, name, access).await?;
    match cmd {
        SessionsCmd::List { lane, limit } => list_sessions(store.as_ref(), lane, limit).await?,
        SessionsCmd::Show { id, all } => {
            let s = resolve_session(store.as_ref(), &id).await?;
            println!("session {} in {} (model {})", s.id, s.lane, s.model);
            for m in store.messages(&s.id, !all).await? {
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
            let id = resolve_session(store.as_ref(), &id).await?.id;
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
            let id = resolve_session(store.as_ref(), &id).await?.id;
            print!("{}", compact_dry_run(store.as_ref(), config, &id).await?);
        }
        SessionsCmd::Search { query, limit, role } => {
            search_sessions(store.as_ref(), &query, limit, &role).await?
        }
    }
    store.close().await;
    Ok(())
}

/// `herald sessions list`.
async fn list_sessions(
    store: &dyn store::Store,
    lane: Option<String>,
    limit: i64,
) -> anyhow::Result<()> {
    let lane = lane.map(|l| LaneKey::parse(&l));
    let list = store.sessions_list(lane.as_ref(), limit).await?;
    if list.is_empty() {
        println!("no sessions");
    }
    for s in list {
        println!(
            "{}  {}  agent {}  started {}  {}",
            s.id,
            s.lane,
            s.agent,
            fmt_ms(s.started_at),
            match (&s.ended_at, &s.end_reason) {
                (Some(t), Some(r)) => format!("ended {} ({r})", fmt_ms(*t)),
                (Some(t), None) => format!("ended {}", fmt_ms(*t)),
                _ => "open".to_string(),
            }
        );
    }
    Ok(())
}

/// `herald sessions search`.
async fn search_sessions(
    store: &dyn store::Store,
    query: &str,
    limit: i64,
    role: &[String],
) -> anyhow::Result<()> {
    let roles = role
        .iter()
        .map(|r| Role::parse(r.trim()).ok_or_else(|| anyhow::anyhow!("unknown role {r:?}")))
        .collect::<anyhow::Result<Vec<Role>>>()?;
    let hits = store
        .search(store::SearchScope::AllLanes, query, &roles, limit)
        .await?;
    if hits.is_empty() {
        println!("no matches");
    }
    let n = hits.len();
    for h in hits {
        println!(
            "{}  #{}  {}  {}",
            h.session_id,
            h.message_id,
            h.role.as_str(),
            h.snippet
        );
    }
    if n > 0 {
        println!(
            "{n} session(s), one hit each (its newest match); `herald sessions show ID` \
             prints a whole session, and a word ending in * matches as a prefix (hel*)"
        );
    }
    Ok(())
}

/// The session `id` names: the whole id, or a prefix of exactly one (the admin page shows 12
/// characters). An ambiguous prefix lists its candidates.
async fn resolve_session(store: &dyn store::Store, id: &str) -> anyhow::Result<store::Session> {
    if let Some(s) = store.session_get(&id.into()).await? {
        return Ok(s);
    }
    const SHOWN: usize = 10;
    let mut found = if id.is_empty() {
        Vec::new()
    } else {
        store.sessions_with_prefix(id, SHOWN as i64 + 1).await?
    };
    match found.len() {
        0 => anyhow::bail!(
            "no session {id}: give a session id or the start of one (`herald sessions list` \
             shows them)"
        ),
        1 => Ok(found.remove(0)),
        n => {
            let more = if n > SHOWN { " (and more)" } else { "" };
            let list: Vec<String> = found
                .iter()
                .take(SHOWN)
                .map(|s| format!("  {}  {}  started {}", s.id, s.lane, fmt_ms(s.started_at)))
                .collect();
            anyhow::bail!(
                "{id} is the start of several sessions{more}; give more characters:\n{}",
                list.join("\n")
            )
        }
    }
}

/// An error and its causes on one line, like `{:#}`, without a cause that only repeats what the
/// line already says: the store's words are often the driver's error, whose own source is the
/// database's code again, and an operator read `(code: 14) unable to open database file` four
/// times.
pub fn error_chain(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for link in e.chain().map(|c| c.to_string()) {
        if line.contains(link.as_str()) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&link);
    }
    line
}

pub(crate) fn fmt_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}

/// Checks, before `serve` opens and migrates the store, that `server.listen` can be bound: an
/// address already taken (often a second herald) used to surface only after the migrations,
/// as "binding server.listen … Address in use". The probe is released at once; `serve` binds
/// for real moments later.
pub fn port_free(listen: std::net::SocketAddr) -> anyhow::Result<()> {
    match std::net::TcpListener::bind(listen) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => anyhow::bail!(
            "server.listen {listen} is already in use (another herald, or another program, \
             listens there): stop it, or choose another address with --listen or server.listen. \
             Nothing was started and the store was not touched"
        ),
        Err(e) => anyhow::bail!("cannot listen on server.listen {listen}: {e}"),
    }
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

#[cfg(test)]
mod tests {
    #[test]
    fn an_error_chain_says_each_thing_once() {
        let driver = std::io::Error::other("(code: 14) unable to open database file");
        let e = anyhow::Error::new(crate::store::StoreError::other_from(
            "error returned from database: (code: 14) unable to open database file",
            driver,
        ))
        .context("opening the store");
        let line = super::error_chain(&e);
        assert_eq!(line.matches("code: 14").count(), 1, "{line}");
        assert!(
            line.starts_with("opening the store: store error: error returned"),
            "{line}"
        );
    }
}
