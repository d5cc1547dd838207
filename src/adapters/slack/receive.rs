//! One Slack payload in, at most one inbox row out: the step Socket Mode and the Events API
//! share. The caller acknowledges (acks the envelope, answers 200) only after `Ok`.
//!
//! A payload that does not parse is acknowledged anyway (it would never parse on a redelivery
//! either) and logged without its body, by its envelope or event id; a store failure is the
//! only `Err`, and then the caller does not acknowledge, so Slack delivers it again.
//!
//! Must not: acknowledge anything itself, or log a payload (it holds what people wrote).

use std::collections::HashSet;
use std::panic::AssertUnwindSafe;

use serde_json::Value;

use super::api::SlackApi;
use super::inbound::{self, BotIdentity, Decision, Rules};
use crate::lanes::{Approvals, Ingest};
use crate::store::{InboxInsert, StoreError};

pub struct Receiver {
    pub ingest: Ingest,
    pub approvals: Approvals,
    pub api: SlackApi,
    pub bot_token: String,
    pub me: BotIdentity,
    pub require_mention: bool,
    pub free_response_channels: HashSet<String>,
}

/// What kind of payload arrived (Socket Mode's envelope `type`, or the HTTP route).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An Events API callback (`{"type":"event_callback","event":{…}}`).
    Event,
    /// An interactivity payload (`block_actions`).
    Interactive,
    /// A slash command.
    Command,
}

/// What became of one payload (for logs and tests; every variant may be acknowledged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    Ingested,
    Duplicate,
    Pressed,
    Ignored,
    Malformed,
}

impl Received {
    fn as_str(self) -> &'static str {
        match self {
            Received::Ingested => "ingested",
            Received::Duplicate => "duplicate",
            Received::Pressed => "pressed",
            Received::Ignored => "ignored",
            Received::Malformed => "malformed",
        }
    }
}

impl Receiver {
    /// `Err` only when the store could not take the event: the caller must not acknowledge.
    pub async fn handle(&self, kind: Kind, payload: &Value) -> Result<Received, StoreError> {
        let got = self.handle_inner(kind, payload).await;
        if let Ok(r) = &got {
            metrics::counter!("herald_slack_events_total", "outcome" => r.as_str()).increment(1);
        }
        got
    }

    async fn handle_inner(&self, kind: Kind, payload: &Value) -> Result<Received, StoreError> {
        let id = payload
            .get("event_id")
            .or_else(|| payload.get("trigger_id"))
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string();
        let Some(decision) = self.decide(kind, payload, &id) else {
            return Ok(Received::Malformed);
        };
        match decision {
            Decision::Ignore(reason) => {
                tracing::debug!(id = %id, reason, "slack event not for the agent");
                Ok(Received::Ignored)
            }
            Decision::Press(press) => {
                // Recorded in the store before the payload is acknowledged; telling the presser
                // is best effort (a press answered here and lost there is still answered).
                let outcome = self.approvals.press(&press).await;
                let respond = payload.get("response_url").and_then(Value::as_str);
                self.tell_presser(respond, &press, &outcome.text()).await;
                Ok(Received::Pressed)
            }
            Decision::Ingest(event) => Ok(match self.ingest.ingest(&event).await? {
                InboxInsert::Inserted(_) => Received::Ingested,
                InboxInsert::Duplicate(_) => Received::Duplicate,
            }),
        }
    }

    /// Payload → decision, with no I/O; `None` (logged by id, without the body) when it does
    /// not read, or when reading it panicked.
    fn decide(&self, kind: Kind, payload: &Value, id: &str) -> Option<Decision> {
        let rules = Rules {
            me: &self.me,
            require_mention: self.require_mention,
            free_response_channels: &self.free_response_channels,
        };
        let run = || match kind {
            Kind::Event => match payload.get("event") {
                Some(event) => inbound::decide_event(event, &rules).map_err(|e| e.to_string()),
                None => Err("no event in the callback".to_string()),
            },
            Kind::Interactive => Ok(super::interactions::decide_interaction(payload)),
            Kind::Command => Ok(super::interactions::decide_command(payload)),
        };
        // Unwind safety: deciding only reads its inputs.
        match std::panic::catch_unwind(AssertUnwindSafe(run)) {
            Ok(Ok(d)) => Some(d),
            Ok(Err(error)) => {
                tracing::warn!(id = %id, ?kind, error = %error,
                    "skipping a Slack payload that cannot be read (acknowledged: it would never read)");
                None
            }
            Err(_) => {
                tracing::error!(id = %id, ?kind,
                    "reading a Slack payload panicked; skipped it (a bug: keep this log line)");
                None
            }
        }
    }

    /// Tells the presser, and only them, what their press did: an ephemeral answer on the
    /// press's `response_url`, else `chat.postEphemeral`.
    async fn tell_presser(&self, respond: Option<&str>, press: &crate::lanes::Press, text: &str) {
        let res = match respond {
            Some(url) => {
                let body = serde_json::json!({
                    "response_type": "ephemeral",
                    "replace_original": false,
                    "text": text,
                });
                self.api.respond(url, &body).await
            }
            None => {
                let body = serde_json::json!({
                    "channel": press.chat_id, "user": press.sender_id, "text": text,
                });
                self.api
                    .post::<Value>("chat.postEphemeral", &self.bot_token, &body)
                    .await
                    .map(|_| ())
            }
        };
        if let Err(e) = res {
            tracing::debug!(error = %e, "could not tell the presser the outcome");
        }
    }
}
