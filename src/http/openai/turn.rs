//! One API request as one turn, on the same durable path as the web chat: the message goes
//! into the conversation's inbox (deduplicated by its request key), the lane's worker runs the
//! turn under its lease, and the answer is read back from the outbox rows the turn committed.
//! A retried request finds its inbox row and reads the same answer: no second turn.

use std::time::Duration;

use axum::http::HeaderMap;
use sha2::{Digest, Sha256};
use tokio::sync::broadcast;

use super::{KeyCaller, OaiError};
use crate::domain::{
    Attachment, LaneKey, MediaKind, MediaSource, MessageEvent, MessageKind, Origin, Platform,
};
use crate::http::HttpState;
use crate::lanes::StreamEvent;
use crate::media::MediaCache;
use crate::store::{InboxInsert, InboxStatus};

/// Longest conversation name and idempotency key taken, in characters.
const MAX_ID_CHARS: usize = 128;

/// What a request asks the agent, once read and checked.
pub(super) struct Ask {
    /// The conversation: `X-Herald-Conversation`, else the request's `user`, else `default`.
    pub conversation: String,
    /// The new input (the trailing user messages), with operator context when accepted, and
    /// the images it carries inline.
    pub input: super::input::TurnInput,
    /// The inbox key: from `Idempotency-Key`, else from the request itself (see [`dedup_key`]).
    pub dedup: String,
}

/// A submitted request: its inbox row and the receivers its answer arrives on.
pub(super) struct Submitted {
    pub inbox_id: i64,
    /// The id the client sees (`chatcmpl-…`, `resp_…`): random, kept beside the inbox row so a
    /// retry of the same request reads the same one ([`public_id`]).
    pub public_id: String,
    /// Written just now (not a retry of an earlier request).
    pub fresh: bool,
    pub finished: broadcast::Receiver<i64>,
    pub deltas: Option<broadcast::Receiver<StreamEvent>>,
}

/// The finished turn as the API answers it.
pub(super) struct Answer {
    pub text: String,
    pub usage: Usage,
}

/// Token counts of the turn (all of its model calls).
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub(super) struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    pub prompt_tokens_details: PromptDetails,
}

/// The part of the prompt read from the provider's cache.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub(super) struct PromptDetails {
    pub cached_tokens: u64,
}

impl From<crate::llm::Usage> for Usage {
    fn from(u: crate::llm::Usage) -> Usage {
        Usage {
            prompt_tokens: u.prompt_total(),
            completion_tokens: u.output,
            total_tokens: u.prompt_total() + u.output,
            prompt_tokens_details: PromptDetails {
                cached_tokens: u.cache_read,
            },
        }
    }
}

/// The conversation a request continues.
pub(super) fn conversation(headers: &HeaderMap, user: Option<&str>) -> Result<String, OaiError> {
    let header = headers
        .get("x-herald-conversation")
        .map(|v| v.to_str().map(str::trim))
        .transpose()
        .map_err(|_| OaiError::bad_request("X-Herald-Conversation must be plain text"))?;
    let name = header
        .or(user.map(str::trim))
        .filter(|s| !s.is_empty())
        .unwrap_or("default");
    if name.chars().count() > MAX_ID_CHARS {
        return Err(OaiError::bad_request(format!(
            "the conversation name is longer than {MAX_ID_CHARS} characters"
        )));
    }
    Ok(name.to_string())
}

/// The inbox key of a request. `Idempotency-Key` when sent: the same key in the same
/// conversation is the same request. Otherwise a digest of the request body, which the openai
/// SDK sends unchanged when it retries (only its `x-stainless-retry-count` header changes):
/// the same body in the same conversation is the same request. A chat client sends the whole
/// history each time, so its next message never repeats an earlier body.
pub(super) fn dedup_key(headers: &HeaderMap, body: &[u8]) -> Result<String, OaiError> {
    if let Some(v) = headers.get("idempotency-key") {
        let v = v
            .to_str()
            .ok()
            .map(str::trim)
            .filter(|v| !v.is_empty() && v.chars().count() <= MAX_ID_CHARS)
            .ok_or_else(|| {
                OaiError::bad_request(format!(
                    "Idempotency-Key must be 1-{MAX_ID_CHARS} characters of plain text"
                ))
            })?;
        return Ok(format!("idem:{v}"));
    }
    Ok(format!("body:{}", hex::encode(Sha256::digest(body))))
}

/// Writes the request to its conversation's inbox (or finds the earlier one it repeats).
pub(super) async fn submit(
    state: &HttpState,
    caller: &KeyCaller,
    ask: &Ask,
    stream: bool,
) -> Result<Submitted, OaiError> {
    let limit = state.config.web.max_message_chars;
    let chars = ask.input.text.chars().count();
    if chars > limit {
        return Err(OaiError::bad_request(format!(
            "the new input has {chars} characters; the limit is {limit} (web.max_message_chars)"
        )));
    }
    let attachments = keep_images(state, &ask.input.images).await?;
    let kind = if attachments.is_empty() {
        MessageKind::Text
    } else {
        MessageKind::Media
    };
    let mut ev = MessageEvent::new(
        Platform::API,
        &caller.name,
        &caller.name,
        &ask.input.text,
        Origin::Person {
            kind,
            from_loopback: false,
        },
        ask.dedup.clone(),
        chrono::Utc::now(),
    );
    ev.attachments = attachments;
    // The lane: `api:<key name>:<conversation>`.
    ev.thread_id = Some(ask.conversation.clone());
    ev.sender_name = caller.person.clone();
    // Subscribe before the insert so the finish signal cannot slip past.
    let finished = state.ingest.subscribe_finished();
    let deltas = stream.then(|| state.lanes.stream_hub().subscribe());
    let (inbox_id, fresh) = match state.ingest.ingest(&ev).await {
        Ok(r @ InboxInsert::Inserted(_)) => (r.id(), true),
        Ok(r) => (r.id(), false),
        Err(e) => {
            tracing::warn!(error = %e, "cannot store an API request");
            return Err(OaiError::unavailable(
                "the request could not be stored; nothing ran, try again",
            ));
        }
    };
    let public_id = public_id(state, inbox_id).await?;
    Ok(Submitted {
        inbox_id,
        public_id,
        fresh,
        finished,
        deltas,
    })
}

/// Characters of a public id: 24 of 62 is 142 bits, nothing to count or guess.
const PUBLIC_ID_CHARS: usize = 24;

/// The row's public id, made now for a new row. Row ids are a counter: sent out, they would
/// tell every key holder how busy the server is and name other keys' responses.
async fn public_id(state: &HttpState, inbox_id: i64) -> Result<String, OaiError> {
    use rand::distr::{Alphanumeric, SampleString};
    let candidate = Alphanumeric.sample_string(&mut rand::rng(), PUBLIC_ID_CHARS);
    state
        .store
        .inbox_public_id(inbox_id, &candidate)
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, "cannot name an API request");
            OaiError::unavailable("the request could not be stored; try again")
        })
}

/// Puts a request's inline images into the media cache and names them as attachments, so the
/// turn reads them like a photo from a chat (an image part for a model that sees, a line for
/// one that does not). Each is held to `media.max_bytes`.
async fn keep_images(
    state: &HttpState,
    images: &[super::input::InlineImage],
) -> Result<Vec<Attachment>, OaiError> {
    let max = state.config.media.max_bytes;
    let cache = MediaCache::under(
        &state.config.server.data_dir,
        state.config.media.cache_hours,
    );
    let mut out = Vec::with_capacity(images.len());
    for img in images {
        if img.bytes.len() as u64 > max {
            return Err(OaiError::bad_request(format!(
                "an image of {} bytes is over the limit of {max} (media.max_bytes)",
                img.bytes.len()
            )));
        }
        let sha = cache.put(&img.bytes).await.map_err(|e| {
            tracing::warn!(error = %e, "cannot keep an API request's image");
            OaiError::unavailable("the image could not be stored; nothing ran, try again")
        })?;
        let mut a = Attachment::new(MediaKind::Photo, MediaSource::Cached(sha.clone()));
        a.mime = Some(img.mime.clone());
        a.size = Some(img.bytes.len() as u64);
        a.sha256 = Some(sha);
        out.push(a);
    }
    Ok(out)
}

/// Waits for the turn of `inbox_id` and reads its answer, or the error it ended in.
pub(super) async fn wait(
    state: &HttpState,
    inbox_id: i64,
    fresh: bool,
    finished: &mut broadcast::Receiver<i64>,
) -> Result<Answer, OaiError> {
    let deadline =
        tokio::time::Instant::now() + Duration::from_secs(state.config.web.reply_timeout_secs);
    if fresh {
        crate::http::chat::wait_finished(finished, inbox_id).await;
    }
    loop {
        if let Some(done) = settled(state, inbox_id).await {
            return done;
        }
        if tokio::time::Instant::now() > deadline {
            return Err(OaiError::unavailable(
                "the answer is taking longer than web.reply_timeout_secs; send the same request \
                 again (same Idempotency-Key) to read it when it is ready",
            ));
        }
        crate::http::chat::wait_finished(finished, inbox_id).await;
    }
}

/// The answer once the inbox row is settled; `None` while it is pending (or unreadable).
pub(super) async fn settled(state: &HttpState, inbox_id: i64) -> Option<Result<Answer, OaiError>> {
    let row = match state.store.inbox_get(inbox_id).await {
        Ok(Some(row)) if row.status != InboxStatus::Pending => row,
        Ok(_) => return None,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the inbox while waiting for an API answer");
            return None;
        }
    };
    let rows = match state.store.outbox_for_inbox(inbox_id).await {
        Ok(rows) => rows,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read an API answer");
            return Some(Err(OaiError::unavailable("the answer cannot be read now")));
        }
    };
    let text = rows
        .iter()
        .map(|r| r.text.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    Some(match row.status {
        InboxStatus::Skipped if rows.is_empty() => Err(OaiError::forbidden(
            "this key's person may not talk to the agent",
        )),
        InboxStatus::Failed | InboxStatus::Dead => {
            Err(failure(row.note.as_deref().unwrap_or(""), text))
        }
        _ => Ok(Answer {
            text,
            usage: turn_usage(state, &row.lane, inbox_id).await,
        }),
    })
}

/// A failed turn as an API error: the note the turn settled with names the model's failure
/// (`LlmError`'s text), the reply is the line the person would have read in a chat.
fn failure(note: &str, line: String) -> OaiError {
    let line = if line.trim().is_empty() {
        "the turn failed".to_string()
    } else {
        line
    };
    if note.starts_with(crate::lanes::OVER_BUDGET) {
        OaiError::over_budget(line)
    } else if note.starts_with("rate limited") {
        OaiError::rate_limited(line, Duration::from_secs(30))
    } else {
        OaiError::unavailable(line)
    }
}

/// Turns of the lane read to find the request's own (a retried turn has one row per try).
const TURNS_READ: i64 = 20;

/// The turn's token usage: what all of its model calls billed, every try of it.
async fn turn_usage(state: &HttpState, lane: &LaneKey, inbox_id: i64) -> Usage {
    let turns = match state.store.turns(lane, TURNS_READ).await {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read a turn's usage");
            return Usage::default();
        }
    };
    let mut sum = crate::llm::Usage::default();
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    for t in turns.iter().filter(|t| t.inbox_id == Some(inbox_id)) {
        sum.fresh_input += count(t.billed.fresh_input);
        sum.output += count(t.billed.output);
        sum.cache_read += count(t.billed.cache_read);
        sum.cache_write += count(t.billed.cache_write);
    }
    Usage::from(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_map_to_statuses() {
        let cases = [
            (
                "over budget: the daily cap is reached",
                429,
                "insufficient_quota",
            ),
            (
                "rate limited by the model provider",
                429,
                "rate_limit_exceeded",
            ),
            ("model provider unavailable: 502", 503, "model_unavailable"),
            ("turn timed out", 503, "model_unavailable"),
        ];
        for (note, status, code) in cases {
            let e = failure(note, "a line".into());
            assert_eq!((e.status.as_u16(), e.code), (status, code), "{note}");
            assert_eq!(e.message, "a line");
        }
    }

    #[test]
    fn the_conversation_comes_from_the_header_then_user() {
        let mut h = HeaderMap::new();
        assert_eq!(conversation(&h, None).unwrap(), "default");
        assert_eq!(conversation(&h, Some(" bob ")).unwrap(), "bob");
        h.insert("x-herald-conversation", "work".parse().unwrap());
        assert_eq!(conversation(&h, Some("bob")).unwrap(), "work");
    }
}
