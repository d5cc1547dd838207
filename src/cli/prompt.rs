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
    let platform = Platform::parse(key.platform()).ok_or_else(|| {
        anyhow::anyhow!(
            "{lane:?} is not a lane: write platform:chat_id, with platform one of web, telegram, \
             discord, cron"
        )
    })?;
    let window = context_window(&config.llm).await;
    let mut sources = load_sources(config, window);
    if let Some(p) = person {
        let key = super::memory::resolve(config, &p)?;
        if config.memory.enabled {
            sources.memory = crate::agent::memory::MemoryFiles::from_config(config).snapshot(&key);
        }
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
