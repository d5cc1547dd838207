//! The one rule for outside text entering the store: U+0000 becomes U+FFFD.
//!
//! Postgres `TEXT` cannot hold a NUL byte (the write fails with "invalid byte sequence for
//! encoding UTF8: 0x00") while SQLite stores it, so a person's message, a tool result or a
//! model's answer holding one would save on one backend and fail for good on the other. Every
//! writer of text that came from outside (a person, a model, a tool, a file) binds it through
//! [`clean`] / [`clean_opt`] / [`clean_json`], so both backends store and return the same text.
//! Keys the store looks rows up by (lanes, ids, codes) are not rewritten here: changing them
//! would make a row unreachable by its own key; they are checked where they are made.

use std::borrow::Cow;

/// `s` with every NUL replaced by U+FFFD (the replacement character: visibly "a character was
/// here"); borrowed, no copy, when there is none.
pub fn clean(s: &str) -> Cow<'_, str> {
    if s.contains('\0') {
        Cow::Owned(s.replace('\0', "\u{FFFD}"))
    } else {
        Cow::Borrowed(s)
    }
}

/// [`clean`] for an optional column, as an owned value the generic binds accept.
pub fn clean_opt(s: Option<&str>) -> Option<String> {
    s.map(|s| clean(s).into_owned())
}

/// JSON text with every NUL inside its strings (written `\u0000` by serde) replaced, so a
/// serialized event or job reads back with the same text a plain column would.
pub fn clean_json(json: String) -> String {
    // serde never writes a raw NUL; the escape is the only way one can be inside.
    if !json.contains("\\u0000") {
        return json;
    }
    match serde_json::from_str::<serde_json::Value>(&json) {
        Ok(mut v) => {
            clean_value(&mut v);
            serde_json::to_string(&v).unwrap_or(json)
        }
        Err(_) => json,
    }
}

fn clean_value(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::String(s) if s.contains('\0') => *s = s.replace('\0', "\u{FFFD}"),
        Value::Array(items) => items.iter_mut().for_each(clean_value),
        Value::Object(map) => {
            let dirty: Vec<String> = map.keys().filter(|k| k.contains('\0')).cloned().collect();
            for k in dirty {
                if let Some(x) = map.remove(&k) {
                    map.insert(k.replace('\0', "\u{FFFD}"), x);
                }
            }
            map.values_mut().for_each(clean_value);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_becomes_the_replacement_character_everywhere_else_text_is_untouched() {
        assert_eq!(clean("poison\0byte"), "poison\u{FFFD}byte");
        assert!(matches!(clean("plain"), Cow::Borrowed("plain")));
        assert_eq!(clean_opt(Some("\0")), Some("\u{FFFD}".to_string()));
        assert_eq!(clean_opt(None), None);
        let json = serde_json::to_string(&serde_json::json!({"a\0": ["x\0y", 1]})).unwrap();
        let back: serde_json::Value = serde_json::from_str(&clean_json(json)).unwrap();
        assert_eq!(back, serde_json::json!({"a\u{FFFD}": ["x\u{FFFD}y", 1]}));
        // A literal backslash-u in the text is not a NUL and stays as it is.
        let literal = serde_json::to_string("\\u0000").unwrap();
        assert_eq!(
            serde_json::from_str::<String>(&clean_json(literal)).unwrap(),
            "\\u0000"
        );
    }
}
