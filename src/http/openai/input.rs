//! What a request's messages ask: the new input is the trailing user messages after the last
//! assistant message. A chat client sends the whole history each time, but the lane keeps its
//! own transcript, so the earlier messages are not replayed. A `system` (or `developer`)
//! message becomes operator context only with `api.accept_system`; otherwise it is ignored.

use serde::Deserialize;

use super::OaiError;

/// One message of a request, in either API's shape.
#[derive(Deserialize)]
pub(super) struct InMessage {
    pub role: String,
    #[serde(default)]
    pub content: Option<Content>,
}

/// A message's content: a string, or parts.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Deserialize)]
pub(super) struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
}

impl Content {
    /// The text of the content; an image or file part is refused with a clear line.
    fn text(&self) -> Result<String, OaiError> {
        match self {
            Content::Text(t) => Ok(t.clone()),
            Content::Parts(parts) => {
                let mut out = Vec::new();
                for p in parts {
                    match (p.kind.as_str(), &p.text) {
                        ("text" | "input_text" | "output_text", Some(t)) => out.push(t.as_str()),
                        (kind, _) => {
                            return Err(OaiError::bad_request(format!(
                                "content parts of type {kind:?} are not taken; send text parts \
                                 (images are not accepted through this API yet)"
                            )))
                        }
                    }
                }
                Ok(out.join("\n"))
            }
        }
    }
}

/// The turn's text from a request's messages (and a separate `instructions` text, in the
/// Responses API), with operator context when `accept_system`.
pub(super) fn turn_text(
    messages: &[InMessage],
    instructions: Option<&str>,
    accept_system: bool,
) -> Result<String, OaiError> {
    let start = messages
        .iter()
        .rposition(|m| m.role == "assistant")
        .map_or(0, |i| i + 1);
    let mut user = Vec::new();
    for m in &messages[start..] {
        if m.role == "user" {
            if let Some(c) = &m.content {
                user.push(c.text()?);
            }
        }
    }
    let text = user.join("\n\n");
    if text.trim().is_empty() {
        return Err(OaiError::bad_request(
            "the request has no user message with text after the last assistant message",
        ));
    }
    if !accept_system {
        return Ok(text);
    }
    let mut system = Vec::new();
    if let Some(i) = instructions.filter(|i| !i.trim().is_empty()) {
        system.push(i.to_string());
    }
    for m in messages
        .iter()
        .filter(|m| matches!(m.role.as_str(), "system" | "developer"))
    {
        if let Some(c) = &m.content {
            system.push(c.text()?);
        }
    }
    if system.is_empty() {
        return Ok(text);
    }
    Ok(format!(
        "[Operator context from the API client]\n{}\n[End of operator context]\n\n{text}",
        system.join("\n\n")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(v: serde_json::Value) -> Vec<InMessage> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_new_input_is_the_trailing_user_messages() {
        let m = msgs(serde_json::json!([
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "one"},
            {"role": "user", "content": "second"},
            {"role": "user", "content": [{"type": "text", "text": "third"}]},
        ]));
        assert_eq!(turn_text(&m, None, false).unwrap(), "second\n\nthird");
        let with = turn_text(&m, None, true).unwrap();
        assert!(with.starts_with("[Operator context from the API client]\nbe brief\n"));
        assert!(with.ends_with("second\n\nthird"));
        let ended = msgs(serde_json::json!([
            {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}
        ]));
        assert_eq!(turn_text(&ended, None, false).unwrap_err().status, 400);
        let image = msgs(serde_json::json!([{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}
        ]}]));
        assert!(turn_text(&image, None, false)
            .unwrap_err()
            .message
            .contains("image_url"));
    }
}
