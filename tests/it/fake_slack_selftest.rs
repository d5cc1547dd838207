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
    fake.set_ack_timeout(Duration::from_secs(1));
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
    let more = next_frame(&mut ws, Duration::from_millis(2500)).await;
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

/// Reads envelopes until one of `kind` arrives (echoes of other events are skipped).
async fn next_of(ws: &mut Socket, kind: &str, event_type: Option<&str>) -> Value {
    loop {
        let f = next_frame(ws, WAIT).await.expect("an envelope");
        let t = f["payload"]["event"]["type"].as_str();
        if f["type"] == kind && (event_type.is_none() || t == event_type) {
            return f;
        }
    }
}

#[tokio::test]
async fn people_bots_clicks_and_commands_arrive_in_slacks_shapes() {
    let fake = start().await;
    fake.set_ack_timeout(Duration::from_secs(1));
    fake.add_channel("C0GENERAL", "general");
    let (mut ws, _) = connect(&fake).await;

    // A mention in a channel is two events about one message.
    let ts = fake.mention("C0GENERAL", "U0JACK", "help");
    let message = next_of(&mut ws, "events_api", Some("message")).await;
    let mention = next_of(&mut ws, "events_api", Some("app_mention")).await;
    for f in [&message, &mention] {
        assert_eq!(f["payload"]["event"]["ts"], ts.as_str());
        assert_eq!(f["payload"]["event"]["text"], "<@UBOT0001> help");
        ack(&mut ws, f["envelope_id"].as_str().unwrap()).await;
    }
    assert_eq!(message["payload"]["event"]["channel_type"], "channel");
    assert_ne!(
        message["payload"]["event_id"],
        mention["payload"]["event_id"]
    );

    fake.edit_message("C0GENERAL", &ts, "<@UBOT0001> help, please");
    let changed = next_of(&mut ws, "events_api", None).await;
    let e = &changed["payload"]["event"];
    assert_eq!(
        (e["subtype"].as_str(), e["hidden"].as_bool()),
        (Some("message_changed"), Some(true))
    );
    assert_eq!(e["message"]["ts"], ts.as_str());
    assert_eq!(e["message"]["text"], "<@UBOT0001> help, please");
    assert_eq!(e["previous_message"]["text"], "<@UBOT0001> help");
    ack(&mut ws, changed["envelope_id"].as_str().unwrap()).await;

    let other = fake.bot_message("C0GENERAL", "B0OTHER", "beep");
    let bot = next_of(&mut ws, "events_api", None).await;
    assert_eq!(bot["payload"]["event"]["subtype"], "bot_message");
    assert_eq!(bot["payload"]["event"]["bot_id"], "B0OTHER");
    assert_eq!(bot["payload"]["event"]["ts"], other.as_str());
    ack(&mut ws, bot["envelope_id"].as_str().unwrap()).await;

    fake.delete_message("C0GENERAL", &ts);
    let deleted = next_of(&mut ws, "events_api", None).await;
    assert_eq!(deleted["payload"]["event"]["subtype"], "message_deleted");
    assert_eq!(deleted["payload"]["event"]["deleted_ts"], ts.as_str());
    ack(&mut ws, deleted["envelope_id"].as_str().unwrap()).await;

    // A click on the bot's button, and a slash command answered in its ack.
    let token = fake.config().bot_token.clone();
    let blocks = json!([{"type": "actions", "block_id": "b1", "elements": [
        {"type": "button", "action_id": "deny", "value": "no-7", "text": {"type": "plain_text", "text": "Deny"}},
    ]}]);
    let args =
        json!({"channel": "C0GENERAL", "text": "allow?", "blocks": blocks, "thread_ts": other});
    let asked = call(&fake, "chat.postMessage", Some(&token), args).await;
    let asked_ts = asked.body["ts"].as_str().unwrap().to_string();
    fake.click("C0GENERAL", &asked_ts, "U0JACK", "deny", "no-7");
    let click = next_of(&mut ws, "interactive", None).await;
    let p = &click["payload"];
    assert_eq!(p["type"], "block_actions");
    assert_eq!(p["user"]["id"], "U0JACK");
    assert_eq!(p["actions"][0]["action_id"], "deny");
    assert_eq!(p["actions"][0]["value"], "no-7");
    assert_eq!(p["message"]["thread_ts"], other.as_str());
    assert_eq!(p["container"]["message_ts"], asked_ts.as_str());
    fake.slash("/herald", "usage", "U0JACK", "C0GENERAL");
    let slash = next_of(&mut ws, "slash_commands", None).await;
    assert_eq!(slash["accepts_response_payload"], true);
    assert_eq!(slash["payload"]["command"], "/herald");
    assert_eq!(slash["payload"]["text"], "usage");
    assert_eq!(slash["payload"]["user_id"], "U0JACK");
    let reply = json!({"envelope_id": slash["envelope_id"], "payload": {"text": "42 tokens"}});
    ws.send(Message::Text(reply.to_string())).await.unwrap();
    let acks = fake
        .wait_for("the slash ack", WAIT, |f| {
            let a = f.acks();
            a.iter().any(|a| a.payload.is_some()).then_some(a)
        })
        .await;
    assert_eq!(
        acks.last().unwrap().payload,
        Some(json!({"text": "42 tokens"}))
    );

    // The unacked click is not sent again: Slack shows the person an error instead.
    let click_view = fake
        .wait_for("the click to time out", WAIT, |f| {
            let views = f.envelopes();
            views
                .into_iter()
                .find(|v| v.kind == "interactive" && v.given_up)
        })
        .await;
    assert_eq!(click_view.deliveries, 1);
}
