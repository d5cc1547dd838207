//! Sessions in and out: `herald sessions export`, `import` and `compact --dry-run`.
//!
//! Export writes one JSON object per line: first the session's system prompt as a `system`
//! row, then every message (live, compacted and retracted) with its ids and flags. Import reads
//! that format back, and also OpenAI chat-format message lists (a JSON array, an object with
//! `messages`, or one message per line) with tool calls and tool results, so a conversation
//! from another agent can become a searchable Herald session. An import is written through a
//! lease on its lane like any transcript write; it never touches an open session.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context};
use serde_json::{json, Value};

use super::progress::ProgressBar;
use crate::agent::compaction::check_faithful;
use crate::agent::context::plan::{plan, to_proj};
use crate::agent::context::window::context_window;
use crate::config::Config;
use crate::domain::{LaneKey, Role, SessionId, ToolCall};
use crate::store::{ImportedMessage, NewMessage, Session, Store, StoredMessage};

/// The session as JSON lines (system prompt first, then every message in id order).
pub async fn export_jsonl(store: &dyn Store, id: &str) -> anyhow::Result<String> {
    let mut out = Vec::new();
    export_to(store, id, &mut out, &ProgressBar::hidden()).await?;
    Ok(String::from_utf8(out)?)
}

/// Writes the export to `out`, advancing `progress` by one per message; returns the message
/// count. The same bytes as [`export_jsonl`]: the CLI streams them instead of buffering.
pub async fn export_to(
    store: &dyn Store,
    id: &str,
    out: &mut dyn Write,
    progress: &ProgressBar,
) -> anyhow::Result<usize> {
    let id = &SessionId::from(id);
    let Some(s) = store.session_get(id).await? else {
        bail!("no session {id}");
    };
    let head = json!({"session_id": s.id, "lane": s.lane, "role": "system",
        "content": s.system_prompt, "model": s.model, "started_at": s.started_at});
    let messages = store.messages(id, false).await?;
    progress.set_length(messages.len() as u64);
    writeln!(out, "{head}")?;
    for m in &messages {
        writeln!(out, "{}", export_row(m))?;
        progress.inc(1);
    }
    out.flush()?;
    Ok(messages.len())
}

fn export_row(m: &StoredMessage) -> Value {
    json!({
        "id": m.id, "session_id": m.session_id, "role": m.role, "content": m.content,
        "api_content": m.api_content, "tool_calls": m.tool_calls,
        "tool_call_id": m.tool_call_id, "tool_name": m.tool_name,
        "active": m.active, "compacted": m.compacted,
        "platform_message_id": m.platform_message_id, "created_at": m.created_at,
    })
}

/// A transcript read from a file: the system prompt (leading system rows) and the messages.
#[derive(Debug, Default, PartialEq)]
pub struct Parsed {
    pub system_prompt: String,
    pub messages: Vec<ImportedMessage>,
}

/// Parses an export, an OpenAI message array (bare or under `messages`), or JSON lines.
pub fn parse_transcript(text: &str) -> anyhow::Result<Parsed> {
    parse_with_progress(text, &ProgressBar::hidden())
}

/// [`parse_transcript`], advancing `progress` by one per row read.
fn parse_with_progress(text: &str, progress: &ProgressBar) -> anyhow::Result<Parsed> {
    let trimmed = text.trim_start();
    let rows: Vec<Value> =
        if trimmed.starts_with('[') || trimmed.starts_with('{') && !has_lines(trimmed) {
            let v: Value = serde_json::from_str(trimmed).context("the file is not valid JSON")?;
            match v {
                Value::Array(a) => a,
                Value::Object(o) if o.contains_key("role") => vec![Value::Object(o)],
                Value::Object(mut o) => match o.remove("messages") {
                    Some(Value::Array(a)) => a,
                    _ => bail!("a JSON object must hold a `messages` array"),
                },
                _ => bail!("expected a list of messages"),
            }
        } else {
            text.lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
                .map(|(i, l)| serde_json::from_str(l).with_context(|| format!("line {}", i + 1)))
                .collect::<anyhow::Result<_>>()?
        };
    let mut out = Parsed::default();
    let mut call_names = std::collections::HashMap::new();
    progress.set_length(rows.len() as u64);
    for (i, row) in rows.iter().enumerate() {
        let m = message_from(row, &call_names).with_context(|| format!("message {}", i + 1))?;
        progress.inc(1);
        for c in &m.message.tool_calls {
            call_names.insert(c.id.clone(), c.name.clone());
        }
        if m.message.role == Role::System && out.messages.is_empty() {
            if !out.system_prompt.is_empty() {
                out.system_prompt.push('\n');
            }
            out.system_prompt.push_str(&m.message.content);
            continue;
        }
        out.messages.push(m);
    }
    Ok(out)
}

/// One JSON object per line, rather than one pretty-printed object.
fn has_lines(text: &str) -> bool {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    matches!((lines.next(), lines.next()), (Some(a), Some(_)) if serde_json::from_str::<Value>(a).is_ok())
}

fn message_from(
    row: &Value,
    call_names: &std::collections::HashMap<String, String>,
) -> anyhow::Result<ImportedMessage> {
    let role = match row["role"].as_str().unwrap_or_default() {
        "developer" => Role::System,
        "function" => Role::Tool,
        r => Role::parse(r).with_context(|| format!("unknown role {r:?}"))?,
    };
    let mut m = NewMessage::new(role, text_of(&row["content"]));
    m.api_content = row["api_content"].as_str().map(str::to_string);
    if let Some(calls) = row["tool_calls"].as_array() {
        m.tool_calls = calls
            .iter()
            .map(tool_call_from)
            .collect::<anyhow::Result<_>>()?;
    }
    m.tool_call_id = row["tool_call_id"].as_str().map(str::to_string);
    // Our exports say which user rows a person wrote; in a foreign transcript every user row
    // is taken for one (so an imported session is not "before its first turn").
    m.platform_message_id = match row.get("platform_message_id") {
        Some(v) => v.as_str().map(str::to_string),
        None if role == Role::User => Some("imported".into()),
        None => None,
    };
    m.tool_name = row["tool_name"]
        .as_str()
        .or(row["name"].as_str())
        .map(str::to_string)
        .or_else(|| {
            m.tool_call_id
                .as_ref()
                .and_then(|id| call_names.get(id).cloned())
        });
    if role == Role::Tool && m.tool_call_id.is_none() {
        bail!("a tool result needs a tool_call_id");
    }
    Ok(ImportedMessage {
        message: m,
        active: row["active"].as_bool().unwrap_or(true),
        compacted: row["compacted"].as_bool().unwrap_or(false),
    })
}

/// Text of an OpenAI `content`: a string, null, or a list of parts (text parts joined).
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str().or(p.as_str()))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Herald's `{id, name, arguments}` or OpenAI's `{id, type, function: {name, arguments}}`.
fn tool_call_from(v: &Value) -> anyhow::Result<ToolCall> {
    let f = if v["function"].is_object() {
        &v["function"]
    } else {
        v
    };
    let name = f["name"].as_str().context("a tool call without a name")?;
    let arguments = match &f["arguments"] {
        Value::String(s) => s.clone(),
        Value::Null => "{}".to_string(),
        other => other.to_string(),
    };
    Ok(ToolCall {
        id: v["id"].as_str().unwrap_or_default().to_string(),
        name: name.to_string(),
        arguments,
    })
}

/// Imports `file` as a new closed session in `lane` (default `import:<file stem>`), under a
/// lease on that lane. Returns the new session id. `progress` counts the messages read; the
/// write is one transaction, so the bar then waits on it as a whole.
pub async fn import_file(
    store: &dyn Store,
    file: &Path,
    lane: Option<&str>,
    progress: &ProgressBar,
) -> anyhow::Result<(String, usize)> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let parsed = parse_with_progress(&text, progress)?;
    if parsed.messages.is_empty() {
        bail!("{} holds no messages", file.display());
    }
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("file");
    let lane = LaneKey::parse(lane.unwrap_or(&format!("import:{stem}")));
    let holder = format!(
        "herald-import-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let Some(lease) = store
        .lease_acquire(lane.as_str(), &holder, Duration::from_secs(60))
        .await?
    else {
        bail!("lane {lane} is busy (another process holds its lease); try again or pick --lane");
    };
    let parent_id = store
        .sessions_list(Some(&lane), 1)
        .await?
        .into_iter()
        .next()
        .map(|s| s.id);
    let session = Session {
        parent_id,
        ..Session::new(
            uuid::Uuid::new_v4().to_string(),
            lane.clone(),
            crate::store::now_ms(),
            parsed.system_prompt,
            "import",
        )
    };
    progress.set_message(format!(
        "writing {} messages in one transaction",
        parsed.messages.len()
    ));
    let res = store
        .session_import(&lease, &session, "imported", &parsed.messages)
        .await;
    store.lease_release(&lease).await?;
    let ids = res?;
    Ok((session.id.into_string(), ids.len()))
}

/// What compacting the session now would insert, without writing anything.
pub async fn compact_dry_run(
    store: &dyn Store,
    config: &Config,
    id: &str,
) -> anyhow::Result<String> {
    let id = &SessionId::from(id);
    if store.session_get(id).await?.is_none() {
        bail!("no session {id}");
    }
    let live = store.messages(id, true).await?;
    let window = context_window(&config.llm).await;
    let Some(p) = plan(&live, window, config.context.tail_tokens) else {
        return Ok(format!(
            "nothing to compact: {} live messages fit in the head and the kept tail (window {window} tokens)\n",
            live.len()
        ));
    };
    let middle: Vec<_> = live
        .iter()
        .filter(|m| p.middle_ids.contains(&m.id))
        .map(to_proj)
        .collect();
    let faithful = match check_faithful(&p.projection, &middle) {
        Ok(()) => "every session-log line quotes the message it cites".to_string(),
        Err(e) => format!("faithfulness check FAILED: {e}"),
    };
    Ok(format!(
        "window {window} tokens; head {} messages kept; middle {} messages (#{} to #{}) would be \
         flipped to compacted; tail {} messages re-inserted after the carrier.\n{faithful}\n\n{}\n",
        p.head_len,
        p.middle_ids.len(),
        p.middle_ids.first().copied().unwrap_or_default(),
        p.middle_ids.last().copied().unwrap_or_default(),
        p.tail_len,
        p.insert[0].api_content.as_deref().unwrap_or_default()
    ))
}

#[cfg(test)]
mod tests;
