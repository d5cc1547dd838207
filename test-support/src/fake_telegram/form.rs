//! Decodes a Bot API request's parameters from the three encodings Telegram accepts: query
//! string, JSON body, urlencoded form, plus multipart (teloxide sends `setWebhook` that way).
//!
//! Must not: pretend to store uploads; a file part is recorded by name with its file name only.

use axum::body::Bytes;
use axum::http::{header, HeaderMap, Uri};
use serde_json::{Map, Value};

/// Query string and body merged into one object; form values stay strings, as they arrive.
pub(super) fn params(uri: &Uri, headers: &HeaderMap, body: &Bytes) -> Result<Value, String> {
    let mut params = serde_json::Map::new();
    let mut add_form = |raw: &[u8]| {
        for (k, v) in url::form_urlencoded::parse(raw) {
            params.insert(k.into_owned(), Value::String(v.into_owned()));
        }
    };
    add_form(uri.query().unwrap_or_default().as_bytes());
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if content_type.starts_with("application/x-www-form-urlencoded") {
        add_form(body);
    } else if content_type.starts_with("application/json") && !body.is_empty() {
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(map)) => params.extend(map),
            _ => return Err("Bad Request: can't parse JSON".into()),
        }
    } else if let Some(boundary) = content_type.split("boundary=").nth(1) {
        multipart_fields(body, boundary.trim_matches('"'), &mut params)?;
    } else if !body.is_empty() {
        return Err(format!(
            "Bad Request: unsupported content type {content_type:?}"
        ));
    }
    Ok(Value::Object(params))
}

/// Text fields of a `multipart/form-data` body; a file part becomes `{"file_name": …}`.
fn multipart_fields(
    body: &[u8],
    boundary: &str,
    params: &mut Map<String, Value>,
) -> Result<(), String> {
    let body = String::from_utf8_lossy(body);
    let delimiter = format!("--{boundary}");
    for part in body.split(delimiter.as_str()).skip(1) {
        if part.starts_with("--") {
            break;
        }
        let Some((head, content)) = part.split_once("\r\n\r\n") else {
            return Err("Bad Request: malformed multipart part".into());
        };
        let content = content.strip_suffix("\r\n").unwrap_or(content);
        let disposition = head
            .lines()
            .find(|l| l.to_ascii_lowercase().starts_with("content-disposition"))
            .unwrap_or_default();
        let Some(name) = quoted_attr(disposition, "name") else {
            return Err("Bad Request: multipart part without a name".into());
        };
        let value = match quoted_attr(disposition, "filename") {
            Some(file_name) => serde_json::json!({ "file_name": file_name }),
            None => Value::String(content.to_owned()),
        };
        params.insert(name, value);
    }
    Ok(())
}

/// The value of `attr="…"` in a Content-Disposition line.
fn quoted_attr(line: &str, attr: &str) -> Option<String> {
    let start = line.find(&format!("; {attr}=\""))? + attr.len() + 4;
    let len = line[start..].find('"')?;
    Some(line[start..start + len].to_owned())
}
