//! What the fake Messages API checks in a request (the shapes the real API refuses) and how it
//! bills one: prompt caching simulated by breakpoint prefixes.
//!
//! A request is a sequence of blocks (tools, system blocks, then each message's blocks tagged
//! with its role); a breakpoint (`cache_control`) at block `i` saves the prefix ending there.
//! Like the real cache, a later request reads the longest saved prefix it repeats byte for
//! byte that ends at most 20 blocks before one of its own breakpoints; the blocks after that up
//! to its last breakpoint are a cache write; the rest is fresh input. `input_tokens` excludes
//! both cache parts, as Anthropic bills.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::Value;

/// What the real API accepts in one request.
pub const MAX_BREAKPOINTS: usize = 4;
/// How far back from a breakpoint the real cache looks for an earlier saved prefix.
const LOOKBACK_BLOCKS: usize = 20;
const BLOCK_TYPES: [&str; 6] = [
    "text",
    "image",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
];

/// One request's bill.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bill {
    pub input: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

impl Bill {
    pub fn prompt(&self) -> u64 {
        self.input + self.cache_read + self.cache_write
    }
}

/// The saved prefixes (their hashes).
#[derive(Default)]
pub struct Cache {
    saved: HashSet<u64>,
}

/// An `invalid_request_error` message when the body is one the real API refuses.
pub fn shape(body: &Value) -> Result<(), String> {
    if body["model"].as_str().is_none_or(str::is_empty) {
        return Err("model: Field required".into());
    }
    if body["max_tokens"].as_u64().is_none_or(|n| n == 0) {
        return Err("max_tokens: Field required".into());
    }
    if let Some(system) = body.get("system") {
        let ok = system.is_string()
            || system
                .as_array()
                .is_some_and(|a| a.iter().all(|b| b["type"] == "text" && nonempty_text(b)));
        if !ok {
            return Err("system: must be a string or a list of text blocks".into());
        }
    }
    let messages = body["messages"]
        .as_array()
        .filter(|m| !m.is_empty())
        .ok_or("messages: at least one message is required")?;
    let mut previous_tool_uses: Vec<String> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or_default();
        let want = if i % 2 == 0 { "user" } else { "assistant" };
        if role != want {
            return Err(format!(
                "messages.{i}: roles must alternate between \"user\" and \"assistant\", starting with \"user\""
            ));
        }
        let blocks = content_blocks(m);
        for b in &blocks {
            let t = b["type"].as_str().unwrap_or_default();
            if !BLOCK_TYPES.contains(&t) {
                return Err(format!("messages.{i}: unknown content block type {t:?}"));
            }
            if t == "text" && !nonempty_text(b) {
                return Err(format!(
                    "messages.{i}: text content blocks must be non-empty"
                ));
            }
            if t == "tool_result" {
                let id = b["tool_use_id"].as_str().unwrap_or_default();
                if !previous_tool_uses.iter().any(|u| u == id) {
                    return Err(format!(
                        "messages.{i}: unexpected `tool_use_id` found in `tool_result` blocks: {id}"
                    ));
                }
            }
        }
        let uses: Vec<String> = blocks
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .filter_map(|b| b["id"].as_str().map(str::to_string))
            .collect();
        if role == "user" && !previous_tool_uses.is_empty() {
            let answered = blocks.iter().filter(|b| b["type"] == "tool_result").count();
            if answered < previous_tool_uses.len() {
                return Err(format!(
                    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after"
                ));
            }
        }
        previous_tool_uses = uses;
    }
    let marks = sequence(body).iter().filter(|(_, bp)| *bp).count();
    if marks > MAX_BREAKPOINTS {
        return Err(format!(
            "A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {marks}."
        ));
    }
    Ok(())
}

fn nonempty_text(b: &Value) -> bool {
    b["text"].as_str().is_some_and(|t| !t.is_empty())
}

fn content_blocks(m: &Value) -> Vec<Value> {
    match &m["content"] {
        Value::String(s) => vec![serde_json::json!({"type": "text", "text": s})],
        Value::Array(a) => a.clone(),
        _ => Vec::new(),
    }
}

/// Every block of the prompt in cache order, as its bytes without `cache_control`, and whether
/// it carries a breakpoint.
fn sequence(body: &Value) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut push = |tag: &str, b: &Value| {
        let mut b = b.clone();
        let bp = b
            .as_object_mut()
            .and_then(|o| o.remove("cache_control"))
            .is_some();
        out.push((format!("{tag}:{b}"), bp));
    };
    for t in body["tools"].as_array().into_iter().flatten() {
        push("tool", t);
    }
    match &body["system"] {
        Value::Array(a) => a.iter().for_each(|b| push("system", b)),
        Value::String(s) => push("system", &serde_json::json!({"type": "text", "text": s})),
        _ => {}
    }
    for m in body["messages"].as_array().into_iter().flatten() {
        let role = m["role"].as_str().unwrap_or_default().to_string();
        for b in content_blocks(m) {
            push(&role, &b);
        }
    }
    out
}

/// Tokens of a block: its characters / 4, like a tokenizer on English, at least one.
fn tokens(block: &str) -> u64 {
    (block.len() as u64 / 4).max(1)
}

impl Cache {
    /// Bills `body` and saves the prefixes ending at its breakpoints.
    pub fn bill(&mut self, body: &Value) -> Bill {
        let seq = sequence(body);
        let mut hashes = Vec::with_capacity(seq.len());
        let mut cumulative = Vec::with_capacity(seq.len());
        let (mut h, mut total) = (DefaultHasher::new(), 0u64);
        for (bytes, _) in &seq {
            bytes.hash(&mut h);
            hashes.push(h.finish());
            total += tokens(bytes);
            cumulative.push(total);
        }
        let breakpoints: Vec<usize> = (0..seq.len()).filter(|&i| seq[i].1).collect();
        // The longest saved prefix within the lookback of one of this request's breakpoints.
        let read_end = breakpoints
            .iter()
            .flat_map(|&b| (b.saturating_sub(LOOKBACK_BLOCKS)..=b).rev())
            .filter(|&i| self.saved.contains(&hashes[i]))
            .max();
        let read = read_end.map_or(0, |i| cumulative[i]);
        let written_to = breakpoints.last().map_or(0, |&b| cumulative[b]);
        let write = written_to.saturating_sub(read);
        for &b in &breakpoints {
            self.saved.insert(hashes[b]);
        }
        Bill {
            input: total - read - write,
            cache_read: read,
            cache_write: write,
        }
    }
}
