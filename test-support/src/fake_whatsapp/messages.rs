//! What a message body must hold, checked as the Cloud API checks it: a text body of at most
//! 4,096 characters, a media message by the id of an uploaded file, an interactive message
//! with one to three reply buttons (titles of at most 20 characters, distinct ids) and a body
//! of at most 1,024, a template that was approved in its language.

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::graph::{refuse as error, Refusal};
use super::state::{Sent, State};

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn too_long(what: &str, max: usize) -> Refusal {
    error(
        400,
        100,
        &format!("(#100) Param {what} must be at most {max} characters long."),
    )
}

/// Fills `sent` from the body, or refuses it.
pub fn read_message(sent: &mut Sent, body: &Value, st: &State) -> Result<(), Refusal> {
    let str_at = |p: &str| body.pointer(p).and_then(Value::as_str);
    match sent.kind.as_str() {
        "text" => {
            let text = str_at("/text/body")
                .ok_or_else(|| error(400, 100, "(#100) The parameter text['body'] is required."))?;
            if text.chars().count() > 4096 {
                return Err(too_long("text['body']", 4096));
            }
            sent.text = text.to_string();
        }
        "image" | "document" | "audio" | "video" | "sticker" => {
            let kind = sent.kind.clone();
            let id = str_at(&format!("/{kind}/id")).ok_or_else(|| {
                error(400, 100, &format!("(#100) The parameter {kind}['id'] is required."))
            })?;
            if !st.media.contains_key(id) {
                return Err(error(400, 131053, "(#131053) Media upload error: unknown media id"));
            }
            sent.media_id = Some(id.to_string());
            sent.filename = str_at(&format!("/{kind}/filename")).map(str::to_string);
            sent.text = str_at(&format!("/{kind}/caption"))
                .unwrap_or_default()
                .to_string();
        }
        "interactive" => interactive(sent, body)?,
        "template" => {
            let name = str_at("/template/name").unwrap_or_default().to_string();
            let lang = str_at("/template/language/code")
                .unwrap_or_default()
                .to_string();
            if !st.templates.contains(&(name.clone(), lang.clone())) {
                return Err(error(
                    404,
                    132001,
                    "(#132001) Template name does not exist in the translation",
                ));
            }
            sent.text = str_at("/template/components/0/parameters/0/text")
                .unwrap_or_default()
                .to_string();
            sent.template = Some((name, lang));
        }
        other => {
            return Err(error(
                400,
                100,
                &format!("(#100) Param type must be one of {{text, image, document, interactive, template, …}}, got {other}"),
            ))
        }
    }
    Ok(())
}

fn interactive(sent: &mut Sent, body: &Value) -> Result<(), Refusal> {
    if body.pointer("/interactive/type").and_then(Value::as_str) != Some("button") {
        return Err(error(
            400,
            100,
            "(#100) Only reply button messages are faked",
        ));
    }
    let text = body
        .pointer("/interactive/body/text")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if text.chars().count() > 1024 {
        return Err(too_long("interactive['body']['text']", 1024));
    }
    let buttons: Vec<(String, String)> = body
        .pointer("/interactive/action/buttons")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|b| {
            Some((
                b.pointer("/reply/id")?.as_str()?.to_string(),
                b.pointer("/reply/title")?.as_str()?.to_string(),
            ))
        })
        .collect();
    if buttons.is_empty() || buttons.len() > 3 {
        return Err(error(
            400,
            100,
            "(#100) Param interactive['action']['buttons'] must have between 1 and 3 elements",
        ));
    }
    if buttons.iter().any(|(_, t)| t.chars().count() > 20) {
        return Err(too_long(
            "interactive['action']['buttons'][]['reply']['title']",
            20,
        ));
    }
    if buttons[1..].iter().any(|(id, _)| *id == buttons[0].0) {
        return Err(error(400, 100, "(#100) Button ids must be unique"));
    }
    sent.text = text.to_string();
    sent.buttons = buttons;
    Ok(())
}
