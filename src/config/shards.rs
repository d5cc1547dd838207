//! `discord.shards`: a fixed gateway shard count, or `auto` for the count Discord recommends.
//!
//! Its own type so TOML (`shards = 2`, `shards = "auto"`) and the environment
//! (`HERALD_DISCORD__SHARDS=auto`) read the same way; it must not decide who runs which shard
//! (that is the Discord adapter's lease logic).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardCount {
    /// Ask Discord (`GET /gateway/bot`, its `shards` field) once at start.
    Auto,
    Fixed(u32),
}

impl Default for ShardCount {
    fn default() -> Self {
        ShardCount::Fixed(1)
    }
}

impl Serialize for ShardCount {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ShardCount::Auto => s.serialize_str("auto"),
            ShardCount::Fixed(n) => s.serialize_u32(*n),
        }
    }
}

impl<'de> Deserialize<'de> for ShardCount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        let n = match Raw::deserialize(d)? {
            Raw::N(n) => n,
            Raw::S(s) if s.trim().eq_ignore_ascii_case("auto") => 0,
            Raw::S(s) => s.trim().parse().map_err(|_| {
                serde::de::Error::custom(format!("expected a shard count or \"auto\", got {s:?}"))
            })?,
        };
        match u32::try_from(n) {
            Ok(0) => Ok(ShardCount::Auto),
            Ok(n) => Ok(ShardCount::Fixed(n)),
            Err(_) => Err(serde::de::Error::custom(format!(
                "shard count {n} is out of range"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ShardCount;

    #[test]
    fn reads_counts_and_auto() {
        let cases = [
            ("shards = 2", Some(ShardCount::Fixed(2))),
            ("shards = 0", Some(ShardCount::Auto)),
            ("shards = \"auto\"", Some(ShardCount::Auto)),
            ("shards = \"AUTO\"", Some(ShardCount::Auto)),
            ("shards = \"3\"", Some(ShardCount::Fixed(3))),
            ("shards = \"many\"", None),
            ("shards = -1", None),
            ("shards = 5000000000", None),
        ];
        for (text, want) in cases {
            let got = crate::config::from_toml(&format!("[discord]\n{text}"))
                .ok()
                .map(|c| c.discord.shards);
            assert_eq!(got, want, "{text}");
        }
    }

    #[test]
    fn round_trips_through_its_serialized_form() {
        for c in [ShardCount::Auto, ShardCount::Fixed(4)] {
            let v = serde_json::to_value(c).unwrap();
            assert_eq!(serde_json::from_value::<ShardCount>(v).unwrap(), c);
        }
    }
}
