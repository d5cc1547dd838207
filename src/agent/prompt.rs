//! System prompt assembly: stable → context → volatile tiers.
//!
//! The prompt is built once when a session opens, stored on the session row, and reused
//! byte-for-byte for every turn of that session (a provider's prefix cache depends on it).
//! That is why the volatile tier names the session's *start* time, never the current time, and
//! why per-turn context goes into the user message instead (see `hooks`).

use chrono::{DateTime, SecondsFormat, Utc};

use crate::config::{AgentConfig, HintMode};
use crate::domain::Platform;

pub const DEFAULT_IDENTITY: &str = "You are Herald's agent, a helpful assistant that people reach from \
Telegram, Discord and a web chat. You are direct, accurate and brief; you say so when you do not know.";

const TOOL_GUIDANCE: &str = "When the person refers to something from an earlier conversation, or \
you suspect earlier context exists, call session_search before asking them to repeat themselves: \
first with a query to find the session and message, then with session_id and around_message_id to \
read the messages around it.";

fn default_hint(p: Platform) -> &'static str {
    match p {
        Platform::Web => "You are talking through the local web chat; plain text and simple Markdown both read well.",
        Platform::Telegram => "You are talking on Telegram: keep formatting simple (short paragraphs, plain lists, code in backticks).",
        Platform::Discord => "You are talking on Discord: Markdown renders; keep messages concise.",
        Platform::Cron => "You are running a scheduled job; your final answer is delivered as a brief into a chat. Answer exactly [SILENT] when there is nothing worth sending.",
    }
}

/// Inputs that vary per session.
pub struct PromptParts<'a> {
    pub identity: &'a str,
    pub platform: Platform,
    pub session_id: &'a str,
    pub started_at: DateTime<Utc>,
    pub model: &'a str,
}

pub fn build_system_prompt(cfg: &AgentConfig, parts: &PromptParts<'_>) -> String {
    // Stable tier: identity and tool guidance.
    let mut out = String::new();
    out.push_str(parts.identity.trim());
    out.push_str("\n\n");
    out.push_str(TOOL_GUIDANCE);
    // Context tier: operator instructions, then the platform hint.
    if let Some(msg) = cfg
        .system_message
        .as_deref()
        .filter(|m| !m.trim().is_empty())
    {
        out.push_str("\n\n");
        out.push_str(msg.trim());
    }
    let hint = match cfg.platform_hints.get(parts.platform.as_str()) {
        Some(h) if h.mode == HintMode::Replace => h.text.trim().to_string(),
        Some(h) => format!("{} {}", default_hint(parts.platform), h.text.trim()),
        None => default_hint(parts.platform).to_string(),
    };
    out.push_str("\n\n");
    out.push_str(&hint);
    // Volatile tier: fixed for the session's lifetime.
    out.push_str(&format!(
        "\n\nSession: {} · started {} · model {}",
        parts.session_id,
        parts.started_at.to_rfc3339_opts(SecondsFormat::Secs, true),
        parts.model
    ));
    out
}

/// Reads the identity file, falling back to the built-in identity when unset or unreadable.
pub fn load_identity(cfg: &AgentConfig) -> String {
    match &cfg.soul_file {
        Some(path) => match std::fs::read_to_string(path) {
            Ok(s) if !s.trim().is_empty() => s,
            Ok(_) => DEFAULT_IDENTITY.to_string(),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot read agent.soul_file; using the built-in identity");
                DEFAULT_IDENTITY.to_string()
            }
        },
        None => DEFAULT_IDENTITY.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PlatformHint;

    fn parts(platform: Platform) -> PromptParts<'static> {
        PromptParts {
            identity: "I am X.",
            platform,
            session_id: "s1",
            started_at: DateTime::parse_from_rfc3339("2026-11-30T10:00:00Z")
                .unwrap()
                .into(),
            model: "m",
        }
    }

    #[test]
    fn tiers_are_in_order() {
        let cfg = AgentConfig {
            system_message: Some("Be brief.".into()),
            ..AgentConfig::default()
        };
        let p = build_system_prompt(&cfg, &parts(Platform::Telegram));
        let id = p.find("I am X.").unwrap();
        let op = p.find("Be brief.").unwrap();
        let hint = p.find("on Telegram").unwrap();
        let vol = p
            .find("Session: s1 · started 2026-11-30T10:00:00Z · model m")
            .unwrap();
        assert!(id < op && op < hint && hint < vol, "{p}");
    }

    #[test]
    fn hints_append_or_replace() {
        let mut cfg = AgentConfig::default();
        cfg.platform_hints.insert(
            "telegram".into(),
            PlatformHint {
                mode: HintMode::Append,
                text: "Use emoji sparingly.".into(),
            },
        );
        cfg.platform_hints.insert(
            "web".into(),
            PlatformHint {
                mode: HintMode::Replace,
                text: "Web only.".into(),
            },
        );
        let tg = build_system_prompt(&cfg, &parts(Platform::Telegram));
        assert!(tg.contains("on Telegram") && tg.contains("Use emoji sparingly."));
        let web = build_system_prompt(&cfg, &parts(Platform::Web));
        assert!(web.contains("Web only.") && !web.contains("local web chat"));
    }

    #[test]
    fn same_inputs_same_bytes() {
        let cfg = AgentConfig::default();
        assert_eq!(
            build_system_prompt(&cfg, &parts(Platform::Web)),
            build_system_prompt(&cfg, &parts(Platform::Web))
        );
    }
}
