//! `herald prompt show LANE`: the system prompt a new session of that lane would get, layer by
//! layer, each labelled with its tier and size — what the model sees, before it sees it.
//!
//! It reads the same files the daemon reads at session start and assembles them with the
//! same function, so the output cannot drift from the real prompt. It never writes.

use std::io::Write;

use clap::Subcommand;

use crate::agent::context::window::context_window;
use crate::agent::prompt::{join, layers, load_sources, PromptParts};
use crate::config::Config;
use crate::domain::{LaneKey, Platform};

#[derive(Subcommand)]
pub enum PromptCmd {
    /// Print the system prompt a new session of LANE (e.g. telegram:12345) would get.
    Show {
        lane: String,
        /// Print the prompt text only, exactly as sent, without labels.
        #[arg(long)]
        raw: bool,
        /// Include the memory snapshot of PERSON (a [[people]] name or an identity such as
        /// telegram:123), as a private session of theirs would get it.
        #[arg(long)]
        person: Option<String>,
    },
}

pub async fn prompt(config: &Config, cmd: PromptCmd) -> anyhow::Result<()> {
    let PromptCmd::Show { lane, raw, person } = cmd;
    let key = LaneKey::parse(&lane);
    let platform = Platform::parse(key.platform())
        .filter(|p| crate::config::spec(*p).is_some())
        .ok_or_else(|| {
            let names: Vec<&str> = crate::config::specs()
                .iter()
                .map(|s| s.name.as_str())
                .collect();
            anyhow::anyhow!(
                "{lane:?} is not a lane: write platform:chat_id, with platform one of {}",
                names.join(", ")
            )
        })?;
    let window = context_window(&config.llm).await;
    let mut sources = load_sources(config, window);
    // Whose memory a new session of this lane gets: --person, else the person of a private
    // chat as the daemon maps its sender (nobody's in a group or a scheduled run).
    let person = match person {
        Some(p) => Some(super::memory::resolve(config, &p)?),
        None => private_sender(&key).and_then(|(p, sender)| config.person(p, &sender)),
    };
    if let (Some(key), true) = (&person, config.memory.enabled) {
        sources.memory = crate::agent::memory::MemoryFiles::from_config(config).snapshot(key);
    }
    let model = config
        .llm
        .model
        .clone()
        .unwrap_or_else(|| "(no model)".into());
    let parts = PromptParts {
        platform,
        session_id: "(new session)",
        started_at: chrono::Utc::now(),
        model: &model,
    };
    let layers = layers(&config.agent, &sources, &parts);
    let text = join(&layers);
    let mut out = std::io::stdout().lock();
    if raw {
        writeln!(out, "{text}")?;
        return Ok(());
    }
    match (&person, config.memory.enabled) {
        (Some(p), true) => writeln!(out, "(memory of {p}: a private session of theirs)\n")?,
        (Some(p), false) => writeln!(out, "(memory.enabled is false: no memory of {p})\n")?,
        (None, _) => writeln!(
            out,
            "(no person's memory: not a private chat Herald can tell the sender of; --person \
             NAME adds one)\n"
        )?,
    }
    for l in &layers {
        writeln!(
            out,
            "── {} · {} · {} chars ──\n{}\n",
            l.tier.as_str(),
            l.label,
            l.text.chars().count(),
            l.text
        )?;
    }
    writeln!(
        out,
        "── total: {} layers, {} chars (window {window} tokens; cap per file {} chars) ──",
        layers.len(),
        text.chars().count(),
        config.agent.file_cap_chars(window)
    )?;
    Ok(())
}

/// The sender of a private chat, read from its lane as the adapters build it: a Telegram
/// private chat's id is the user's (groups are negative, forum topics add a thread); a web
/// chat's sender is its name unless the client sent another. A Discord DM channel is not named
/// after its user, so it takes `--person`.
fn private_sender(lane: &LaneKey) -> Option<(&'static str, String)> {
    let mut parts = lane.as_str().split(':');
    let (platform, chat, thread) = (parts.next()?, parts.next()?, parts.next());
    if thread.is_some() {
        return None;
    }
    match platform {
        "telegram" if chat.parse::<i64>().is_ok_and(|id| id > 0) => {
            Some(("telegram", chat.to_string()))
        }
        "web" if !chat.is_empty() => Some(("web", chat.to_string())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_senders_come_from_the_lane() {
        for (lane, want) in [
            ("telegram:42", Some(("telegram", "42"))),
            ("telegram:-1001", None),
            ("telegram:42:7", None),
            ("web:alice", Some(("web", "alice"))),
            ("discord:123", None),
            ("cron:nightly", None),
        ] {
            let got = private_sender(&LaneKey::parse(lane));
            assert_eq!(got.as_ref().map(|(p, s)| (*p, s.as_str())), want, "{lane}");
        }
    }
}
