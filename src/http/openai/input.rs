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
    /// Chat Completions: `{"url": …}`; Responses: the URL itself.
    #[serde(default)]
    pub image_url: Option<serde_json::Value>,
}

/// An image a request carries inline (a `data:` URL), decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct InlineImage {
    pub mime: String,
    pub bytes: Vec<u8>,
}

/// What a request's new input says: its text and its images, in order.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct TurnInput {
    pub text: String,
    pub images: Vec<InlineImage>,
}

impl Content {
    /// The text of the content, and its images appended to `images`; a file part or an image
    /// by link is refused with a clear line.
    fn read(&self, images: &mut Vec<InlineImage>) -> Result<String, OaiError> {
        match self {
            Content::Text(t) => Ok(t.clone()),
            Content::Parts(parts) => {
                let mut out = Vec::new();
                for p in parts {
                    match (p.kind.as_str(), &p.text) {
                        ("text" | "input_text" | "output_text", Some(t)) => out.push(t.as_str()),
                        ("image_url" | "input_image", _) => images.push(inline_image(p)?),
                        (kind, _) => {
                            return Err(OaiError::bad_request(format!(
                                "content parts of type {kind:?} are not taken; send text and \
                                 image parts"
                            )))
                        }
                    }
                }
                Ok(out.join("\n"))
            }
        }
    }

    fn text(&self) -> Result<String, OaiError> {
        self.read(&mut Vec::new())
    }
}

/// An image part's bytes: only a base64 `data:image/…` URL is taken. Herald fetches no URL a
/// client names (it would reach whatever the client points it at).
fn inline_image(p: &ContentPart) -> Result<InlineImage, OaiError> {
    use base64::Engine;
    let url = match &p.image_url {
        Some(serde_json::Value::String(u)) => u.as_str(),
        Some(v) => v["url"].as_str().unwrap_or_default(),
        None => "",
    };
    let bad = || {
        OaiError::bad_request(
            "an image part must carry its image as a base64 data URL \
             (data:image/png;base64,…); Herald does not fetch image links",
        )
    };
    let rest = url.strip_prefix("data:").ok_or_else(bad)?;
    let (head, data) = rest.split_once(',').ok_or_else(bad)?;
    let mime = head.strip_suffix(";base64").ok_or_else(bad)?;
    if !mime.starts_with("image/") {
        return Err(bad());
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|_| bad())?;
    Ok(InlineImage {
        mime: mime.to_ascii_lowercase(),
        bytes,
    })
}

/// The turn's input (its text and inline images) from a request's messages (and a separate
/// `instructions` text, in the Responses API), with operator context when `accept_system`.
pub(super) fn turn_input(
    messages: &[InMessage],
    instructions: Option<&str>,
    accept_system: bool,
) -> Result<TurnInput, OaiError> {
    let start = messages
        .iter()
        .rposition(|m| m.role == "assistant")
        .map_or(0, |i| i + 1);
    let mut user = Vec::new();
    let mut images = Vec::new();
    for m in &messages[start..] {
        if m.role == "user" {
            if let Some(c) = &m.content {
                user.push(c.read(&mut images)?);
            }
        }
    }
    let text = user.join("\n\n");
    if text.trim().is_empty() && images.is_empty() {
        return Err(OaiError::bad_request(
            "the request has no user message with text after the last assistant message",
        ));
    }
    if !accept_system {
        return Ok(TurnInput { text, images });
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
        return Ok(TurnInput { text, images });
    }
    let text = format!(
        "[Operator context from the API client]\n{}\n[End of operator context]\n\n{text}",
        system.join("\n\n")
    );
    Ok(TurnInput { text, images })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn_text(m: &[InMessage], i: Option<&str>, system: bool) -> Result<String, OaiError> {
        turn_input(m, i, system).map(|t| t.text)
    }

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
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}}
        ]}]));
        let got = turn_input(&image, None, false).unwrap();
        assert_eq!(got.text, "what is this?");
        assert_eq!(got.images.len(), 1);
        assert_eq!(got.images[0].mime, "image/png");
        assert_eq!(got.images[0].bytes, [0x89, b'P', b'N', b'G']);
        let linked = msgs(serde_json::json!([{"role": "user", "content": [
            {"type": "input_image", "image_url": "http://169.254.169.254/latest/meta-data"}
        ]}]));
        assert!(turn_input(&linked, None, false)
            .unwrap_err()
            .message
            .contains("does not fetch image links"));
        let file = msgs(serde_json::json!([{"role": "user", "content": [
            {"type": "input_file", "file_id": "f"}
        ]}]));
        assert_eq!(turn_text(&file, None, false).unwrap_err().status, 400);
    }
}
