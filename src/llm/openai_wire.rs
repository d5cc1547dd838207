//! The OpenAI chat-completions request's `messages`: our messages and their parts in the wire
//! shape (content arrays with `image_url` data URLs, `input_audio`, tool images after their
//! results).

use serde_json::{json, Value};

use super::{ChatMessage, Part};
use crate::domain::Role;

/// The chat-completions `messages` array. A message with parts sends its content as an
/// array (text, then `image_url` data URLs; `input_audio` for WAV and MP3, the formats the
/// API takes). Tool messages cannot carry images there, so the images of a run of tool
/// results follow it as one user message that names the calls they came from.
pub(super) fn wire_messages(messages: &[ChatMessage]) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len());
    let mut tool_images: Vec<Value> = Vec::new();
    for m in messages {
        if m.role != Role::Tool && !tool_images.is_empty() {
            out.push(json!({ "role": "user", "content": std::mem::take(&mut tool_images) }));
        }
        let mut v = json!({ "role": m.role.as_str() });
        if m.role == Role::Tool && !m.parts.is_empty() {
            let id = m.tool_call_id.as_deref().unwrap_or("?");
            tool_images.push(
                json!({ "type": "text", "text": format!("[files returned by tool call {id}]") }),
            );
            tool_images.extend(m.parts.iter().map(part_json));
            v["content"] = json!(m.content);
        } else if m.parts.is_empty() {
            v["content"] = json!(m.content);
        } else {
            let mut content: Vec<Value> = Vec::with_capacity(m.parts.len() + 1);
            if let Some(text) = m.content.as_deref().filter(|t| !t.is_empty()) {
                content.push(json!({ "type": "text", "text": text }));
            }
            content.extend(m.parts.iter().map(part_json));
            v["content"] = Value::Array(content);
        }
        if !m.tool_calls.is_empty() {
            v["tool_calls"] = m
                .tool_calls
                .iter()
                .map(|c| {
                    json!({
                        "id": c.id,
                        "type": "function",
                        "function": { "name": c.name, "arguments": c.arguments },
                    })
                })
                .collect();
        }
        if let Some(id) = &m.tool_call_id {
            v["tool_call_id"] = json!(id);
        }
        out.push(v);
    }
    if !tool_images.is_empty() {
        out.push(json!({ "role": "user", "content": tool_images }));
    }
    out
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
        let wire = wire_messages(&[
            ChatMessage::new(Role::System, "sys"),
            user,
            ChatMessage::tool_calls(None, vec![]),
            shot,
            ChatMessage::tool_result("c2", "plain"),
            ChatMessage::new(Role::Assistant, "done"),
            ogg,
        ]);
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
}
