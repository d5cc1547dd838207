//! `herald export LANE`: a lane's recorded conversation as a case file, so a bug seen in chat
//! becomes a regression case with one command. The person's messages are the inputs, the
//! agent's recorded replies their `reference`, and the last reply the starting expectation
//! (which the operator edits down to what matters). Secrets (e-mail addresses, phone and card
//! numbers, long hex, tokens) are scrubbed, and every other person the configuration names is
//! replaced by "someone". The live store is opened read-only.

use std::path::Path;

use anyhow::Context;
use chrono::{DateTime, NaiveDate, Utc};

use super::case::{Case, CaseFile, CaseMessage, Expect};
use crate::cli::eval::ExportArgs;
use crate::cli::{open_store, Access};
use crate::config::Config;
use crate::domain::{LaneKey, Role};
use crate::store::Store;

/// One person's message and what the agent answered, as recorded.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub text: String,
    pub reply: String,
    /// When the message was recorded (ms), for matching the spend ledger.
    pub at: i64,
}

/// A recorded lane: where it is and who speaks in it.
pub struct Recording {
    pub platform: String,
    pub chat: String,
    pub turns: Vec<Recorded>,
}

/// `--since`: RFC 3339, a date (`2026-12-01`, midnight UTC), or an age (`30m`, `2h`, `3d`).
pub fn since_ms(since: Option<&str>, now: DateTime<Utc>) -> anyhow::Result<i64> {
    let Some(s) = since.map(str::trim) else {
        return Ok(0);
    };
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.timestamp_millis());
    }
    if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return Ok(d
            .and_hms_opt(0, 0, 0)
            .expect("midnight")
            .and_utc()
            .timestamp_millis());
    }
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: i64 = num
        .parse()
        .ok()
        .filter(|_| !num.is_empty())
        .ok_or_else(|| bad_since(s))?;
    let secs = match unit {
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(bad_since(s)),
    };
    Ok(now.timestamp_millis() - n * secs * 1000)
}

fn bad_since(s: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "--since {s:?}: give a time (2026-12-01T09:00:00Z), a date (2026-12-01) or an age \
         (30m, 2h, 3d)"
    )
}

/// The person's requests of `lane` since `since` (ms), oldest first, each with the agent's
/// answer up to the next request.
pub async fn recording(store: &dyn Store, lane: &str, since: i64) -> anyhow::Result<Recording> {
    let key = LaneKey::parse(lane);
    let mut sessions = store.sessions_list(Some(&key), 10_000).await?;
    if sessions.is_empty() {
        anyhow::bail!("no conversation in lane {lane} (`herald sessions list` shows the lanes)");
    }
    sessions.reverse();
    let mut turns: Vec<Recorded> = Vec::new();
    for s in sessions {
        for m in store.messages(&s.id, false).await? {
            if m.created_at < since {
                continue;
            }
            if m.is_person_request() {
                turns.push(Recorded {
                    text: m.content.clone(),
                    reply: String::new(),
                    at: m.created_at,
                });
            } else if m.role == Role::Assistant && !m.content.is_empty() {
                if let Some(t) = turns.last_mut() {
                    if !t.reply.is_empty() {
                        t.reply.push('\n');
                    }
                    t.reply.push_str(&m.content);
                }
            }
        }
    }
    if turns.is_empty() {
        anyhow::bail!("lane {lane} has no message from a person in that time");
    }
    let platform = key.platform().to_string();
    let chat = key
        .as_str()
        .strip_prefix(&format!("{platform}:"))
        .unwrap_or(key.as_str())
        .to_string();
    Ok(Recording {
        platform,
        chat,
        turns,
    })
}

/// Secrets and the identities of everyone but the lane's own person taken out of `text`.
fn redact(text: &str, config: &Config, own: &str) -> String {
    let mut out = crate::handoff::scrub_confidential(text);
    let mut others: Vec<String> = Vec::new();
    for p in &config.people {
        if p.ids.iter().any(|id| id.ends_with(&format!(":{own}"))) {
            continue;
        }
        others.push(p.name.clone());
        others.extend(p.ids.iter().cloned());
        others.extend(
            p.ids
                .iter()
                .filter_map(|id| id.split_once(':').map(|(_, i)| i.to_string())),
        );
    }
    others.extend(config.telegram.allowed_users.iter().cloned());
    others.extend(config.discord.allowed_users.iter().cloned());
    others.retain(|o| o.len() >= 3 && o != own);
    // Longest first, so an identity is not half-replaced through a shorter one inside it.
    others.sort_by_key(|o| std::cmp::Reverse(o.len()));
    for o in others {
        out = out.replace(&o, "someone");
    }
    out
}

/// The case file for a recording, redacted.
pub fn case_file(rec: &Recording, lane: &str, config: &Config) -> CaseFile {
    let own = rec.chat.as_str();
    let messages: Vec<CaseMessage> = rec
        .turns
        .iter()
        .map(|t| CaseMessage {
            platform: rec.platform.clone(),
            person: own.to_string(),
            chat: None,
            text: redact(&t.text, config, own),
            attachments: Vec::new(),
            reference: Some(redact(&t.reply, config, own)),
        })
        .collect();
    let last = messages.last().and_then(|m| m.reference.clone());
    let expect = Expect {
        reply_contains: last.into_iter().filter(|r| !r.is_empty()).collect(),
        ..Expect::default()
    };
    CaseFile {
        cases: vec![Case {
            name: format!("{lane} conversation"),
            messages,
            expect,
        }],
    }
}

/// `herald export`.
pub async fn export(config: &Config, args: ExportArgs) -> anyhow::Result<()> {
    let since = since_ms(args.since.as_deref(), Utc::now())?;
    let store = open_store(config, "export", Access::Read).await?;
    let rec = recording(store.as_ref(), &args.lane, since).await;
    store.close().await;
    let rec = rec?;
    let file = case_file(&rec, &args.lane, config);
    let text = format!(
        "# Exported by `herald export {}`: the person's messages, the agent's recorded replies as\n\
         # `reference` (never checked). Edit [cases.expect] down to what must stay true, then\n\
         # run `herald eval` on this file (docs/evals.md).\n\n{}",
        args.lane,
        toml::to_string(&file).context("writing the case file")?
    );
    match &args.out {
        Some(path) => write_out(path, &text)?,
        None => print!("{text}"),
    }
    Ok(())
}

fn write_out(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
