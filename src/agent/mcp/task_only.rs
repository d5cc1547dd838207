//! Tools that require task augmentation (`execution.taskSupport: "required"`): Herald does not
//! run MCP tasks, so such a tool would always fail (-32601); it is left out with one log line.
//!
//! rmcp's `Tool` does not carry `execution`, so the field is read from the raw JSON of each
//! `tools/list` answer before rmcp parses it: by the stdio reader ([`super::stdio`]) and by the
//! watched HTTP client ([`super::http`], JSON bodies and SSE events alike). [`TaskOnly`] is the
//! one filter both feed; [`super::connect::list_tools`] applies it.

use std::collections::BTreeSet;
use std::sync::Mutex;

use super::connect::short;

/// The names of the tools a server last listed as task-only.
#[derive(Default)]
pub struct TaskOnly(Mutex<BTreeSet<String>>);

impl TaskOnly {
    /// Notes what one raw JSON-RPC message says, if it is a `tools/list` answer: its task-only
    /// tools are recorded, and a tool listed without the requirement is forgotten (a server
    /// may drop it when its list changes).
    pub fn see(&self, message: &serde_json::Value) {
        let Some(tools) = message["result"]["tools"].as_array() else {
            return;
        };
        let mut set = self.0.lock().expect("task-only lock");
        for t in tools {
            let Some(name) = t["name"].as_str() else {
                continue;
            };
            if t["execution"]["taskSupport"] == "required" {
                set.insert(name.to_string());
            } else {
                set.remove(name);
            }
        }
    }

    /// [`see`](Self::see) for a message still in text (an HTTP body, an SSE event's data);
    /// text that is not JSON is left to rmcp to reject.
    pub fn see_text(&self, text: &str) {
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
            self.see(&value);
        }
    }

    /// Whether `name` was listed as task-only.
    pub fn contains(&self, name: &str) -> bool {
        self.0.lock().expect("task-only lock").contains(name)
    }

    /// Leaves the task-only tools out of `tools`, with one info line each.
    pub fn leave_out(&self, server: &str, tools: &mut Vec<rmcp::model::Tool>) {
        tools.retain(|t| {
            let keep = !self.contains(&t.name);
            if !keep {
                tracing::info!(server = %server, tool = %short(&t.name), "mcp tool left out: it requires task augmentation (execution.taskSupport = required), which Herald does not support");
            }
            keep
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str) -> rmcp::model::Tool {
        serde_json::from_value(serde_json::json!({"name": name, "inputSchema": {"type": "object"}}))
            .unwrap()
    }

    #[test]
    fn a_task_only_tool_is_left_out_until_a_list_offers_it_plainly() {
        let t = TaskOnly::default();
        t.see_text(r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a","inputSchema":{"type":"object"}},{"name":"b","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}},{"name":"c","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}}]}}"#);
        let mut tools = vec![tool("a"), tool("b"), tool("c")];
        t.leave_out("memo", &mut tools);
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, ["a", "c"]);

        // Not a list answer, or not JSON: nothing changes.
        t.see_text(r#"{"jsonrpc":"2.0","id":2,"result":{"content":[]}}"#);
        t.see_text("event: ping");
        assert!(t.contains("b"));

        t.see_text(r#"{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"b","inputSchema":{"type":"object"}}]}}"#);
        assert!(!t.contains("b"));
    }
}
