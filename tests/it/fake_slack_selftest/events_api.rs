//! Events API mode: what the fake POSTs to an app, checked by a capturing server here. The
//! signature is recomputed by hand (HMAC written out below, itself checked against RFC 4231),
//! so a wrong signer in the fake cannot pass by agreeing with itself.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use herald_test_support::fake_slack::{FakeSlack, Route, Signing};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::{start, WAIT};

fn hmac_sha256(key: &[u8], msg: &[u8]) -> Vec<u8> {
    let mut k = if key.len() > 64 {
        Sha256::digest(key).to_vec()
    } else {
        key.to_vec()
    };
    k.resize(64, 0);
    let pad = |x: u8| k.iter().map(|b| b ^ x).collect::<Vec<u8>>();
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(msg)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .to_vec()
}

/// What the app-side server does with the next request.
enum Plan {
    Status(u16),
    Slow(Duration),
    EchoChallenge,
}

#[derive(Clone)]
struct Seen {
    headers: HeaderMap,
    body: String,
}

type Shared = (Arc<Mutex<Vec<Seen>>>, Arc<Mutex<VecDeque<Plan>>>);

async fn app(State((seen, plan)): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let body = String::from_utf8_lossy(&body).into_owned();
    seen.lock().unwrap().push(Seen {
        headers,
        body: body.clone(),
    });
    let next = plan.lock().unwrap().pop_front();
    match next.unwrap_or(Plan::Status(200)) {
        Plan::Status(s) => StatusCode::from_u16(s).unwrap().into_response(),
        Plan::Slow(d) => {
            tokio::time::sleep(d).await;
            StatusCode::OK.into_response()
        }
        Plan::EchoChallenge => {
            let v: Value = serde_json::from_str(&body).unwrap();
            axum::Json(json!({"challenge": v["challenge"]})).into_response()
        }
    }
}

/// A capturing app server; returns its URL and what it saw.
async fn capture(plan: Vec<Plan>) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/slack/events", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let state: Shared = (seen.clone(), Arc::new(Mutex::new(plan.into())));
    let router = Router::new().fallback(app).with_state(state);
    tokio::spawn(async move { axum::serve(listener, router).await });
    (url, seen)
}

async fn wait_seen(fake: &FakeSlack, seen: &Arc<Mutex<Vec<Seen>>>, n: usize) -> Vec<Seen> {
    fake.wait_for(&format!("{n} post(s) to the app"), WAIT, |_| {
        let s = seen.lock().unwrap().clone();
        (s.len() >= n).then_some(s)
    })
    .await
}

fn header(s: &Seen, name: &str) -> Option<String> {
    s.headers.get(name).map(|v| v.to_str().unwrap().to_string())
}

/// The signature the app must compute for this request, by hand.
fn expected(secret: &str, s: &Seen) -> String {
    let ts = header(s, "x-slack-request-timestamp").expect("timestamp header");
    let base = format!("v0:{ts}:{}", s.body);
    format!(
        "v0={}",
        hex::encode(hmac_sha256(secret.as_bytes(), base.as_bytes()))
    )
}

#[test]
fn the_hand_hmac_matches_rfc_4231() {
    let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
    assert_eq!(
        hex::encode(mac),
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
}

#[tokio::test]
async fn an_event_post_is_signed_over_its_exact_bytes() {
    let fake = start().await;
    let (url, seen) = capture(vec![]).await;
    fake.events_target(&url);
    let ts = fake.dm("U0GINA", "signed hello");
    let posts = wait_seen(&fake, &seen, 1).await;
    let p = &posts[0];
    assert_eq!(
        header(p, "content-type").as_deref(),
        Some("application/json")
    );
    let sent_at: i64 = header(p, "x-slack-request-timestamp")
        .unwrap()
        .parse()
        .unwrap();
    assert!((chrono::Utc::now().timestamp() - sent_at).abs() <= 5);
    let secret = fake.config().signing_secret.clone();
    assert_eq!(header(p, "x-slack-signature"), Some(expected(&secret, p)));
    let body: Value = serde_json::from_str(&p.body).unwrap();
    assert_eq!(body["type"], "event_callback");
    assert_eq!(body["event"]["ts"], ts.as_str());
    assert_eq!(body["event"]["text"], "signed hello");
    assert!(header(p, "x-slack-retry-num").is_none());
    assert_eq!(fake.pending_envelopes(), 0, "nothing queues for the socket");
}

#[tokio::test]
async fn a_failed_post_is_retried_with_its_number_and_reason() {
    let fake = start().await;
    fake.set_ack_timeout(Duration::from_secs(1));
    fake.set_http_retry_delays(&[Duration::from_millis(50)]);
    let plan = vec![Plan::Status(500), Plan::Slow(Duration::from_millis(2500))];
    let (url, seen) = capture(plan).await;
    fake.events_target(&url);
    fake.dm("U0HANK", "try again");
    let posts = wait_seen(&fake, &seen, 3).await;
    let ids: Vec<Value> = posts
        .iter()
        .map(|p| serde_json::from_str::<Value>(&p.body).unwrap()["event_id"].clone())
        .collect();
    assert!(ids.iter().all(|i| *i == ids[0]), "one event: {ids:?}");
    let retries: Vec<_> = posts
        .iter()
        .map(|p| {
            (
                header(p, "x-slack-retry-num"),
                header(p, "x-slack-retry-reason"),
            )
        })
        .collect();
    assert_eq!(
        retries,
        [
            (None, None),
            (Some("1".into()), Some("http_error".into())),
            (Some("2".into()), Some("http_timeout".into())),
        ]
    );
    let secret = fake.config().signing_secret.clone();
    assert!(posts
        .iter()
        .all(|p| header(p, "x-slack-signature") == Some(expected(&secret, p))));
    let statuses = fake
        .wait_for("three recorded deliveries", WAIT, |f| {
            let d = f.deliveries();
            (d.len() == 3).then_some(d)
        })
        .await
        .into_iter()
        .map(|d| match d.route {
            Route::Http { status, .. } => status,
            Route::Socket { .. } => panic!("a socket delivery in Events API mode"),
        })
        .collect::<Vec<_>>();
    assert_eq!(statuses, [Some(500), None, Some(200)]);
}

#[tokio::test]
async fn challenge_clicks_and_forged_posts() {
    let fake = start().await;
    let (url, seen) = capture(vec![Plan::EchoChallenge]).await;
    fake.events_target(&url);
    fake.interactive_target(&url);
    let reply = fake.url_verification("3eZbrw1aBm2rZgRNFdxV").await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&reply.body).unwrap()["challenge"],
        "3eZbrw1aBm2rZgRNFdxV"
    );

    let secret = fake.config().signing_secret.clone();
    let event =
        json!({"type": "message", "channel": "D0X", "user": "U0X", "text": "x", "ts": "1.000001"});
    for signing in [
        Signing::Unsigned,
        Signing::Stale { age_secs: 600 },
        Signing::WrongSecret,
        Signing::MissingTimestamp,
    ] {
        fake.post_event_signed(event.clone(), signing).await;
    }
    let posts = wait_seen(&fake, &seen, 5).await;
    assert_eq!(
        header(&posts[0], "x-slack-signature"),
        Some(expected(&secret, &posts[0]))
    );
    assert!(header(&posts[1], "x-slack-signature").is_none());
    let stale: i64 = header(&posts[2], "x-slack-request-timestamp")
        .unwrap()
        .parse()
        .unwrap();
    assert!(chrono::Utc::now().timestamp() - stale >= 600);
    assert_eq!(
        header(&posts[2], "x-slack-signature"),
        Some(expected(&secret, &posts[2]))
    );
    assert_ne!(
        header(&posts[3], "x-slack-signature"),
        Some(expected(&secret, &posts[3]))
    );
    assert!(header(&posts[4], "x-slack-request-timestamp").is_none());
    assert!(header(&posts[4], "x-slack-signature").is_some());

    // A click on the bot's button arrives as a signed form `payload=<json>`.
    let bot = fake.config().bot_token.clone();
    let blocks = json!([{"type": "actions", "block_id": "approval", "elements": [
        {"type": "button", "action_id": "approve", "value": "yes-1", "text": {"type": "plain_text", "text": "Approve"}},
    ]}]);
    let channel = fake.dm_channel("U0IRIS");
    let args = json!({"channel": channel, "text": "run it?", "blocks": blocks});
    let asked = super::call(&fake, "chat.postMessage", Some(&bot), args).await;
    let ts = asked.body["ts"].as_str().unwrap().to_string();
    let buttons = fake.posted()[0].buttons();
    assert_eq!(buttons[0].action_id, "approve");
    fake.click(&channel, &ts, "U0IRIS", "approve", "yes-1");
    let posts = wait_seen(&fake, &seen, 7).await;
    let click = posts
        .iter()
        .find(|p| p.body.starts_with("payload="))
        .expect("the click's post");
    assert_eq!(
        header(click, "content-type").as_deref(),
        Some("application/x-www-form-urlencoded")
    );
    assert_eq!(
        header(click, "x-slack-signature"),
        Some(expected(&secret, click))
    );
    let form: Vec<(String, String)> = url::form_urlencoded::parse(click.body.as_bytes())
        .into_owned()
        .collect();
    let payload: Value = serde_json::from_str(&form[0].1).unwrap();
    assert_eq!(payload["type"], "block_actions");
    assert_eq!(payload["user"]["id"], "U0IRIS");
    assert_eq!(payload["actions"][0]["action_id"], "approve");
    assert_eq!(payload["actions"][0]["value"], "yes-1");
    assert_eq!(payload["actions"][0]["block_id"], "approval");
    assert_eq!(payload["container"]["message_ts"], ts.as_str());
    assert_eq!(payload["channel"]["id"], channel.as_str());
}
