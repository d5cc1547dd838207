//! The OpenAI chat-completions request's `messages`: our messages and their parts in the wire
//! shape (content arrays with `image_url` data URLs, `input_audio`, tool images after their
//! results).

use serde::Serialize;
use serde_json::{json, Value};

use super::{ChatMessage, ChatRequest, Part, ToolSpec};
use crate::domain::{Role, ToolCall};

/// The request body, borrowing the request's text: serialised straight into the HTTP body
/// without building a JSON tree of the whole history first (once per turn, per request).
#[derive(Serialize)]
pub(super) struct WireRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<Value>,
}

impl<'a> WireRequest<'a> {
    pub(super) fn new(model: &'a str, req: &'a ChatRequest) -> WireRequest<'a> {
        WireRequest {
            model,
            messages: wire_messages(&req.messages),
            tools: req.tools.iter().map(WireTool::new).collect(),
            stream: false,
            stream_options: None,
        }
    }
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

impl<'a> WireTool<'a> {
    fn new(t: &'a ToolSpec) -> WireTool<'a> {
        WireTool {
            kind: "function",
            function: WireFunction {
                name: &t.name,
                description: &t.description,
                parameters: &t.parameters,
            },
        }
    }
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

/// One message of the `messages` array.
#[derive(Serialize)]
pub(super) struct WireMessage<'a> {
    role: &'a str,
    content: WireContent<'a>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<WireCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

/// A message's content: its text (`null` without one), or an array of parts.
#[derive(Serialize)]
#[serde(untagged)]
enum WireContent<'a> {
    Text(Option<&'a str>),
    Parts(Vec<Value>),
}

#[derive(Serialize)]
struct WireCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireCallFunction<'a>,
}

#[derive(Serialize)]
struct WireCallFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

impl<'a> WireCall<'a> {
    fn new(c: &'a ToolCall) -> WireCall<'a> {
        WireCall {
            id: &c.id,
            kind: "function",
            function: WireCallFunction {
                name: &c.name,
                arguments: &c.arguments,
            },
        }
    }
}

/// The chat-completions `messages` array. A message with parts sends its content as an
/// array (text, then `image_url` data URLs; `input_audio` for WAV and MP3, the formats the
/// API takes). Tool messages cannot carry images there, so the images of a run of tool
/// results follow it as one user message that names the calls they came from.
pub(super) fn wire_messages(messages: &[ChatMessage]) -> Vec<WireMessage<'_>> {
    let mut out = Vec::with_capacity(messages.len());
    let mut tool_images: Vec<Value> = Vec::new();
    for m in messages {
        if m.role != Role::Tool && !tool_images.is_empty() {
            out.push(images_message(std::mem::take(&mut tool_images)));
        }
        let content = if m.role == Role::Tool && !m.parts.is_empty() {
            let id = m.tool_call_id.as_deref().unwrap_or("?");
            tool_images.push(
                json!({ "type": "text", "text": format!("[files returned by tool call {id}]") }),
            );
            tool_images.extend(m.parts.iter().map(part_json));
            WireContent::Text(m.content.as_deref())
        } else if m.parts.is_empty() {
            WireContent::Text(m.content.as_deref())
        } else {
            let mut content: Vec<Value> = Vec::with_capacity(m.parts.len() + 1);
            if let Some(text) = m.content.as_deref().filter(|t| !t.is_empty()) {
                content.push(json!({ "type": "text", "text": text }));
            }
            content.extend(m.parts.iter().map(part_json));
            WireContent::Parts(content)
        };
        out.push(WireMessage {
            role: m.role.as_str(),
            content,
            tool_calls: m.tool_calls.iter().map(WireCall::new).collect(),
            tool_call_id: m.tool_call_id.as_deref(),
        });
    }
    if !tool_images.is_empty() {
        out.push(images_message(tool_images));
    }
    out
}

fn images_message<'a>(images: Vec<Value>) -> WireMessage<'a> {
    WireMessage {
        role: "user",
        content: WireContent::Parts(images),
        tool_calls: Vec::new(),
        tool_call_id: None,
    }
}

fn part_json(p: &Part) -> Value {
    match p {
        Part::Image(b) => json!({ "type": "image_url", "image_url": { "url": b.data_url() } }),
        Part::Audio(b) => match audio_format(&b.mime) {
            Some(format) => json!({
                "type": "input_audio",
                "input_audio": { "data": b.base64(), "format": format },
            }),
            None => json!({ "type": "text", "text": p.placeholder() }),
        },
    }
}

fn audio_format(mime: &str) -> Option<&'static str> {
    match mime {
        "audio/wav" | "audio/x-wav" | "audio/wave" => Some("wav"),
        "audio/mpeg" | "audio/mp3" => Some("mp3"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Blob;

    #[test]
    fn parts_become_content_arrays_and_tool_images_follow_the_results() {
        let png = Blob::new("image/png", vec![1, 2, 3], "photo");
        let mut user = ChatMessage::new(Role::User, "what is this?");
        user.parts.push(Part::Image(png.clone()));
        let mut shot = ChatMessage::tool_result("c1", "a screenshot");
        shot.parts.push(Part::Image(png.clone()));
        let mut ogg = ChatMessage::new(Role::User, "");
        ogg.parts.push(Part::Audio(Blob::new(
            "audio/ogg",
            vec![0; 4],
            "voice note",
        )));
        let wire = serde_json::to_value(wire_messages(&[
            ChatMessage::new(Role::System, "sys"),
            user,
            ChatMessage::tool_calls(None, vec![]),
            shot,
            ChatMessage::tool_result("c2", "plain"),
            ChatMessage::new(Role::Assistant, "done"),
            ogg,
        ]))
        .unwrap();
        assert_eq!(wire[0], json!({"role": "system", "content": "sys"}));
        assert_eq!(
            wire[1]["content"],
            json!([
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AQID"}},
            ])
        );
        // Both tool results stay contiguous after the call; the image follows them.
        assert_eq!(wire[3]["content"], json!("a screenshot"));
        assert_eq!(wire[4]["tool_call_id"], json!("c2"));
        assert_eq!(wire[5]["role"], json!("user"));
        assert_eq!(
            wire[5]["content"][1]["image_url"]["url"],
            json!("data:image/png;base64,AQID")
        );
        assert_eq!(wire[6]["content"], json!("done"));
        // Ogg is not a format the API takes: its placeholder goes instead.
        assert_eq!(
            wire[7]["content"],
            json!([{"type": "text", "text": "[voice note: audio this model cannot hear]"}])
        );
    }

    #[test]
    fn the_body_carries_tools_calls_and_results_in_the_wire_shape() {
        let call = ToolCall {
            id: "c1".into(),
            name: "clock".into(),
            arguments: "{}".into(),
        };
        let req = ChatRequest {
            messages: vec![
                ChatMessage::new(Role::User, "time?"),
                ChatMessage::tool_calls(None, vec![call]),
                ChatMessage::tool_result("c1", "noon"),
            ],
            tools: vec![ToolSpec {
                name: "clock".into(),
                description: "tells the time".into(),
                parameters: json!({"type": "object"}),
            }],
        };
        let mut body = WireRequest::new("m", &req);
        let plain = serde_json::to_value(&body).unwrap();
        assert_eq!(
            plain,
            json!({
                "model": "m",
                "messages": [
                    {"role": "user", "content": "time?"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "c1", "type": "function",
                         "function": {"name": "clock", "arguments": "{}"}},
                    ]},
                    {"role": "tool", "content": "noon", "tool_call_id": "c1"},
                ],
                "tools": [{"type": "function", "function": {
                    "name": "clock", "description": "tells the time",
                    "parameters": {"type": "object"}}}],
            })
        );
        body.stream = true;
        body.stream_options = Some(json!({ "include_usage": true }));
        let streamed = serde_json::to_value(&body).unwrap();
        assert_eq!(streamed["stream"], json!(true));
        assert_eq!(streamed["stream_options"], json!({ "include_usage": true }));
        let bare = ChatRequest {
            messages: vec![ChatMessage::new(Role::User, "hi")],
            tools: Vec::new(),
        };
        let bare = serde_json::to_value(WireRequest::new("m", &bare)).unwrap();
        assert_eq!(
            bare,
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        );
    }
}
