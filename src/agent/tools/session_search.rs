//! `session_search`: the agent's look back into earlier sessions of its own conversation.

use std::sync::Arc;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

use super::{Tool, ToolContext, ToolError};
use crate::agent::context::spill::PAGE_CHARS;
use crate::domain::{Role, SessionId};
use crate::llm::ToolSpec;
use crate::store::{SearchScope, Store};

/// `session_search`: discovery (query → sessions and message ids) and scroll (session id +
/// around_message_id → the neighbouring messages). Two call shapes, never mixed: a model that
/// guesses a session id without discovery gets told to search first. Both see only the
/// caller's lane — its current and earlier sessions — and only the sessions of the caller's
/// agent (`ToolContext.agent`), so one person's agent cannot read another conversation, and
/// the coding agent cannot read what the family agent was told in the same chat; operators search across lanes with `herald sessions search`.
pub struct SessionSearch {
    pub store: Arc<dyn Store>,
}

#[derive(Deserialize)]
struct SearchArgs {
    query: Option<String>,
    session_id: Option<SessionId>,
    around_message_id: Option<i64>,
    role_filter: Option<String>,
    limit: Option<i64>,
    offset: Option<usize>,
}

#[async_trait]
impl Tool for SessionSearch {
    /// It only reads: calls of it run alongside other reads of the same answer.
    fn read_only(&self) -> bool {
        true
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "session_search".into(),
            description: "Search earlier sessions of this conversation. Discovery: pass `query` to get matching \
                sessions with a message id and snippet. Scroll: pass `session_id` and \
                `around_message_id` (from discovery) to read the messages around it; add \
                `offset` to page through that one message's full text instead."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "words to find (discovery)"},
                    "session_id": {"type": "string", "description": "session to read (scroll)"},
                    "around_message_id": {"type": "integer", "description": "message id to center on (scroll)"},
                    "role_filter": {"type": "string", "description": "comma-separated roles, e.g. user,assistant,tool"},
                    "limit": {"type": "integer", "description": "max results (default 5)"},
                    "offset": {"type": "integer", "description": "page through message around_message_id from this character (scroll)"}
                }
            }),
        }
    }

    async fn call(&self, ctx: &ToolContext, arguments: &str) -> Result<String, ToolError> {
        let args: SearchArgs = match serde_json::from_str(arguments) {
            Ok(a) => a,
            Err(e) => {
                return Err(ToolError::BadArguments(format!(
                    "arguments are not valid JSON for session_search: {e}"
                )))
            }
        };
        let roles: Option<Vec<Role>> = args
            .role_filter
            .as_deref()
            .map(|r| r.split(',').filter_map(|s| Role::parse(s.trim())).collect());
        if roles.as_ref().is_some_and(|r| r.is_empty()) {
            return Err(ToolError::BadArguments(
                "role_filter names no known role; use user, assistant, tool or system".into(),
            ));
        }
        let role_ok = |role: Role| roles.as_ref().is_none_or(|rs| rs.contains(&role));
        if let (None, Some(sid), Some(_)) = (&args.query, &args.session_id, args.around_message_id)
        {
            if !self.agent_owns(ctx, sid).await? {
                return Err(ToolError::Failed(format!(
                    "no session {sid} in this conversation"
                )));
            }
        }
        match (args.query, args.session_id, args.around_message_id) {
            (Some(q), None, None) => {
                let limit = args.limit.unwrap_or(5).clamp(1, 20);
                let roles = roles.as_deref().unwrap_or_default();
                match self
                    .store
                    .search(SearchScope::Agent(&ctx.lane, &ctx.agent), &q, roles, limit)
                    .await
                {
                    Ok(hits) => {
                        let hits: Vec<_> = hits
                            .into_iter()
                            .map(|h| json!({"session_id": h.session_id, "message_id": h.message_id, "role": h.role, "snippet": h.snippet}))
                            .collect();
                        Ok(json!({"results": hits}).to_string())
                    }
                    Err(e) => Err(ToolError::Failed(format!("search failed: {e}"))),
                }
            }
            (None, Some(sid), Some(around)) if args.offset.is_some() => {
                let offset = args.offset.unwrap_or_default();
                match self.store.messages_around(&ctx.lane, &sid, around, 0).await {
                    Ok(msgs) => match msgs.into_iter().find(|m| m.id == around) {
                        Some(m) => Ok(page(&sid, &m.content, around, offset)),
                        None => Err(ToolError::Failed(format!(
                            "no message {around} in session {sid}"
                        ))),
                    },
                    Err(e) => Err(ToolError::Failed(format!("scroll failed: {e}"))),
                }
            }
            (None, Some(sid), Some(around)) => {
                match self.store.messages_around(&ctx.lane, &sid, around, 5).await {
                    Ok(msgs) if msgs.is_empty() => Err(ToolError::Failed(format!(
                        "no message {around} in session {sid}"
                    ))),
                    Ok(msgs) => {
                        let msgs: Vec<_> = msgs
                            .into_iter()
                            .filter(|m| role_ok(m.role))
                            .map(|m| json!({"message_id": m.id, "role": m.role, "content": capped(&m.content)}))
                            .collect();
                        Ok(json!({"session_id": sid, "messages": msgs}).to_string())
                    }
                    Err(e) => Err(ToolError::Failed(format!("scroll failed: {e}"))),
                }
            }
            _ => Err(ToolError::BadArguments(
                "call session_search either with `query` (discovery) or with `session_id` \
                 and `around_message_id` (scroll), not both and not neither"
                    .into(),
            )),
        }
    }
}

impl SessionSearch {
    /// Whether `sid` is a session of the caller's agent (the lane is checked by the store).
    async fn agent_owns(&self, ctx: &ToolContext, sid: &SessionId) -> Result<bool, ToolError> {
        match self.store.session_get(sid).await {
            Ok(s) => Ok(s.is_some_and(|s| s.agent == ctx.agent && s.lane == ctx.lane)),
            Err(e) => Err(ToolError::Failed(format!("scroll failed: {e}"))),
        }
    }
}

/// One page of a long message: `PAGE_CHARS` characters from `offset`, with the next offset.
pub(crate) fn page(session_id: &str, content: &str, id: i64, offset: usize) -> String {
    let total = content.chars().count();
    let text: String = content.chars().skip(offset).take(PAGE_CHARS).collect();
    let end = offset.saturating_add(text.chars().count());
    json!({"session_id": session_id, "message_id": id, "total_chars": total, "offset": offset,
        "next_offset": if end < total { Some(end) } else { None }, "content": text})
    .to_string()
}

/// A scroll shows each neighbour at most one page long, so one huge tool result cannot flood
/// the context it was spilled out of.
fn capped(content: &str) -> String {
    let total = content.chars().count();
    if total <= PAGE_CHARS {
        return content.to_string();
    }
    let head: String = content.chars().take(PAGE_CHARS).collect();
    format!(
        "{head}\n[… {} more characters; page with offset={PAGE_CHARS}]",
        total - PAGE_CHARS
    )
}
