//! The Socket Mode delivery queue: every event, click and command becomes an envelope that is
//! sent on one live connection (round robin) and stays pending until the app acknowledges it.
//! An event envelope unacknowledged `ack_timeout` after its delivery (because the app was slow,
//! or died, or its socket dropped) is sent again with `retry_attempt` + 1 and the same event id,
//! on whichever connection is live then, until the retry limit; as Slack does. Clicks and
//! commands are not redelivered (Slack shows the person an error instead).
//!
//! In Events API mode (a target URL set) nothing queues here: `events_api.rs` posts instead.
//!
//! Must not: drop an event silently. A given-up envelope stays listed with `given_up`.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::records::{Delivery, EnvelopeView, Route};
use super::socket::ConnCmd;
use super::state::State;
use super::{events_api, payloads, Shared};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EnvKind {
    EventsApi,
    Interactive,
    SlashCommands,
}

impl EnvKind {
    pub fn name(self) -> &'static str {
        match self {
            EnvKind::EventsApi => "events_api",
            EnvKind::Interactive => "interactive",
            EnvKind::SlashCommands => "slash_commands",
        }
    }
}

pub(crate) struct Envelope {
    pub id: String,
    pub kind: EnvKind,
    pub payload: Value,
    pub event_id: Option<String>,
    /// The `retry_attempt` of the latest (or next) delivery.
    pub attempt: u32,
    /// The connection it was last sent on and when that delivery times out.
    pub on_conn: Option<u64>,
    pub deadline: Option<Instant>,
    pub deliveries: u32,
    pub acked: bool,
    pub given_up: bool,
}

impl Envelope {
    pub fn pending(&self) -> bool {
        !self.acked && !self.given_up
    }

    pub fn view(&self) -> EnvelopeView {
        let event = &self.payload["event"];
        let field = |k: &str| event[k].as_str().map(str::to_string);
        EnvelopeView {
            envelope_id: self.id.clone(),
            event_id: self.event_id.clone(),
            kind: self.kind.name().to_string(),
            event_type: field("type"),
            channel: field("channel"),
            ts: field("ts"),
            deliveries: self.deliveries,
            acked: self.acked,
            given_up: self.given_up,
        }
    }
}

/// Wraps `event` in an `event_callback` and hands it to the app, unless the app is not
/// subscribed to it. Returns the event id.
pub(crate) fn send_event(shared: &Arc<Shared>, event: Value) -> String {
    let (event_id, payload) = {
        let mut st = shared.lock();
        let id = st.new_id("Ev");
        let time = chrono::Utc::now().timestamp();
        let payload = payloads::event_callback(&shared.cfg, event, &id, time);
        (id, payload)
    };
    send(shared, EnvKind::EventsApi, payload, Some(event_id.clone()));
    event_id
}

/// Hands one payload to the app: queued for the socket, or posted in Events API mode.
/// Returns its envelope id (also the id of its deliveries in Events API mode).
pub(crate) fn send(
    shared: &Arc<Shared>,
    kind: EnvKind,
    payload: Value,
    event_id: Option<String>,
) -> String {
    let id = uuid::Uuid::new_v4().to_string();
    let mut st = shared.lock();
    if let Some(url) = st.targets.url_for(kind) {
        drop(st);
        events_api::post(shared.clone(), kind, payload, id.clone(), event_id, url);
        return id;
    }
    st.envelopes.push(Envelope {
        id: id.clone(),
        kind,
        payload,
        event_id,
        attempt: 0,
        on_conn: None,
        deadline: None,
        deliveries: 0,
        acked: false,
        given_up: false,
    });
    let idx = st.envelopes.len() - 1;
    deliver(&mut st, idx);
    id
}

/// Sends envelope `idx` on the next live connection, if there is one.
fn deliver(st: &mut State, idx: usize) {
    let live: Vec<u64> = st.conns.keys().copied().collect();
    if live.is_empty() {
        return;
    }
    let conn = live[st.rr % live.len()];
    st.rr += 1;
    let timeout = st.ack_timeout;
    let e = &mut st.envelopes[idx];
    let mut frame = json!({
        "envelope_id": e.id,
        "payload": e.payload,
        "type": e.kind.name(),
        "accepts_response_payload": e.kind == EnvKind::SlashCommands,
    });
    if e.kind == EnvKind::EventsApi {
        frame["retry_attempt"] = json!(e.attempt);
        frame["retry_reason"] = json!(if e.attempt == 0 { "" } else { "timeout" });
    }
    e.on_conn = Some(conn);
    e.deadline = Some(Instant::now() + timeout);
    e.deliveries += 1;
    let delivery = Delivery {
        envelope_id: e.id.clone(),
        event_id: e.event_id.clone(),
        kind: e.kind.name().to_string(),
        retry_attempt: e.attempt,
        route: Route::Socket { connection: conn },
        at: Instant::now(),
    };
    if let Some(c) = st.conns.get(&conn) {
        let _ = c.tx.send(ConnCmd::Frame(frame.to_string()));
    }
    st.rec.deliveries.push(delivery);
}

/// Sends every envelope that waits for a connection (called when one opens).
pub(crate) fn flush(st: &mut State) {
    for idx in 0..st.envelopes.len() {
        let e = &st.envelopes[idx];
        if e.pending() && e.on_conn.is_none() {
            deliver(st, idx);
        }
    }
}

/// Redelivers what timed out, gives up what ran out of retries, sends what waited.
fn redeliver_due(st: &mut State) {
    let now = Instant::now();
    for idx in 0..st.envelopes.len() {
        let max = st.max_retries;
        let e = &mut st.envelopes[idx];
        if !e.pending() {
            continue;
        }
        match (e.on_conn, e.deadline) {
            (Some(_), Some(deadline)) if now >= deadline => {
                if e.kind != EnvKind::EventsApi || max.is_some_and(|m| e.attempt >= m) {
                    e.given_up = true;
                    continue;
                }
                e.attempt += 1;
                e.on_conn = None;
                e.deadline = None;
                deliver(st, idx);
            }
            (None, _) => deliver(st, idx),
            _ => {}
        }
    }
}

/// The clock of redelivery; ends when the fake is dropped.
pub(crate) async fn tick(shared: Weak<Shared>) {
    loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        redeliver_due(&mut shared.lock());
    }
}

/// Records an acknowledgement and settles its envelope.
pub(crate) fn ack(st: &mut State, conn: u64, envelope_id: &str, payload: Option<Value>) {
    let found = st.envelopes.iter_mut().find(|e| e.id == envelope_id);
    let (known, first) = match found {
        Some(e) => {
            let first = !e.acked;
            e.acked = true;
            (true, first)
        }
        None => (false, false),
    };
    st.rec.acks.push(super::records::Ack {
        envelope_id: envelope_id.to_string(),
        connection: conn,
        payload,
        known,
        first,
        at: Instant::now(),
    });
}
