//! Our request in the shape of Anthropic's Messages API: the system prompt as blocks, the
//! conversation as alternating user/assistant messages of content blocks, tools both ways.
//!
//! The API wants strictly alternating roles, tool results as `tool_result` blocks inside a
//! user message right after the assistant's `tool_use` blocks, and no empty text block. So
//! tool results become user messages and consecutive same-role messages are merged (their
//! blocks appended in order, which keeps an earlier request's blocks a prefix of a later
//! one's: the cache plan depends on that). The translation is a pure function of the
//! messages: the same history always gives the same bytes.

use serde_json::{json, Value};

use super::{ChatMessage, ChatRequest, Part};
use crate::domain::Role;

/// One message on the wire, before the cache plan marks it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct WireMessage {
    pub role: &'static str,
    pub content: Vec<Value>,
}

/// The parts of a request the cache plan places breakpoints in.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct WireRequest {
    pub system: Vec<Value>,
    pub messages: Vec<WireMessage>,
    pub tools: Vec<Value>,
}

/// What opens a conversation whose first kept message is the model's (the API wants a user
/// message first). Constant, so the prefix stays the same from one turn to the next.
const CONTINUED: &str = "(earlier messages of this conversation are not shown)";

/// Image types the Messages API takes as base64 image blocks.
const IMAGE_TYPES: [&str; 4] = ["image/jpeg", "image/png", "image/gif", "image/webp"];

pub(super) fn wire_request(req: &ChatRequest) -> WireRequest {
    let leading = req
        .messages
        .iter()
        .take_while(|m| m.role == Role::System)
        .count();
    let system = req.messages[..leading]
        .iter()
        .filter_map(|m| m.content.as_deref().filter(|t| !t.is_empty()))
        .map(text_block)
        .collect();
    let mut messages: Vec<WireMessage> = Vec::new();
    for m in &req.messages[leading..] {
        let (role, content) = blocks(m);
        if content.is_empty() {
            continue;
        }
        match messages.last_mut() {
            Some(last) if last.role == role => last.content.extend(content),
            _ => messages.push(WireMessage { role, content }),
        }
    }
    if messages.first().is_none_or(|m| m.role != "user") {
        messages.insert(
            0,
            WireMessage {
                role: "user",
                content: vec![text_block(CONTINUED)],
            },
        );
    }
    let tools = req
        .tools
        .iter()
        .map(|t| {
            let schema = if t.parameters.is_object() {
                t.parameters.clone()
            } else {
                json!({ "type": "object", "properties": {} })
            };
            json!({ "name": t.name, "description": t.description, "input_schema": schema })
        })
        .collect();
    WireRequest {
        system,
        messages,
        tools,
    }
}

fn text_block(text: &str) -> Value {
    json!({ "type": "text", "text": text })
}

/// A message's role on the wire and its blocks (possibly none: such a message is skipped).
fn blocks(m: &ChatMessage) -> (&'static str, Vec<Value>) {
    let text = m.content.as_deref().filter(|t| !t.is_empty());
    match m.role {
        Role::Tool => {
            let id = m.tool_call_id.as_deref().unwrap_or("unknown");
            let content = if m.parts.is_empty() {
                json!(text.unwrap_or("(no output)"))
            } else {
                let mut c: Vec<Value> = text.map(text_block).into_iter().collect();
                c.extend(m.parts.iter().map(part_block));
                Value::Array(c)
            };
            let block = json!({ "type": "tool_result", "tool_use_id": id, "content": content });
            ("user", vec![block])
        }
        Role::Assistant => {
            let mut c: Vec<Value> = text.map(text_block).into_iter().collect();
            c.extend(m.tool_calls.iter().map(|call| {
                // The model sent an object; a call whose arguments do not parse is replayed as
                // an empty one rather than failing the whole request.
                let input = serde_json::from_str::<Value>(&call.arguments)
                    .ok()
                    .filter(Value::is_object)
                    .unwrap_or_else(|| json!({}));
                json!({ "type": "tool_use", "id": call.id, "name": call.name, "input": input })
            }));
            ("assistant", c)
        }
        // A user message, or a system note after the opening prompt (the API has no system
        // role inside the conversation).
        Role::User | Role::System => {
            let mut c: Vec<Value> = text.map(text_block).into_iter().collect();
            c.extend(m.parts.iter().map(part_block));
            ("user", c)
        }
    }
}

/// An image block with a base64 source, or the part's placeholder text where the API cannot
/// take it (audio, an image type it does not read).
fn part_block(p: &Part) -> Value {
    match p {
        Part::Image(b) if IMAGE_TYPES.contains(&b.mime.as_str()) => json!({
            "type": "image",
            "source": { "type": "base64", "media_type": b.mime, "data": b.base64() },
        }),
        other => text_block(&other.placeholder()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ToolCall;
    use crate::llm::{Blob, ToolSpec};

    fn req(messages: Vec<ChatMessage>) -> ChatRequest {
        ChatRequest {
            messages,
            tools: vec![ToolSpec {
                name: "clock".into(),
                description: "time".into(),
                parameters: Value::Null,
            }],
        }
    }

    #[test]
    fn roles_alternate_and_tool_traffic_becomes_blocks() {
        let png = Blob::new("image/png", vec![1, 2, 3], "screenshot");
        let mut shot = ChatMessage::tool_result("c2", "a screenshot");
        shot.parts.push(Part::Image(png));
        let calls = vec![
            ToolCall {
                id: "c1".into(),
                name: "clock".into(),
                arguments: r#"{"tz":"UTC"}"#.into(),
            },
            ToolCall {
                id: "c2".into(),
                name: "screen".into(),
                arguments: "not json".into(),
            },
        ];
        let w = wire_request(&req(vec![
            ChatMessage::new(Role::System, "sys"),
            ChatMessage::new(Role::User, "what time?"),
            ChatMessage::tool_calls(Some("checking".into()), calls),
            ChatMessage::tool_result("c1", "12:00"),
            shot,
            ChatMessage::new(Role::Assistant, ""),
            ChatMessage::new(Role::Assistant, "noon"),
            ChatMessage::new(Role::User, "thanks"),
            ChatMessage::new(Role::User, "bye"),
        ]));
        assert_eq!(w.system, vec![json!({"type": "text", "text": "sys"})]);
        let roles: Vec<_> = w.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
        let a = &w.messages[1].content;
        assert_eq!(a[1]["type"], "tool_use");
        assert_eq!(a[1]["input"], json!({"tz": "UTC"}));
        assert_eq!(a[2]["input"], json!({}));
        // Parallel results in one user message, the image inside its own result.
        let r = &w.messages[2].content;
        assert_eq!(
            r[0],
            json!({"type": "tool_result", "tool_use_id": "c1", "content": "12:00"})
        );
        assert_eq!(r[1]["content"][1]["source"]["media_type"], "image/png");
        assert_eq!(r[1]["content"][1]["source"]["data"], "AQID");
        assert_eq!(w.messages[4].content.len(), 2);
        assert_eq!(w.tools[0]["input_schema"]["type"], "object");
    }

    #[test]
    fn a_conversation_opened_by_the_model_gets_a_constant_first_user_message() {
        let w = wire_request(&req(vec![
            ChatMessage::new(Role::System, "sys"),
            ChatMessage::new(Role::Assistant, "hello"),
        ]));
        assert_eq!(w.messages[0].content[0]["text"], CONTINUED);
        let mut ogg = ChatMessage::new(Role::User, "");
        ogg.parts
            .push(Part::Audio(Blob::new("audio/ogg", vec![0], "voice note")));
        let w = wire_request(&req(vec![ogg]));
        assert_eq!(
            w.messages[0].content,
            vec![json!({"type": "text", "text": "[voice note: audio this model cannot hear]"})]
        );
    }
}
