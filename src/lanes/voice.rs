//! Spoken replies (`[voice]`): whether a turn's reply is also spoken, the `/voice on|off`
//! switch of a conversation (a `kv` row, `voice:<lane>`), and the speech step itself.
//!
//! The speech is made in the turn, after the agent loop and before the commit, never inside
//! the commit's transaction: the audio goes into the media cache and becomes one more file row
//! of the reply (`{reply}:file:{i}`), so it is delivered exactly once by the same outbox path as
//! every attached file, and a turn retried before its commit speaks again (as it asks the
//! model again). The call is metered like a model call of the turn (`[[budget.prices]]` for
//! `voice.tts_model`, its `input` rate per million characters), so caps count it. A speech API
//! that fails or is too slow costs nothing but a log line: the text reply goes alone.
//!
//! Must not: hold up or fail a reply for the sake of its audio; speak a reply that goes to a
//! platform that takes no files.

use crate::config::ReplyWithVoice;
use crate::domain::{Attachment, LaneKey, MediaKind, MediaSource, MessageEvent};
use crate::llm::{ChatMessage, ChatRequest, Meter, Usage};
use crate::store::StoreError;

use super::Deps;

fn key(lane: &LaneKey) -> String {
    format!("voice:{}", lane.as_str())
}

/// `/voice on|off` stores the conversation's choice; `/voice` says what holds.
pub(super) async fn command(
    deps: &Deps,
    lane: &LaneKey,
    on: Option<bool>,
) -> Result<String, StoreError> {
    let v = &deps.config.voice;
    if v.tts_url.is_none() || v.reply_with_voice == ReplyWithVoice::Never {
        return Ok("Spoken replies are not available here.".into());
    }
    match on {
        Some(on) => {
            deps.store
                .kv_set(&key(lane), if on { "on" } else { "off" })
                .await?;
            Ok(if on {
                "Spoken replies are on in this conversation: each answer comes as a voice message \
                 with its text."
            } else {
                "Spoken replies are off in this conversation: answers come as text."
            }
            .into())
        }
        None => {
            let set = deps.store.kv_get(&key(lane)).await?;
            let state = match (set.as_deref(), v.reply_with_voice) {
                (Some("on"), _) | (None, ReplyWithVoice::Always) => "on",
                (Some("off"), _) => "off",
                _ => "on for answers to voice messages",
            };
            Ok(format!(
                "Spoken replies are {state} in this conversation (/voice on, /voice off)."
            ))
        }
    }
}

/// Whether the reply to `ev` in `lane` is spoken: the operator's rule, the conversation's
/// `/voice` choice, and whether the platform takes files.
async fn wanted(deps: &Deps, lane: &LaneKey, ev: &MessageEvent) -> bool {
    let rule = deps.config.voice.reply_with_voice;
    let files = crate::config::spec(ev.platform).is_some_and(|s| s.caps.files_out);
    if rule == ReplyWithVoice::Never || !files || !ev.deliver_to().is_empty() {
        return false;
    }
    let choice = match deps.store.kv_get(&key(lane)).await {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(error = %e, "reading the conversation's /voice choice failed");
            None
        }
    };
    match choice.as_deref() {
        Some("on") => true,
        Some("off") => false,
        _ => {
            rule == ReplyWithVoice::Always
                || ev.attachments.iter().any(|a| a.kind == MediaKind::Voice)
        }
    }
}

/// The reply spoken as a cached Ogg/Opus file, or `None` (not wanted, not configured, or the
/// speech API failed: logged).
pub(super) async fn speak(
    deps: &Deps,
    lane: &LaneKey,
    ev: &MessageEvent,
    reply: &str,
    meter: &dyn Meter,
) -> Option<Attachment> {
    let speaker = deps.media.speaker()?;
    if reply.trim().is_empty() || !wanted(deps, lane, ev).await {
        return None;
    }
    let spoken = speaker.spoken(reply);
    let model = speaker.model();
    let request = ChatRequest {
        messages: vec![ChatMessage::new(crate::domain::Role::User, spoken)],
        tools: Vec::new(),
    };
    let hold = match meter.reserve(model, &request).await {
        Ok(h) => h,
        Err(e) => {
            tracing::info!(error = %e, "the spoken reply was not made: its cost is not allowed");
            return None;
        }
    };
    let started = std::time::Instant::now();
    let audio = speaker.speak(spoken).await;
    let outcome = if audio.is_ok() { "ok" } else { "failed" };
    metrics::counter!("herald_speech_total", "outcome" => outcome).increment(1);
    let bytes = match audio {
        Ok(b) => b,
        Err(e) => {
            meter.settle(hold, model, None).await;
            tracing::warn!(error = %e, lane = %lane, "speech failed; the reply goes as text only");
            return None;
        }
    };
    let chars = spoken.chars().count() as u64;
    let usage = Usage {
        fresh_input: chars,
        ..Usage::default()
    };
    meter.settle(hold, model, Some(usage)).await;
    let sha = match deps.media_cache.put(&bytes).await {
        Ok(sha) => sha,
        Err(e) => {
            tracing::warn!(error = %e, "caching the spoken reply failed; the reply goes as text only");
            return None;
        }
    };
    tracing::info!(lane = %lane, chars, bytes = bytes.len(), ms = started.elapsed().as_millis() as u64, "reply spoken");
    Some(Attachment {
        kind: MediaKind::Voice,
        source: MediaSource::Cached(sha.clone()),
        mime: Some("audio/ogg".into()),
        size: Some(bytes.len() as u64),
        name: Some("reply.ogg".into()),
        sha256: Some(sha),
        duration_secs: None,
    })
}
