//! Reading a streamed Messages API answer (`stream: true`): server-sent events parsed by
//! `eventsource-stream`, assembled into the same [`ChatResponse`] a plain call returns.
//!
//! `message_start` brings the model and the prompt's usage, `content_block_start` opens a text,
//! tool_use or thinking block, `content_block_delta` extends it (`text_delta` to the sink's
//! text, `input_json_delta` to a tool call's arguments, `thinking_delta` only to the sink's
//! reasoning side: never into the content, never stored or replayed), `message_delta` carries
//! the stop reason and the output tokens, `message_stop` ends it. An `error` event (e.g.
//! `overloaded_error`) is transient; a stream that ends before `message_stop`, or breaks, is a
//! retryable failure: a half answer is never returned as an answer.

use std::collections::BTreeMap;

use eventsource_stream::{EventStreamError, Eventsource};
use futures::StreamExt;
use serde_json::Value;

use super::anthropic::{tool_call, WireUsage};
use super::openai::{classify_transport, excerpt};
use super::{ChatResponse, DeltaSink, LlmError};

#[derive(Default)]
struct Block {
    kind: String,
    text: String,
    /// The `tool_use` block as it started (id, name), its input arriving as JSON pieces.
    start: Value,
    json: String,
}

#[derive(Default)]
pub(super) struct Assembly {
    blocks: BTreeMap<u64, Block>,
    usage: WireUsage,
    model: String,
    stopped: bool,
}

fn bad(what: &str, data: &str) -> LlmError {
    LlmError::BadResponse(format!("{what} in {:?}", excerpt(data)))
}

impl Assembly {
    /// Takes one event's `data:` payload (its `type` field names the event).
    pub(super) fn feed(&mut self, data: &str, sink: &dyn DeltaSink) -> Result<(), LlmError> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(());
        }
        let ev: Value = serde_json::from_str(data).map_err(|e| bad(&e.to_string(), data))?;
        let index = ev["index"].as_u64().unwrap_or(0);
        match ev["type"].as_str().unwrap_or_default() {
            "message_start" => {
                let m = &ev["message"];
                self.model = m["model"].as_str().unwrap_or_default().to_string();
                if let Ok(u) = serde_json::from_value::<WireUsage>(m["usage"].clone()) {
                    self.usage.update(u);
                }
            }
            "content_block_start" => {
                let b = &ev["content_block"];
                let block = Block {
                    kind: b["type"].as_str().unwrap_or_default().to_string(),
                    text: b["text"].as_str().unwrap_or_default().to_string(),
                    start: b.clone(),
                    json: String::new(),
                };
                if !block.text.is_empty() {
                    sink.text(&block.text);
                }
                self.blocks.insert(index, block);
            }
            "content_block_delta" => self.delta(index, &ev["delta"], sink, data)?,
            "message_delta" => {
                if let Ok(u) = serde_json::from_value::<WireUsage>(ev["usage"].clone()) {
                    self.usage.update(u);
                }
            }
            "message_stop" => self.stopped = true,
            "error" => {
                return Err(LlmError::Transient(format!(
                    "error inside the stream: {}",
                    excerpt(&ev["error"].to_string())
                )))
            }
            // ping, content_block_stop, and event types added later.
            _ => {}
        }
        Ok(())
    }

    fn delta(
        &mut self,
        index: u64,
        d: &Value,
        sink: &dyn DeltaSink,
        data: &str,
    ) -> Result<(), LlmError> {
        let block = self
            .blocks
            .get_mut(&index)
            .ok_or_else(|| bad("a delta for a block that never started", data))?;
        match d["type"].as_str().unwrap_or_default() {
            "text_delta" => {
                let t = d["text"].as_str().unwrap_or_default();
                sink.text(t);
                block.text.push_str(t);
            }
            "input_json_delta" => block
                .json
                .push_str(d["partial_json"].as_str().unwrap_or_default()),
            "thinking_delta" => sink.reasoning(d["thinking"].as_str().unwrap_or_default()),
            _ => {}
        }
        Ok(())
    }

    /// The whole answer, or the failure of a stream that did not finish.
    pub(super) fn finish(self) -> Result<ChatResponse, LlmError> {
        if !self.stopped {
            return Err(LlmError::BadResponse(
                "the answer stream ended before the answer did".into(),
            ));
        }
        let mut content: Option<String> = None;
        let mut tool_calls = Vec::new();
        for b in self.blocks.into_values() {
            match b.kind.as_str() {
                "text" => content.get_or_insert_with(String::new).push_str(&b.text),
                "tool_use" => {
                    let mut start = b.start;
                    if !b.json.trim().is_empty() {
                        start["input"] = serde_json::from_str(&b.json).map_err(|e| {
                            LlmError::BadResponse(format!("a streamed tool input: {e}"))
                        })?;
                    }
                    tool_calls.push(tool_call(&start).ok_or_else(|| {
                        LlmError::BadResponse("a streamed tool call has no id or name".into())
                    })?);
                }
                _ => {}
            }
        }
        if content.is_none() && tool_calls.is_empty() {
            return Err(LlmError::BadResponse(
                "the answer has neither text nor tool calls".into(),
            ));
        }
        Ok(ChatResponse {
            content,
            tool_calls,
            usage: self.usage.normalized(),
            model: self.model,
        })
    }
}

/// Reads a 2xx streamed answer to its end.
pub(super) async fn read(
    resp: reqwest::Response,
    sink: &dyn DeltaSink,
) -> Result<ChatResponse, LlmError> {
    let mut events = resp.bytes_stream().eventsource();
    let mut assembly = Assembly::default();
    while let Some(event) = events.next().await {
        let event = event.map_err(|e| match e {
            EventStreamError::Transport(e) => match classify_transport(e) {
                LlmError::BadResponse(m) => LlmError::Transient(m),
                other => other,
            },
            other => LlmError::BadResponse(other.to_string()),
        })?;
        assembly.feed(&event.data, sink)?;
        if assembly.stopped {
            break;
        }
    }
    assembly.finish()
}

#[cfg(test)]
mod tests {
    use super::super::stream::testing::Recording;
    use super::super::Usage;
    use super::*;

    fn run(datas: &[&str], sink: &Recording) -> Result<ChatResponse, LlmError> {
        let mut a = Assembly::default();
        for d in datas {
            a.feed(d, sink)?;
        }
        a.finish()
    }

    #[test]
    fn text_thinking_tools_and_usage() {
        let sink = Recording::default();
        let r = run(
            &[
                r#"{"type":"message_start","message":{"model":"claude-x","usage":{"input_tokens":10,"cache_read_input_tokens":900,"cache_creation_input_tokens":50,"output_tokens":1}}}"#,
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}"#,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"x"}}"#,
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
                r#"{"type":"ping"}"#,
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hel"}}"#,
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"lo"}}"#,
                r#"{"type":"content_block_stop","index":1}"#,
                r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"tu_1","name":"clock","input":{}}}"#,
                r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"tz\":"}}"#,
                r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"UTC\"}"}}"#,
                r#"{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"tu_2","name":"memory","input":{}}}"#,
                r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":42}}"#,
                r#"{"type":"message_stop"}"#,
            ],
            &sink,
        )
        .unwrap();
        assert_eq!(r.content.as_deref(), Some("Hello"));
        assert_eq!(*sink.text.lock().unwrap(), "Hello");
        assert_eq!(*sink.reasoning.lock().unwrap(), "hmm");
        assert_eq!(r.tool_calls.len(), 2);
        assert_eq!(r.tool_calls[0].arguments, r#"{"tz":"UTC"}"#);
        assert_eq!(r.tool_calls[1].arguments, "{}");
        assert_eq!(r.model, "claude-x");
        assert_eq!(
            r.usage,
            Usage {
                fresh_input: 10,
                output: 42,
                cache_read: 900,
                cache_write: 50
            }
        );
    }

    #[test]
    fn errors_and_cut_streams_are_retryable() {
        let sink = Recording::default();
        let start = r#"{"type":"message_start","message":{"model":"m","usage":{}}}"#;
        let text = r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"Half"}}"#;
        let err = run(&[start, text], &sink).unwrap_err();
        assert!(err.is_retryable(), "{err:?}");
        let overloaded =
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        let err = run(&[start, overloaded], &sink).unwrap_err();
        assert!(matches!(err, LlmError::Transient(_)), "{err:?}");
        assert!(run(&["{not json"], &sink).unwrap_err().is_retryable());
    }
}
