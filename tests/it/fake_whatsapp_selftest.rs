//! The fake WhatsApp Cloud API checked with plain reqwest and a bare axum receiver, not with
//! the adapter: its refusals are Graph's (shape, HTTP status, code), the 24-hour rule holds,
//! media needs the token, and its webhooks are signed over the exact bytes (checked with the
//! RFC 4231-tested HMAC of the Slack fake) and posted again until answered 200.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use herald_test_support::fake_slack::sign::hmac_sha256;
use herald_test_support::fake_whatsapp::{FakeWhatsApp, FakeWhatsAppConfig};
use herald_test_support::harness::wait_for;
use serde_json::{json, Value};

type Posts = Arc<Mutex<Vec<(Option<String>, Vec<u8>)>>>;

/// A receiver that answers 500 to the first POST and 200 after, recording each.
async fn receiver() -> (String, Posts) {
    let posts: Posts = Arc::default();
    let seen = posts.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap, body: Bytes| {
            let seen = seen.clone();
            async move {
                let sig = headers
                    .get("x-hub-signature-256")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                let mut p = seen.lock().unwrap();
                p.push((sig, body.to_vec()));
                if p.len() == 1 {
                    StatusCode::INTERNAL_SERVER_ERROR
                } else {
                    StatusCode::OK
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, posts)
}

#[tokio::test]
async fn webhooks_are_signed_over_their_bytes_and_posted_until_answered() {
    let fake = FakeWhatsApp::start(FakeWhatsAppConfig::default()).await;
    let (url, posts) = receiver().await;
    fake.set_webhook(&url);
    let wamid = fake.text("4915112340001", "hi");
    let got = wait_for("a retried webhook", Duration::from_secs(10), async || {
        let p = posts.lock().unwrap().clone();
        (p.len() >= 2).then_some(p)
    })
    .await;
    assert_eq!(got[0].1, got[1].1, "the same bytes again");
    let secret = fake.config().app_secret.clone();
    let want = format!(
        "sha256={}",
        hex::encode(hmac_sha256(secret.as_bytes(), &got[0].1))
    );
    assert_eq!(got[0].0.as_deref(), Some(want.as_str()));
    let v: Value = serde_json::from_slice(&got[0].1).unwrap();
    assert_eq!(v["object"], "whatsapp_business_account");
    let value = &v["entry"][0]["changes"][0]["value"];
    assert_eq!(v["entry"][0]["changes"][0]["field"], "messages");
    assert_eq!(
        value["metadata"]["phone_number_id"],
        fake.config().phone_number_id
    );
    assert_eq!(value["contacts"][0]["wa_id"], "4915112340001");
    assert_eq!(value["messages"][0]["id"], wamid.as_str());
    assert_eq!(value["messages"][0]["text"]["body"], "hi");
    wait_for("acknowledged", Duration::from_secs(5), async || {
        fake.hooks().iter().all(|h| h.acked).then_some(())
    })
    .await;
}

#[tokio::test]
async fn graph_refuses_as_meta_does_and_media_needs_the_token() {
    let fake = FakeWhatsApp::start(FakeWhatsAppConfig::default()).await;
    let cfg = fake.config().clone();
    let http = reqwest::Client::new();
    let messages = format!("{}/{}/messages", fake.api_url(), cfg.phone_number_id);
    let text = |to: &str| json!({"messaging_product": "whatsapp", "to": to, "type": "text", "text": {"body": "hello"}});
    let send =
        |token: &str, body: Value| http.post(&messages).bearer_auth(token).json(&body).send();
    // No valid token: 401, code 190, Graph's error object.
    let res = send("EAAGwrong", text("4915112340001")).await.unwrap();
    assert_eq!(res.status().as_u16(), 401);
    let e: Value = res.json().await.unwrap();
    assert_eq!(e["error"]["code"], 190);
    assert_eq!(e["error"]["type"], "OAuthException");
    assert!(e["error"]["fbtrace_id"].is_string());
    // Never wrote: outside the 24-hour window.
    let res = send(&cfg.access_token, text("4915112340001"))
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 400);
    let e: Value = res.json().await.unwrap();
    assert_eq!(e["error"]["code"], 131047);
    // Wrote just now: taken.
    fake.set_last_inbound("4915112340001", Some(0));
    let ok: Value = send(&cfg.access_token, text("4915112340001"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        ok["messages"][0]["id"]
            .as_str()
            .unwrap()
            .starts_with("wamid."),
        "{ok}"
    );
    // Throughput: 429, code 130429, Retry-After.
    fake.rate_limit_next(2);
    let res = send(&cfg.access_token, text("4915112340001"))
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 429);
    assert_eq!(res.headers()["retry-after"], "2");
    let e: Value = res.json().await.unwrap();
    assert_eq!(e["error"]["code"], 130429);
    // An upload, its URL, and the bytes only with the token.
    let form = reqwest::multipart::Form::new()
        .text("messaging_product", "whatsapp")
        .text("type", "text/plain")
        .part(
            "file",
            reqwest::multipart::Part::bytes(b"abc".to_vec()).file_name("a.txt"),
        );
    let up: Value = http
        .post(format!("{}/{}/media", fake.api_url(), cfg.phone_number_id))
        .bearer_auth(&cfg.access_token)
        .multipart(form)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = up["id"].as_str().unwrap();
    let meta: Value = http
        .get(format!("{}/{id}", fake.api_url()))
        .bearer_auth(&cfg.access_token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let url = meta["url"].as_str().unwrap();
    assert_eq!(meta["mime_type"], "text/plain");
    assert_eq!(http.get(url).send().await.unwrap().status().as_u16(), 401);
    let bytes = http
        .get(url)
        .bearer_auth(&cfg.access_token)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(&bytes[..], b"abc");
}
