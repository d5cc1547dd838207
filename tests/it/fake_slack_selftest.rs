//! Proves the fake Slack in `test-support/src/fake_slack` with plain HTTP and websocket
//! clients (reqwest, tokio-tungstenite), so the adapter's tests built on it test Slack's wire
//! behaviour and not the fake's imagination: Socket Mode's hello, redelivery of an unacked
//! envelope and none after the ack; 429 with Retry-After; token errors; history with and
//! without metadata; the upload flow; private files; signed Events API posts.
//!
//! Each test starts its own fake. Every wait is bounded. Nothing here involves Herald itself.

mod events_api;
mod files;
mod promise;
mod web;

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use herald_test_support::fake_slack::tokio_tungstenite::tungstenite::Message;
use herald_test_support::fake_slack::tokio_tungstenite::{self, MaybeTlsStream, WebSocketStream};
use herald_test_support::fake_slack::{FakeSlack, FakeSlackConfig};
use serde_json::{json, Value};
use tokio::net::TcpStream;

pub const WAIT: Duration = Duration::from_secs(10);

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

pub async fn start() -> FakeSlack {
    herald_test_support::harness::init();
    FakeSlack::start(FakeSlackConfig::default()).await
}

/// An answer of the Web API: status, headers, body.
pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

/// POSTs `args` as JSON with `token` as a bearer.
pub async fn call(fake: &FakeSlack, method: &str, token: Option<&str>, args: Value) -> Answer {
    let mut req = reqwest::Client::new()
        .post(format!("{}/{method}", fake.api_url()))
        .header("content-type", "application/json; charset=utf-8")
        .body(args.to_string());
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    answer(req).await
}

/// POSTs `pairs` form-encoded (the token, when wanted, is one of them).
pub async fn call_form(fake: &FakeSlack, method: &str, pairs: &[(&str, &str)]) -> Answer {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish();
    let req = reqwest::Client::new()
        .post(format!("{}/{method}", fake.api_url()))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body);
    answer(req).await
}

async fn answer(req: reqwest::RequestBuilder) -> Answer {
    let r = req.send().await.expect("fake slack answers");
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let body = r.json().await.expect("a JSON body");
    Answer {
        status,
        headers,
        body,
    }
}

/// Opens a Socket Mode connection the way a client does and reads its `hello`.
async fn connect(fake: &FakeSlack) -> (Socket, Value) {
    let token = fake.config().app_token.clone();
    let open = call(fake, "apps.connections.open", Some(&token), json!({})).await;
    assert_eq!(open.body["ok"], true, "{}", open.body);
    let url = open.body["url"].as_str().expect("a url").to_string();
    assert!(
        url.starts_with("ws://127.0.0.1:") && url.contains("/link/?ticket="),
        "{url}"
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(url.as_str())
        .await
        .expect("socket connects");
    let hello = next_frame(&mut ws, WAIT).await.expect("hello");
    (ws, hello)
}

/// The next JSON text frame, or `None` when none came within `within`.
async fn next_frame(ws: &mut Socket, within: Duration) -> Option<Value> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let frame = tokio::time::timeout_at(deadline, ws.next()).await.ok()??;
        if let Message::Text(t) = frame.expect("a websocket frame") {
            return Some(serde_json::from_str(&t).expect("JSON frame"));
        }
    }
}

async fn ack(ws: &mut Socket, envelope_id: &str) {
    let frame = json!({"envelope_id": envelope_id}).to_string();
    ws.send(Message::Text(frame)).await.expect("ack sent");
}

#[tokio::test]
async fn hello_then_an_unacked_envelope_comes_back_until_acked_once() {
    let fake = start().await;
    fake.set_ack_timeout(Duration::from_millis(300));
    let (mut ws, hello) = connect(&fake).await;
    assert_eq!(hello["type"], "hello");
    assert_eq!(hello["num_connections"], 1);
    assert_eq!(hello["connection_info"]["app_id"], fake.config().app_id);

    let ts = fake.dm("U0ALICE", "hi there");
    let first = next_frame(&mut ws, WAIT).await.expect("an envelope");
    assert_eq!(first["type"], "events_api");
    assert_eq!(first["accepts_response_payload"], false);
    assert_eq!(first["retry_attempt"], 0);
    assert_eq!(first["retry_reason"], "");
    let payload = &first["payload"];
    assert_eq!(payload["type"], "event_callback");
    assert_eq!(payload["team_id"], fake.config().team_id);
    assert!(payload["event_id"].as_str().unwrap().starts_with("Ev"));
    let event = &payload["event"];
    assert_eq!(event["type"], "message");
    assert_eq!(event["channel_type"], "im");
    assert_eq!(event["channel"], fake.dm_channel("U0ALICE"));
    assert_eq!(event["user"], "U0ALICE");
    assert_eq!(event["text"], "hi there");
    assert_eq!(event["ts"], ts.as_str());

    // Not acked: the same envelope and event again, one attempt later.
    let again = next_frame(&mut ws, WAIT).await.expect("a redelivery");
    assert_eq!(again["envelope_id"], first["envelope_id"]);
    assert_eq!(again["payload"]["event_id"], payload["event_id"]);
    assert_eq!(again["retry_attempt"], 1);
    assert_eq!(again["retry_reason"], "timeout");

    let envelope_id = first["envelope_id"].as_str().unwrap();
    ack(&mut ws, envelope_id).await;
    let acks = fake.wait_for_acks(1, WAIT).await;
    assert!(acks[0].known && acks[0].first);
    // Acked: nothing more within several timeouts.
    let more = next_frame(&mut ws, Duration::from_millis(1200)).await;
    assert!(more.is_none(), "acked envelope sent again: {more:?}");
    let view = fake.envelopes();
    assert_eq!(view.len(), 1);
    assert!(view[0].acked && !view[0].given_up);
    assert_eq!(view[0].deliveries, 2);
    assert_eq!(fake.pending_envelopes(), 0);
}

#[tokio::test]
async fn an_envelope_of_a_dropped_socket_comes_back_on_the_next_connection() {
    let fake = start().await;
    fake.set_ack_timeout(Duration::from_millis(400));
    let (mut ws, _) = connect(&fake).await;
    fake.dm("U0BOB", "are you there");
    let first = next_frame(&mut ws, WAIT).await.expect("an envelope");
    drop(ws);
    fake.wait_for("the socket to close", WAIT, |f| {
        (f.live_connections() == 0).then_some(())
    })
    .await;

    let (mut ws, hello) = connect(&fake).await;
    assert_eq!(hello["num_connections"], 1);
    let again = next_frame(&mut ws, WAIT).await.expect("the redelivery");
    assert_eq!(again["envelope_id"], first["envelope_id"]);
    assert_eq!(again["retry_attempt"], 1);
    let conns = fake.connections();
    assert_eq!(conns.len(), 2);
    assert_eq!(conns[0].close.as_deref(), Some("client closed"));
    assert_eq!(fake.deliveries().len(), 2);
}

#[tokio::test]
async fn a_ticket_opens_one_connection_and_disconnect_says_why() {
    let fake = start().await;
    let token = fake.config().app_token.clone();
    let open = call(&fake, "apps.connections.open", Some(&token), json!({})).await;
    let url = open.body["url"].as_str().unwrap().to_string();
    let (_first, _) = tokio_tungstenite::connect_async(url.as_str())
        .await
        .unwrap();
    assert!(
        tokio_tungstenite::connect_async(url.as_str())
            .await
            .is_err(),
        "a used ticket must not connect again"
    );
    let bot = fake.config().bot_token.clone();
    let wrong = call(&fake, "apps.connections.open", Some(&bot), json!({})).await;
    assert_eq!(wrong.body["error"], "not_allowed_token_type");

    let (mut ws, _) = connect(&fake).await;
    fake.disconnect("refresh_requested");
    let bye = next_frame(&mut ws, WAIT).await.expect("disconnect frame");
    assert_eq!(bye["type"], "disconnect");
    assert_eq!(bye["reason"], "refresh_requested");
    let conns = fake
        .wait_for("both sockets closed", WAIT, |f| {
            let c = f.connections();
            c.iter().all(|c| c.closed_at.is_some()).then_some(c)
        })
        .await;
    assert_eq!(conns.len(), 2);
    assert_eq!(
        conns[1].close.as_deref(),
        Some("disconnect: refresh_requested")
    );
}
