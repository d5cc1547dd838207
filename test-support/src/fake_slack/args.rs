//! The arguments of one Web API call, as Slack reads them: the query string, then a form or a
//! JSON body (JSON values keep their types; a form carries structured values as JSON strings).
//!
//! Must not: read a JSON body for a method Slack reads only forms for (the caller says which).

use axum::http::{header, HeaderMap, Uri};
use serde_json::{Map, Value};

/// The arguments of one call, from the query string and a form or JSON body.
pub(crate) struct Args {
    pub map: Map<String, Value>,
    /// The body was JSON (values keep their JSON types).
    pub json: bool,
}

impl Args {
    /// A string argument; numbers and booleans as their text, an empty string as absent.
    pub fn str(&self, key: &str) -> Option<String> {
        match self.map.get(key)? {
            Value::String(s) if s.is_empty() => None,
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }

    /// `true`, `"true"` and `"1"` are true.
    pub fn bool(&self, key: &str) -> Option<bool> {
        match self.map.get(key)? {
            Value::Bool(b) => Some(*b),
            Value::String(s) => Some(matches!(s.as_str(), "true" | "1")),
            Value::Number(n) => Some(n.as_i64() != Some(0)),
            _ => None,
        }
    }

    /// A structured argument (`blocks`, `metadata`, `files`): a JSON value, or a string that
    /// holds JSON (how a form carries it).
    pub fn json(&self, key: &str) -> Result<Option<Value>, ()> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.is_empty() => Ok(None),
            Some(Value::String(s)) => serde_json::from_str(s).map(Some).map_err(|_| ()),
            Some(v) => Ok(Some(v.clone())),
        }
    }

    /// What the call record keeps: everything but the token.
    pub fn recorded(&self) -> Value {
        let mut m = self.map.clone();
        m.remove("token");
        Value::Object(m)
    }
}

/// `form_only`: the method does not read a JSON body (its arguments are then missing).
pub(crate) fn parse_args(
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
    form_only: bool,
) -> Result<Args, &'static str> {
    let mut map = Map::new();
    for (k, v) in url::form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes()) {
        map.insert(k.into_owned(), Value::String(v.into_owned()));
    }
    let ctype = headers
        .get(header::CONTENT_TYPE)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let mut json = false;
    if ctype.starts_with("application/json") && !body.is_empty() {
        let Ok(Value::Object(o)) = serde_json::from_slice::<Value>(body) else {
            return Err("invalid_json");
        };
        if !form_only {
            map.extend(o);
        }
        json = true;
    } else if ctype.starts_with("application/x-www-form-urlencoded") {
        for (k, v) in url::form_urlencoded::parse(body) {
            map.insert(k.into_owned(), Value::String(v.into_owned()));
        }
    }
    Ok(Args { map, json })
}
