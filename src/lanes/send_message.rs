//! `send_message`: the agent posts into another conversation the operator allows.
//!
//! Two gates, both required: a `[[tools.send_message_routes]]` entry from the caller's lane
//! (or `*`) that lists the target, and the asking person being someone who could write to the
//! target themselves (an allowed or paired sender on the target's platform; a web lane only
//! for a web person). Every refusal reads the same, so the model cannot probe which lanes
//! exist or who may write where.
//!
//! Exactly once: the message is queued as outbox rows whose keys derive from (caller lane,
//! inbox event, call index), and its transcript mirror is an inbox event keyed the same way,
//! so a retried turn that makes the same call again queues nothing new.

use std::sync::Arc;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::Notify;

use super::Ingest;
use crate::agent::tools::{Tool, ToolContext, ToolError};
use crate::config::registry::spec;
use crate::config::Admit;
use crate::config::SendRoute;
use crate::delivery::Outbounds;
use crate::domain::cron::{parse_target, Deliverable, Target};
use crate::domain::{Control, LaneKey, MessageEvent, Person};
use crate::hooks::Authorizer;
use crate::llm::ToolSpec;
use crate::screen::{screen, Finding};
use crate::store::{NewOutbox, OutboxKey, ReplyKey, Store};

/// Longest message the tool sends.
pub const MAX_SEND_CHARS: usize = 4000;

/// The one answer to every target the caller may not use.
const REFUSAL: &str = "that conversation is not one this conversation may send to";

pub struct SendMessage {
    pub store: Arc<dyn Store>,
    pub auth: Authorizer,
    pub ingest: Ingest,
    pub outbounds: Outbounds,
    pub outbox_wake: Arc<Notify>,
    pub routes: Vec<SendRoute>,
    /// The platforms a target may name, with their id syntax.
    pub known: Deliverable,
    /// `tools.require_approval` names `send_message`.
    pub approval: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    to: String,
    text: String,
}

/// A route from the caller's lane (or `*`) lists the target.
fn routed(routes: &[SendRoute], known: &Deliverable, from: &LaneKey, to: &LaneKey) -> bool {
    routes.iter().any(|r| {
        (r.from.trim() == "*" || LaneKey::parse(r.from.trim()) == *from)
            && r.to
                .iter()
                .any(|t| parse_target(t, known).map(|t| t.lane_key()).ok().as_ref() == Some(to))
    })
}

impl SendMessage {
    /// The person could write to the target chat themselves.
    async fn may_write(&self, person: &str, target: &Target) -> bool {
        let Some(person) = Person::parse(person) else {
            return false;
        };
        if person.platform != target.platform {
            return false;
        }
        match spec(target.platform).map(|s| s.admit) {
            // Web people are the operator's (loopback or the bearer token).
            Some(Admit::Local) => true,
            Some(Admit::Allowlist { .. }) => {
                let mut ev = MessageEvent::text(target.platform, &target.chat, &person.id, "");
                ev.thread_id = target.thread.clone();
                self.auth.is_allowed_or_paired(&ev, &*self.store).await
            }
            // An API conversation or a job is no target a message can be sent to.
            Some(Admit::Keyed | Admit::Never) | None => false,
        }
    }
}

#[async_trait]
impl Tool for SendMessage {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "send_message".into(),
            description: "Send a message into another conversation the operator allows, e.g. \
                `telegram:-100123`, `discord:456`, `web:ops`. The text is posted there as is \
                and recorded in that conversation."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "to": {"type": "string", "description": "the conversation: <platform>:<chat>[:<thread>], e.g. telegram:<chat>[:<topic>], slack:<channel>[:<thread ts>] or web:<name>"},
                    "text": {"type": "string", "description": format!("the message, at most {MAX_SEND_CHARS} characters")}
                },
                "required": ["to", "text"]
            }),
        }
    }

    fn requires_approval(&self) -> bool {
        self.approval
    }

    async fn call(&self, ctx: &ToolContext, arguments: &str) -> Result<String, ToolError> {
        let args: Args = serde_json::from_str(arguments).map_err(|e| {
            ToolError::BadArguments(format!(
                "arguments are not valid JSON for send_message: {e}"
            ))
        })?;
        let text = args.text.trim();
        if text.is_empty() {
            return Err(ToolError::BadArguments("the text is empty".into()));
        }
        let len = text.chars().count();
        if len > MAX_SEND_CHARS {
            return Err(ToolError::BadArguments(format!(
                "the text is {len} characters; the most is {MAX_SEND_CHARS}"
            )));
        }
        if let Some(f @ Finding::Secret(_)) = screen(text) {
            return Err(ToolError::Refused(format!("the text contains {f}")));
        }
        let refused = || ToolError::Refused(REFUSAL.into());
        let target = parse_target(&args.to, &self.known).map_err(|_| refused())?;
        let lane = target.lane_key();
        let Target {
            platform,
            chat,
            thread,
        } = target.clone();
        if !routed(&self.routes, &self.known, &ctx.lane, &lane)
            || self.outbounds.get(platform).is_none()
            || !self.may_write(&ctx.person, &target).await
        {
            tracing::info!(lane = %ctx.lane, person = %ctx.person, to = %lane, "send_message refused");
            return Err(refused());
        }
        let Some(inbox) = ctx.inbox_id else {
            return Err(ToolError::Failed(
                "send_message can only be used while answering a message".into(),
            ));
        };
        let key = ReplyKey::sent(&ctx.lane, inbox, ctx.call_index);
        let rows: Vec<NewOutbox> = self
            .outbounds
            .split(platform, text)
            .into_iter()
            .enumerate()
            .map(|(i, chunk)| NewOutbox {
                key: OutboxKey::chunk(key.clone(), i),
                lane: lane.clone(),
                platform,
                chat_id: chat.clone(),
                thread_id: thread.clone(),
                reply_to: None,
                // Not a reply to the caller's event: its own chat's reply reads those rows.
                inbox_id: None,
                chunk_index: i as i64,
                text: chunk,
                media: None,
            })
            .collect();
        let chunks = rows.len();
        self.store
            .outbox_enqueue(&rows)
            .await
            .map_err(|e| ToolError::Failed(format!("the message could not be queued: {e}")))?;
        self.outbox_wake.notify_one();
        let mirror = MessageEvent::control(
            platform,
            &chat,
            thread.as_deref(),
            key.as_str(),
            Control::Relayed {
                from: ctx.lane.to_string(),
                text: text.to_string(),
            },
        );
        if let Err(e) = self.ingest.ingest(&mirror).await {
            // The message is queued; only the target's transcript misses it.
            tracing::warn!(error = %e, to = %lane, "send_message: the transcript mirror was not written");
        }
        tracing::info!(lane = %ctx.lane, person = %ctx.person, to = %lane, chunks, "send_message queued");
        Ok(format!("sent to {lane} ({chunks} message(s))"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_match_the_caller_or_any_and_normalize_targets() {
        let route = |from: &str, to: &[&str]| SendRoute {
            from: from.into(),
            to: to.iter().map(|s| s.to_string()).collect(),
        };
        let routes = [
            route("telegram:111", &["Telegram:222"]),
            route("*", &["web:ops"]),
        ];
        let known = crate::config::Config::default().deliverable();
        let check =
            |from: &str, to: &str| routed(&routes, &known, &LaneKey::new(from), &LaneKey::new(to));
        assert!(check("telegram:111", "telegram:222"));
        assert!(!check("telegram:333", "telegram:222"));
        assert!(check("discord:5", "web:ops"));
        assert!(!check("telegram:111", "web:other"));
    }
}
