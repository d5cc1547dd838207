//! The `[tools]` and `[approvals]` sections: which built-in tools the model is offered, where
//! `send_message` may post, and the approval policy every tool call passes through.

use serde::{Deserialize, Serialize};

/// Tool-name patterns that always ask when the operator lists none: operations whose damage
/// outlives the conversation.
pub const DEFAULT_HARDLINE: &[&str] = &[
    "*delete*",
    "*drop*",
    "*destroy*",
    "*wipe*",
    "*purge*",
    "*erase*",
    "*truncate*",
    "*shutdown*",
    "*reboot*",
    "*format_disk*",
];

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolsConfig {
    /// The `cron` tool: create, list, pause and remove scheduled jobs from a conversation.
    pub cron: bool,
    /// The `send_message` tool (it is offered only when `send_message_routes` is not empty).
    pub send_message: bool,
    /// Where `send_message` may post: from a lane (or `*`) to listed lanes.
    pub send_message_routes: Vec<SendRoute>,
    /// Built-in tools that ask the person before each call (e.g. `["cron"]`); `cron.create`
    /// asks only before a job is created from a conversation (the default).
    pub require_approval: Vec<String>,
    /// The `delegate` tool: hand a goal (or a batch) to child agents that start fresh.
    pub delegate: bool,
    /// Children of one `delegate` batch running at once.
    pub delegate_max_parallel: usize,
    /// Model turns one child agent may take before it must answer.
    pub delegate_max_iterations: u32,
    /// The `web_fetch` tool: read a public web page or document (limits in `[web_tools]`).
    pub web_fetch: bool,
    /// The `web_search` tool (offered only when `web_tools.search_provider` is set).
    pub web_search: bool,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        ToolsConfig {
            cron: true,
            send_message: true,
            send_message_routes: Vec::new(),
            require_approval: vec!["cron.create".into()],
            delegate: true,
            delegate_max_parallel: 3,
            delegate_max_iterations: 12,
            web_fetch: true,
            web_search: true,
        }
    }
}

/// One `[[tools.send_message_routes]]` entry.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SendRoute {
    /// The lane the request comes from (`telegram:123`), or `*` for any lane.
    pub from: String,
    /// Lanes it may post to (`discord:456`, `telegram:-100789`, `web:ops`).
    pub to: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApprovalsConfig {
    /// An unanswered request is denied after this many seconds.
    pub timeout_secs: u64,
    /// Tool-name patterns that always ask, even with `bypass` on (globs, case-insensitive).
    pub hardline: Vec<String>,
    /// Tool-name patterns that never run, whatever anyone answers.
    pub deny: Vec<String>,
    /// Run tools that ask for approval without asking (the hardline still asks). Read once at
    /// startup; nothing at runtime can change it.
    pub bypass: bool,
    /// Only the person whose message led to the call may answer it (in a group, other allowed
    /// members are told who can). Off: any allowed sender of the chat may answer.
    pub only_requester: bool,
    /// Who may `/stop` another member's turn and `/new` a group's shared session: `[[people]]`
    /// names or identities (`telegram:<id>`, `discord:<id>`). Everyone else acts only on
    /// their own turn and session in a group.
    pub admins: Vec<String>,
}

impl Default for ApprovalsConfig {
    fn default() -> Self {
        ApprovalsConfig {
            timeout_secs: 300,
            hardline: DEFAULT_HARDLINE.iter().map(|s| s.to_string()).collect(),
            deny: Vec::new(),
            bypass: false,
            only_requester: true,
            admins: Vec::new(),
        }
    }
}

impl ApprovalsConfig {
    /// Each of `approvals.admins` is a `[[people]]` name in `people` or a chat identity
    /// (`telegram:<id>`, `discord:<id>`): a typo would leave a group without the admin meant.
    pub fn check(&self, people: &[super::Person]) -> Result<(), (&'static str, String)> {
        for a in &self.admins {
            let person = people.iter().any(|p| &p.name == a);
            // Admins are people a chat platform lets in by id (not the web chat, not the API).
            let identity = crate::domain::Person::parse(a).is_some_and(|p| {
                super::registry::spec(p.platform).is_some_and(|s| {
                    matches!(s.admit, super::Admit::Allowlist { .. }) && (s.person_id)(&p.id)
                })
            });
            if !person && !identity {
                return Err((
                    "approvals.admins",
                    format!(
                        "{a:?} is neither a [[people]] name nor an identity like telegram:123 or \
                         slack:U0123ABCD"
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::ApprovalsConfig;
    use crate::config::Person;

    #[test]
    fn admins_are_people_or_chat_identities() {
        let people = [Person {
            name: "ann".into(),
            ids: vec!["telegram:1".into()],
        }];
        let with = |admins: &[&str]| {
            ApprovalsConfig {
                admins: admins.iter().map(|a| a.to_string()).collect(),
                ..ApprovalsConfig::default()
            }
            .check(&people)
        };
        assert!(with(&["ann", "telegram:42", "discord:7"]).is_ok());
        for bad in ["bob", "telegram:", "telegram:abc", "web:ann", "42"] {
            let (key, message) = with(&[bad]).unwrap_err();
            assert_eq!(key, "approvals.admins");
            assert!(message.contains(bad), "{message}");
        }
    }
}
