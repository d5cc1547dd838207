//! Socket Mode: `apps.connections.open` with the app-level token gives a one-time WebSocket
//! URL; Slack sends envelopes on it, and each one is acknowledged (`{"envelope_id":…}`) within
//! three seconds, and only after the receiver has written it to the inbox. An envelope not
//! acknowledged is redelivered (with `retry_attempt` + 1) on this or the next connection; the
//! inbox makes the redelivery harmless.
//!
//! A `disconnect` message (Slack refreshes connections every few hours) opens a new
//! connection at once; a dropped socket or a refused `apps.connections.open` (a token revoked
//! mid-run) reconnects with backoff, up to a minute apart, until it works again.
//!
//! Must not: acknowledge an envelope whose inbox write failed, log an envelope's payload, or
//! log the connection URL (its ticket is a credential).

use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::Value;
use slack_morphism::api::SlackApiAppsConnectionOpenResponse;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use super::api::SlackApi;
use super::receive::{Kind, Receiver};
use crate::tasks::Backoff;

pub struct Socket {
    pub api: SlackApi,
    pub app_token: String,
    pub receiver: Arc<Receiver>,
}

/// How one connection ended.
#[derive(Debug)]
enum Ended {
    Cancelled,
    /// Slack asked us to reconnect (`disconnect`).
    Refresh,
    /// Anything else: the reason, for the log.
    Dropped(String),
}

/// What one frame asks of us.
#[derive(Debug, PartialEq)]
pub enum Frame {
    Hello,
    Disconnect(String),
    /// An envelope to hand to the receiver, then acknowledge.
    Envelope {
        id: String,
        kind: Kind,
        retry: u64,
        payload: Value,
    },
    /// An envelope of a type we do not handle, or one without a payload: acknowledged, so
    /// Slack stops sending it, and logged by id.
    Unhandled {
        id: String,
        kind: String,
    },
    /// Not a Socket Mode frame at all.
    Unreadable,
}

/// Reads one text frame.
pub fn read_frame(text: &str) -> Frame {
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return Frame::Unreadable;
    };
    let kind = v.get("type").and_then(Value::as_str).unwrap_or_default();
    match kind {
        "hello" => return Frame::Hello,
        "disconnect" => {
            let reason = v.get("reason").and_then(Value::as_str).unwrap_or("unknown");
            return Frame::Disconnect(reason.to_string());
        }
        _ => {}
    }
    let Some(id) = v.get("envelope_id").and_then(Value::as_str) else {
        return Frame::Unreadable;
    };
    let handled = match kind {
        "events_api" => Some(Kind::Event),
        "interactive" => Some(Kind::Interactive),
        "slash_commands" => Some(Kind::Command),
        _ => None,
    };
    match (handled, v.get("payload")) {
        (Some(kind), Some(payload)) if payload.is_object() => Frame::Envelope {
            id: id.to_string(),
            kind,
            retry: v.get("retry_attempt").and_then(Value::as_u64).unwrap_or(0),
            payload: payload.clone(),
        },
        _ => Frame::Unhandled {
            id: id.to_string(),
            kind: kind.to_string(),
        },
    }
}

/// The acknowledgement of an envelope.
pub fn ack(envelope_id: &str) -> String {
    serde_json::json!({ "envelope_id": envelope_id }).to_string()
}

impl Socket {
    /// Connects, receives and reconnects until `cancel`.
    pub async fn run(self, cancel: CancellationToken) {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        loop {
            match self.connection(&cancel, &mut backoff).await {
                Ended::Cancelled => return,
                Ended::Refresh => {
                    tracing::info!("slack asked for a new socket connection; reconnecting");
                    metrics::counter!("herald_slack_reconnects_total", "reason" => "refresh")
                        .increment(1);
                    continue;
                }
                Ended::Dropped(why) => {
                    tracing::warn!(reason = %why, "slack socket connection ended; reconnecting");
                    metrics::counter!("herald_slack_reconnects_total", "reason" => "dropped")
                        .increment(1);
                }
            }
            if backoff.wait(&cancel).await.is_err() {
                return;
            }
        }
    }

    async fn connection(&self, cancel: &CancellationToken, backoff: &mut Backoff) -> Ended {
        let open = self
            .api
            .form::<SlackApiAppsConnectionOpenResponse>(
                "apps.connections.open",
                &self.app_token,
                &[],
            )
            .await;
        let url = match open {
            Ok(o) => o.url.0,
            Err(e) if e.is_auth() => {
                return Ended::Dropped(format!("slack.app_token was refused ({e})"));
            }
            Err(e) => return Ended::Dropped(e.to_string()),
        };
        let ws = tokio::select! {
            _ = cancel.cancelled() => return Ended::Cancelled,
            ws = tokio_tungstenite::connect_async(url.as_str()) => ws,
        };
        let mut ws = match ws {
            Ok((ws, _)) => ws,
            Err(e) => return Ended::Dropped(format!("websocket connect failed: {e}")),
        };
        loop {
            let frame = tokio::select! {
                _ = cancel.cancelled() => {
                    let _ = ws.close(None).await;
                    return Ended::Cancelled;
                }
                frame = ws.next() => frame,
            };
            let text = match frame {
                None => return Ended::Dropped("the socket closed".into()),
                Some(Err(e)) => return Ended::Dropped(format!("socket error: {e}")),
                Some(Ok(Message::Text(t))) => t,
                Some(Ok(Message::Close(_))) => {
                    return Ended::Dropped("slack closed the socket".into())
                }
                // Pings are answered by tungstenite; nothing else carries envelopes.
                Some(Ok(_)) => continue,
            };
            match read_frame(&text) {
                Frame::Hello => {
                    tracing::info!("slack socket mode connected");
                    backoff.reset();
                }
                Frame::Disconnect(reason) => {
                    tracing::info!(reason = %reason, "slack sent disconnect");
                    let _ = ws.close(None).await;
                    return Ended::Refresh;
                }
                Frame::Envelope {
                    id,
                    kind,
                    retry,
                    payload,
                } => {
                    if retry > 0 {
                        tracing::debug!(envelope = %id, retry, "slack redelivered an envelope");
                    }
                    match self.receiver.handle(kind, &payload).await {
                        Ok(_) => {
                            if let Err(e) = ws.send(Message::Text(ack(&id))).await {
                                return Ended::Dropped(format!("ack not sent: {e}"));
                            }
                        }
                        Err(e) => {
                            // Not acknowledged: Slack delivers it again.
                            tracing::warn!(envelope = %id, error = %e,
                                "could not write a Slack event to the inbox; not acknowledged");
                        }
                    }
                }
                Frame::Unhandled { id, kind } => {
                    tracing::warn!(envelope = %id, kind = %kind,
                        "acknowledging a Slack envelope that is not handled or does not read");
                    metrics::counter!("herald_slack_events_total", "outcome" => "malformed")
                        .increment(1);
                    if let Err(e) = ws.send(Message::Text(ack(&id))).await {
                        return Ended::Dropped(format!("ack not sent: {e}"));
                    }
                }
                Frame::Unreadable => {
                    tracing::warn!("a Slack socket frame that is not an envelope; ignored");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_table() {
        let cases = [
            (r#"{"type":"hello","num_connections":1}"#, "hello"),
            (
                r#"{"type":"disconnect","reason":"refresh_requested"}"#,
                "disconnect",
            ),
            (
                r#"{"envelope_id":"e1","type":"events_api","retry_attempt":2,"payload":{"type":"event_callback"}}"#,
                "envelope",
            ),
            (
                r#"{"envelope_id":"e2","type":"events_api","payload":"nope"}"#,
                "unhandled",
            ),
            (
                r#"{"envelope_id":"e3","type":"something_new","payload":{}}"#,
                "unhandled",
            ),
            (r#"{"type":"events_api","payload":{}}"#, "unreadable"),
            ("not json", "unreadable"),
        ];
        for (text, want) in cases {
            let got = match read_frame(text) {
                Frame::Hello => "hello",
                Frame::Disconnect(_) => "disconnect",
                Frame::Envelope { .. } => "envelope",
                Frame::Unhandled { .. } => "unhandled",
                Frame::Unreadable => "unreadable",
            };
            assert_eq!(got, want, "{text}");
        }
        let Frame::Envelope {
            id, kind, retry, ..
        } = read_frame(cases[2].0)
        else {
            panic!("an envelope")
        };
        assert_eq!((id.as_str(), kind, retry), ("e1", Kind::Event, 2));
        assert_eq!(ack("e1"), r#"{"envelope_id":"e1"}"#);
    }
}
