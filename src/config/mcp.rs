//! The `[[mcp.servers]]` entries: external tool servers the agent may call over the Model
//! Context Protocol, each a child process (stdio) or a streamable-HTTP URL, with the tools that
//! ask a person first and the time a call may take.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{ConfigUrl, Secret};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpConfig {
    pub servers: Vec<McpServer>,
}

/// One `[[mcp.servers]]` entry: `command` (stdio) or `url` (streamable HTTP), not both.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpServer {
    /// The server's name: the prefix of its tools (`<name>__<tool>`), in logs and metrics.
    pub name: String,
    pub enabled: bool,
    /// The program to start for a stdio server.
    pub command: Option<String>,
    pub args: Vec<String>,
    /// The child's whole environment besides PATH, HOME and LANG (Herald's own is not passed).
    pub env: BTreeMap<String, Secret>,
    /// A streamable-HTTP endpoint (`https://host/mcp`).
    pub url: Option<ConfigUrl>,
    /// Sent as `Authorization: Bearer <token>` to a `url` server.
    pub bearer_token: Option<Secret>,
    /// Extra HTTP headers for a `url` server.
    pub headers: BTreeMap<String, Secret>,
    /// Tool names (as the server names them) that ask a person before each call, or `"all"`.
    pub require_approval: RequireApproval,
    /// Tool names (as the server names them) the operator lets run unasked although the server
    /// marks them `destructiveHint: true` (the hardline floor and `require_approval` still ask).
    pub allow: Vec<String>,
    /// How long one call may take without a progress notification from the server.
    pub timeout_secs: u64,
    /// The longest a call may take while the server keeps reporting progress.
    pub max_call_secs: u64,
    /// How long starting, `initialize` and listing the tools may take.
    pub init_timeout_secs: u64,
}

impl Default for McpServer {
    fn default() -> Self {
        McpServer {
            name: String::new(),
            enabled: true,
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            url: None,
            bearer_token: None,
            headers: BTreeMap::new(),
            require_approval: RequireApproval::default(),
            allow: Vec::new(),
            timeout_secs: 60,
            max_call_secs: 600,
            init_timeout_secs: 10,
        }
    }
}

/// `require_approval = ["delete_order"]` or `require_approval = "all"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequireApproval {
    /// Only `"all"` is accepted (validation names anything else).
    Word(String),
    Tools(Vec<String>),
}

impl Default for RequireApproval {
    fn default() -> Self {
        RequireApproval::Tools(Vec::new())
    }
}

impl RequireApproval {
    /// Whether a call of the server's tool `tool` asks first.
    pub fn covers(&self, tool: &str) -> bool {
        match self {
            RequireApproval::Word(w) => w == "all",
            RequireApproval::Tools(names) => names.iter().any(|n| n == tool),
        }
    }
}

/// A server name that is safe as a tool-name prefix: 1–32 of `[a-z0-9_-]`, starting with a
/// letter, and no `__` (the separator before the tool's own name). A name ending in `_` is
/// accepted; its tools' names carry a hash ([`crate::agent::mcp::names`]).
pub fn valid_server_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        && !name.contains("__")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approval_is_a_list_or_all() {
        let all: McpServer = toml_str("name = \"a\"\ncommand = \"x\"\nrequire_approval = \"all\"");
        assert!(all.require_approval.covers("anything"));
        let some: McpServer =
            toml_str("name = \"a\"\ncommand = \"x\"\nrequire_approval = [\"delete_order\"]");
        assert!(some.require_approval.covers("delete_order"));
        assert!(!some.require_approval.covers("lookup_order"));
        assert!(!McpServer::default().require_approval.covers("x"));
    }

    #[test]
    fn server_names() {
        for ok in ["shop", "a", "my-files_2"] {
            assert!(valid_server_name(ok), "{ok}");
        }
        for bad in ["", "Shop", "2shop", "a__b", "a.b", "a b", &"x".repeat(33)] {
            assert!(!valid_server_name(bad), "{bad}");
        }
    }

    fn toml_str(s: &str) -> McpServer {
        use figment::providers::Format;
        figment::Figment::from(figment::providers::Toml::string(s))
            .extract()
            .unwrap()
    }
}
