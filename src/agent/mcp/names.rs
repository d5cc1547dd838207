//! The names the model sees for MCP tools: `<server>__<tool>`, only `[A-Za-z0-9_-]`, at most 64
//! characters. A name is a function of the server's and the tool's names alone, so it is the same
//! after every reconnect and restart (the tool list sits in the cached prompt prefix).
//!
//! Two servers can still meet on one name (`evil` + `_y` and `evil_` + `y` both clean to
//! `evil___y`; a server name ending in `_` or a tool name starting with one is hashed for that
//! reason, but a name cut at 64 characters could meet another by chance). [`dedupe`] is the last
//! word: the server configured first keeps the name, a later one's tool gets a hash suffix, and
//! the collision is logged once.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use crate::agent::tools::{Origin, Tool, ToolContext, ToolError, ToolOutput};
use crate::llm::ToolSpec;

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
    let ambiguous = server.ends_with('_') || tool.starts_with('_');
    if clean == raw && clean.len() <= MAX_NAME && !ambiguous {
        return clean;
    }
    suffixed(&clean, &format!("{server}\0{tool}"))
}

/// `name` cut to fit, then `_` and 8 hex digits of a hash of `key`.
fn suffixed(name: &str, key: &str) -> String {
    let hash = hex::encode(&Sha256::digest(key.as_bytes())[..4]);
    let keep = MAX_NAME - hash.len() - 1;
    let head: String = name.chars().take(keep).collect();
    format!("{head}_{hash}")
}

/// Names already warned about, so a collision is logged once, not once per turn.
#[derive(Default)]
pub struct Warned(Mutex<HashSet<String>>);

/// One list of tools from the per-server lists (in configuration order): a name taken by an
/// earlier server is given to a later server's tool with a hash suffix, never shared.
pub fn dedupe(lists: Vec<Vec<Arc<dyn Tool>>>, warned: &Warned) -> Vec<Arc<dyn Tool>> {
    let mut taken = BTreeSet::new();
    let mut out = Vec::new();
    for list in lists {
        for tool in list {
            let name = tool.spec().name;
            if taken.insert(name.clone()) {
                out.push(tool);
                continue;
            }
            let origin = tool.origin().to_string();
            let mut renamed = suffixed(&name, &format!("{origin}\0{name}"));
            while !taken.insert(renamed.clone()) {
                renamed = suffixed(&name, &renamed);
            }
            if warned.0.lock().expect("warned").insert(renamed.clone()) {
                tracing::warn!(tool = %name, %origin, renamed = %renamed, "two MCP servers offer a tool of the same name; the later server's is renamed");
            }
            out.push(Arc::new(Renamed {
                inner: tool,
                name: renamed,
            }));
        }
    }
    out
}

/// A tool offered under another name (see [`dedupe`]).
struct Renamed {
    inner: Arc<dyn Tool>,
    name: String,
}

#[async_trait::async_trait]
impl Tool for Renamed {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            ..self.inner.spec()
        }
    }
    fn origin(&self) -> Origin {
        self.inner.origin()
    }
    fn requires_approval(&self) -> bool {
        self.inner.requires_approval()
    }
    fn approval_reason(&self) -> Option<String> {
        self.inner.approval_reason()
    }
    fn read_only(&self) -> bool {
        self.inner.read_only()
    }
    async fn call(&self, ctx: &ToolContext, arguments: &str) -> Result<String, ToolError> {
        self.inner.call(ctx, arguments).await
    }
    async fn call_output(
        &self,
        ctx: &ToolContext,
        arguments: &str,
    ) -> Result<ToolOutput, ToolError> {
        self.inner.call_output(ctx, arguments).await
    }
    fn repeat_on_retry(&self) -> bool {
        self.inner.repeat_on_retry()
    }
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

    #[test]
    fn an_ambiguous_join_is_hashed_so_two_servers_cannot_meet() {
        let a = tool_name("evil", "_y");
        let b = tool_name("evil_", "y");
        assert_ne!(a, b);
        assert!(valid(&a) && valid(&b));
        assert_ne!(a, "evil___y");
    }

    struct Named(&'static str, &'static str);

    #[async_trait::async_trait]
    impl Tool for Named {
        fn spec(&self) -> ToolSpec {
            ToolSpec {
                name: self.1.into(),
                description: String::new(),
                parameters: serde_json::json!({}),
            }
        }
        fn origin(&self) -> Origin {
            Origin::Mcp(self.0.into())
        }
        async fn call(&self, _: &ToolContext, _: &str) -> Result<String, ToolError> {
            Ok(self.0.into())
        }
    }

    #[test]
    fn a_colliding_name_from_a_later_server_gets_a_suffix() {
        let warned = Warned::default();
        let lists = || -> Vec<Vec<Arc<dyn Tool>>> {
            vec![
                vec![Arc::new(Named("first", "x__y"))],
                vec![
                    Arc::new(Named("second", "x__y")),
                    Arc::new(Named("second", "x__z")),
                ],
            ]
        };
        let out = dedupe(lists(), &warned);
        let names: Vec<String> = out.iter().map(|t| t.spec().name).collect();
        assert_eq!(names[0], "x__y");
        assert!(
            names[1].starts_with("x__y_") && names[1].len() == 13,
            "{names:?}"
        );
        assert_eq!(names[2], "x__z");
        assert_eq!(out[1].origin(), Origin::Mcp("second".into()));
        // Stable across snapshots, warned once.
        let again: Vec<String> = dedupe(lists(), &warned)
            .iter()
            .map(|t| t.spec().name)
            .collect();
        assert_eq!(again, names);
        assert_eq!(warned.0.lock().unwrap().len(), 1);
    }
}
