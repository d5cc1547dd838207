//! The names the model sees for MCP tools: `<server>__<tool>`, only `[A-Za-z0-9_-]`, at most 64
//! characters. A name is a function of the server's and the tool's names alone, so it is the same
//! after every reconnect and restart (the tool list sits in the cached prompt prefix).

use sha2::{Digest, Sha256};

/// The longest tool name providers accept.
pub const MAX_NAME: usize = 64;

/// The model-visible name of `server`'s tool `tool`. Characters outside `[A-Za-z0-9_-]` become
/// `_`; a name that is too long, or that had to change, keeps a prefix and ends in 8 hex digits
/// of a hash of the original (so two tools that differ only in a replaced character, or beyond
/// the cut, still get different names).
pub fn tool_name(server: &str, tool: &str) -> String {
    let raw = format!("{server}__{tool}");
    let clean: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean == raw && clean.len() <= MAX_NAME {
        return clean;
    }
    let hash = hex::encode(&Sha256::digest(raw.as_bytes())[..4]);
    let keep = MAX_NAME - hash.len() - 1;
    let head: String = clean.chars().take(keep).collect();
    format!("{head}_{hash}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(n: &str) -> bool {
        n.len() <= MAX_NAME
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn plain_names_pass_through() {
        assert_eq!(tool_name("shop", "lookup_order"), "shop__lookup_order");
        assert_eq!(tool_name("fs", "read-file"), "fs__read-file");
    }

    #[test]
    fn odd_and_long_names_are_cleaned_stable_and_distinct() {
        let dotted = tool_name("shop", "orders.get");
        let underscored = tool_name("shop", "orders_get");
        assert!(valid(&dotted), "{dotted}");
        assert!(dotted.starts_with("shop__orders_get_"), "{dotted}");
        assert_ne!(dotted, underscored, "a replaced character cannot collide");
        assert_eq!(dotted, tool_name("shop", "orders.get"), "stable");

        let a = tool_name("shop", &format!("{}a", "x".repeat(80)));
        let b = tool_name("shop", &format!("{}b", "x".repeat(80)));
        assert!(valid(&a) && valid(&b));
        assert_eq!(a.len(), MAX_NAME);
        assert_ne!(a, b, "names that differ past the cut stay apart");
        assert!(valid(&tool_name("s", "ünïcödé tool/with spaces")));
    }
}
