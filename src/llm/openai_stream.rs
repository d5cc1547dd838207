//! Reading a streamed chat completion (`stream: true`): server-sent events of deltas, parsed
//! by `eventsource-stream`, assembled into the same [`ChatResponse`] a plain call returns.
//!
//! Text deltas go to the sink as they come; reasoning deltas (`reasoning_content` or
//! `reasoning`) go only to the sink's reasoning side and never into the content; tool-call
//! deltas are joined by their `index`; usage comes from the final chunk
//! (`stream_options.include_usage`) and is normalized exactly like a plain answer's. A stream
//! that ends before `[DONE]` or a `finish_reason`, or breaks, is a retryable failure: a half
//! answer is never returned as an answer.

use std::collections::BTreeMap;

use eventsource_stream::{EventStreamError, Eventsource};
use futures::StreamExt;
use serde::Deserialize;

use super::openai::{classify_transport, excerpt, WireUsage};
use super::{ChatResponse, DeltaSink, LlmError};
use crate::domain::ToolCall;

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ToolDelta>,
}

#[derive(Deserialize)]
struct ToolDelta {
    #[serde(default)]
    index: u32,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

/// What the chunks so far add up to.
#[derive(Default)]
pub(super) struct Assembly {
    content: String,
    saw_content: bool,
    calls: BTreeMap<u32, ToolCall>,
    usage: Option<WireUsage>,
    model: String,
    finished: bool,
    done: bool,
}

impl Assembly {
    /// Takes one `data:` payload.
    pub(super) fn feed(&mut self, data: &str, sink: &dyn DeltaSink) -> Result<(), LlmError> {
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        if data.is_empty() {
            return Ok(());
        }
        let chunk: Chunk = serde_json::from_str(data)
            .map_err(|e| LlmError::BadResponse(format!("{e} in {:?}", excerpt(data))))?;
        if let Some(err) = chunk.error {
            return Err(LlmError::Transient(format!(
                "error inside the stream: {}",
                excerpt(&err.to_string())
            )));
        }
        if let Some(model) = chunk.model.filter(|m| !m.is_empty()) {
            self.model = model;
        }
        if let Some(u) = chunk.usage {
            self.usage = Some(u);
        }
        for choice in chunk.choices {
            if choice.finish_reason.is_some() {
                self.finished = true;
            }
            let Some(delta) = choice.delta else { continue };
            if let Some(r) = delta.reasoning_content.or(delta.reasoning) {
                if !r.is_empty() {
                    sink.reasoning(&r);
                }
            }
            if let Some(text) = delta.content {
                self.saw_content = true;
                if !text.is_empty() {
                    sink.text(&text);
                    self.content.push_str(&text);
                }
            }
            for t in delta.tool_calls {
                let call = self.calls.entry(t.index).or_insert_with(|| ToolCall {
                    id: String::new(),
                    name: String::new(),
                    arguments: String::new(),
                });
                if let Some(id) = t.id.filter(|i| !i.is_empty()) {
                    call.id = id;
                }
                if let Some(f) = t.function {
                    if let Some(name) = f.name {
                        call.name.push_str(&name);
                    }
                    if let Some(args) = f.arguments {
                        call.arguments.push_str(&args);
                    }
                }
            }
        }
        Ok(())
    }

    /// The whole answer, or the failure of a stream that did not finish.
    pub(super) fn finish(self) -> Result<ChatResponse, LlmError> {
        if !self.finished && !self.done {
            return Err(LlmError::BadResponse(
                "the answer stream ended before the answer did".into(),
            ));
        }
        let tool_calls: Vec<ToolCall> = self.calls.into_values().collect();
        if tool_calls.iter().any(|c| c.name.is_empty()) {
            return Err(LlmError::BadResponse(
                "a streamed tool call has no name".into(),
            ));
        }
        let content = (self.saw_content || tool_calls.is_empty()).then_some(self.content);
        Ok(ChatResponse {
            content,
            tool_calls,
            usage: self.usage.unwrap_or_default().normalized(),
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
                // A body that breaks mid-way is a connection problem, not a bad answer.
                LlmError::BadResponse(m) => LlmError::Transient(m),
                other => other,
            },
            other => LlmError::BadResponse(other.to_string()),
        })?;
        assembly.feed(&event.data, sink)?;
        if assembly.done {
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
    fn text_reasoning_and_usage() {
        let sink = Recording::default();
        let r = run(
            &[
                r#"{"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"reasoning_content":"hmm "}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"reasoning":"ok"}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}"#,
                r#"{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":60}}}"#,
                "[DONE]",
            ],
            &sink,
        )
        .unwrap();
        assert_eq!(r.content.as_deref(), Some("Hello"));
        assert_eq!(r.model, "m");
        assert_eq!(*sink.text.lock().unwrap(), "Hello");
        assert_eq!(*sink.reasoning.lock().unwrap(), "hmm ok");
        assert_eq!(
            r.usage,
            Usage {
                fresh_input: 40,
                output: 7,
                cache_read: 60,
                cache_write: 0
            }
        );
    }

    #[test]
    fn tool_calls_are_joined_by_index() {
        let sink = Recording::default();
        let r = run(
            &[
                r#"{"choices":[{"index":0,"delta":{"content":null,"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"session_search","arguments":""}}]}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"c2","function":{"name":"memory","arguments":"{}"}}]}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"query\":"}}]}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"x\"}"}}]},"finish_reason":"tool_calls"}]}"#,
                "[DONE]",
            ],
            &sink,
        )
        .unwrap();
        assert_eq!(r.content, None);
        assert_eq!(r.tool_calls.len(), 2);
        assert_eq!(r.tool_calls[0].id, "c1");
        assert_eq!(r.tool_calls[0].name, "session_search");
        assert_eq!(r.tool_calls[0].arguments, r#"{"query":"x"}"#);
        assert_eq!(r.tool_calls[1].name, "memory");
    }

    #[test]
    fn a_cut_stream_is_a_retryable_failure() {
        let sink = Recording::default();
        let err = run(
            &[r#"{"choices":[{"index":0,"delta":{"content":"Half an ans"}}]}"#],
            &sink,
        )
        .unwrap_err();
        assert!(err.is_retryable(), "{err:?}");
        let err = run(&["{not json"], &sink).unwrap_err();
        assert!(err.is_retryable(), "{err:?}");
    }
}
