//! The few fields of a tool call's JSON arguments that the projector reads (paths, command,
//! patch text, one telling argument), borrowed from the arguments text when they need no
//! unescaping.
//!
//! Every call of a compacted middle passes through here, and building a whole
//! `serde_json::Value` per call (a map, a `String` per key and value) was a fifth of the
//! projection's time. The result must stay exactly what reading that `Value` gave: serde_json
//! still parses and validates all of the text, values the projector reads as arrays or objects
//! are still built as `Value`, and any input this reader does not accept falls back to the
//! `Value` parse.

use std::borrow::Cow;
use std::fmt;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

/// Keys naming the paths a call reads or changes, in the order they are looked at.
pub const PATH_KEYS: &[&str] = &[
    "path",
    "file",
    "file_path",
    "filepath",
    "filename",
    "target_file",
    "notebook_path",
    "paths",
    "files",
];
/// Keys holding a shell command or an editor sub-command.
pub const COMMAND_KEYS: &[&str] = &["command", "cmd"];
/// Keys holding an apply-patch envelope or a unified diff.
pub const PATCH_KEYS: &[&str] = &["patch", "diff", "input"];
/// Keys whose value makes a telling one-line excerpt when there is no command or path.
pub const MAIN_ARG_KEYS: &[&str] = &["query", "pattern", "url", "name", "id", "text"];

mod flat;

const SLOTS: usize = 20;

/// Slot of a key the projector reads (its position in the four lists above, in order); `None`
/// for every other key. A `match`, because every key of every call is looked up here.
fn slot(key: &str) -> Option<usize> {
    Some(match key {
        "path" => 0,
        "file" => 1,
        "file_path" => 2,
        "filepath" => 3,
        "filename" => 4,
        "target_file" => 5,
        "notebook_path" => 6,
        "paths" => 7,
        "files" => 8,
        "command" => 9,
        "cmd" => 10,
        "patch" => 11,
        "diff" => 12,
        "input" => 13,
        "query" => 14,
        "pattern" => 15,
        "url" => 16,
        "name" => 17,
        "id" => 18,
        "text" => 19,
        _ => return None,
    })
}

/// A map key that makes `serde_json::Value` read the entry's string as embedded JSON (its
/// `raw_value` support). Such input is left to the `Value` parse, which knows that rule.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// One argument value as the projector reads it.
#[derive(Debug)]
pub enum Arg<'a> {
    Str(Cow<'a, str>),
    /// An array or object, built as `Value` because the projector walks it.
    Json(Value),
    /// A number, boolean or null: nothing the projector reads.
    Other,
}

impl<'a> Arg<'a> {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Arg::Str(s) => Some(s),
            _ => None,
        }
    }

    fn from_value(value: Value) -> Arg<'a> {
        match value {
            Value::String(s) => Arg::Str(Cow::Owned(s)),
            Value::Array(_) | Value::Object(_) => Arg::Json(value),
            _ => Arg::Other,
        }
    }
}

/// The read keys of the top-level argument object; a duplicate key keeps its last value, as a
/// `Value` map does. Empty when the arguments are not a JSON object.
#[derive(Debug, Default)]
pub struct Args<'a> {
    slots: [Option<Arg<'a>>; SLOTS],
}

impl<'a> Args<'a> {
    pub fn parse(arguments: &'a str) -> Args<'a> {
        flat::read(arguments)
            .or_else(|| serde_json::from_str(arguments).ok())
            .unwrap_or_else(|| Args::from_value(arguments))
    }

    /// The slow path, reading the arguments through `Value` (the reference behaviour).
    fn from_value(arguments: &str) -> Args<'a> {
        let mut args = Args::default();
        if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(arguments) {
            for (key, value) in map {
                if let Some(i) = slot(&key) {
                    args.slots[i] = Some(Arg::from_value(value));
                }
            }
        }
        args
    }

    #[cfg(test)]
    pub fn get(&self, key: &str) -> Option<&Arg<'a>> {
        slot(key).and_then(|i| self.slots[i].as_ref())
    }

    /// The values of one of the key lists above, in its order, without a lookup per key: each
    /// list's slots are consecutive.
    pub fn group(&self, keys: &[&str]) -> impl Iterator<Item = &Arg<'a>> {
        let first = keys.first().and_then(|k| slot(k)).unwrap_or(SLOTS);
        let end = (first + keys.len()).min(SLOTS);
        self.slots[first.min(end)..end].iter().flatten()
    }
}

impl<'de> Deserialize<'de> for Args<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ArgsVisitor)
    }
}

struct ArgsVisitor;

impl<'de> Visitor<'de> for ArgsVisitor {
    type Value = Args<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    // Anything but an object is an error here; the `Value` fallback then decides (to nothing).
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Args<'de>, A::Error> {
        let mut args = Args::default();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            match key {
                Some(i) => args.slots[i] = Some(map.next_value_seed(ArgSeed)?),
                None => map.next_value_seed(Validate)?,
            }
        }
        Ok(args)
    }
}

/// Reads a map key as its slot (`Some`) or as a key nobody reads (`None`).
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(KeySeed)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Option<usize>, E> {
        if key == RAW_VALUE_TOKEN {
            return Err(E::custom("left to the Value parse"));
        }
        Ok(slot(key))
    }
}

/// Reads a value the projector uses: strings borrowed when they can be, arrays and objects
/// built by `Value`'s own visitor (so they are exactly what `Value` holds).
struct ArgSeed;

impl<'de> DeserializeSeed<'de> for ArgSeed {
    type Value = Arg<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(ArgSeed)
    }
}

impl<'de> Visitor<'de> for ArgSeed {
    type Value = Arg<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Arg<'de>, E> {
        Ok(Arg::Str(Cow::Borrowed(s)))
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Arg<'de>, E> {
        Ok(Arg::Str(Cow::Owned(s.to_string())))
    }
    fn visit_string<E: de::Error>(self, s: String) -> Result<Arg<'de>, E> {
        Ok(Arg::Str(Cow::Owned(s)))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Arg<'de>, E> {
        Ok(Arg::Other)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Arg<'de>, E> {
        Ok(Arg::Other)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Arg<'de>, E> {
        Ok(Arg::Other)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Arg<'de>, E> {
        Ok(Arg::Other)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Arg<'de>, E> {
        Ok(Arg::Other)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Arg<'de>, A::Error> {
        Value::deserialize(SeqAccessDeserializer::new(seq)).map(Arg::Json)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Arg<'de>, A::Error> {
        Value::deserialize(MapAccessDeserializer::new(map)).map(Arg::Json)
    }
}

/// Parses and checks a value nobody reads as `Value` would (numbers in range, valid escapes,
/// nesting depth), without building it.
struct Validate;

impl<'de> DeserializeSeed<'de> for Validate {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(Validate)
    }
}

impl<'de> Visitor<'de> for Validate {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Validate)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key_seed(KeySeed)?.is_some() {
            map.next_value_seed(Validate)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_the_key_lists() {
        let keys: Vec<&str> = PATH_KEYS
            .iter()
            .chain(COMMAND_KEYS)
            .chain(PATCH_KEYS)
            .chain(MAIN_ARG_KEYS)
            .copied()
            .collect();
        assert_eq!(keys.len(), SLOTS);
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(slot(key), Some(i), "{key}");
        }
        assert_eq!(slot("content"), None);
    }

    /// The borrowed reader must read exactly what the `Value` parse reads, on odd input too.
    #[test]
    fn reads_what_the_value_parse_reads() {
        let deep = format!(
            "{{\"command\":\"x\",\"d\":{}{}}}",
            "[".repeat(200),
            "]".repeat(200)
        );
        let table = [
            r#"{"command":"ls -la"}"#,
            r#"{"comm\u0061nd":"a\nb","path":"x.rs","timeout":120}"#,
            r#"{"command":"first","command":"last"}"#,
            r#"{"command":"x","n":1e999}"#,
            r#"{"command":"x"} tail"#,
            r#"{"command":"\ud800"}"#,
            r#"{"paths":["a.rs",{"path":"b.rs"}],"x":{"$serde_json::private::RawValue":"{}"}}"#,
            r#"{"$serde_json::private::RawValue":"{\"command\":\"ls\"}"}"#,
            r#"{"id":5,"text":null,"query":true,"cmd":["cargo","test"],"files":{"path":"c.rs"}}"#,
            deep.as_str(),
            r#"{"command":"ls","timeout":120,"ok":true,"no":false,"x":null,"n":-7}"#,
            " {\n \"path\" : \"a.rs\" ,\t\"cmd\":\"\" }\r\n",
            r#"{"n":01,"command":"x"}"#,
            r#"{"n":-,"command":"x"}"#,
            r#"{"n":1.5,"command":"x"}"#,
            r#"{"n":2E3,"command":"x"}"#,
            r#"{"n":1234567890123456789012,"command":"x"}"#,
            "{\"command\":\"a\u{1}b\"}",
            "{\"command\":\"tab\tin\"}",
            r#"{"command":"x",}"#,
            r#"{"command":"x"}}"#,
            r#"{"command" "x"}"#,
            r#"{"command":tru}"#,
            r#"{"command":truex}"#,
            r#"{"command":"x""#,
            r#"{}"#,
            r#"{"command":"é ü 日本"}"#,
            "[1,2]",
            "null",
            "",
            "not json",
        ];
        for text in table {
            assert_eq!(
                format!("{:?}", Args::parse(text)),
                format!("{:?}", Args::from_value(text)),
                "{text}"
            );
        }
        assert_eq!(
            Args::parse(r#"{"command":"first","command":"last"}"#)
                .get("command")
                .and_then(Arg::as_str),
            Some("last")
        );
    }
}
