//! The fake signal-cli daemon, proven with plain reqwest: JSON-RPC answers and errors with
//! signal-cli's codes (HTTP 200 with the error in the body, 415 without a JSON content type),
//! the event stream's framing, an envelope waiting for a stream, a file read from its path,
//! `getAttachment`, edits applied to what a person sees, and a rate limit as signal-cli reports
//! it.

use std::time::Duration;

use futures::StreamExt;
use herald_test_support::fake_signal::{FakeSignal, File, Person};
use serde_json::{json, Value};

async fn rpc(fake: &FakeSignal, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "method": method, "params": params, "id": "t1"});
    let res = reqwest::Client::new()
        .post(format!("{}/api/v1/rpc", fake.url()))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "signal-cli answers errors with 200 too");
    res.json().await.unwrap()
}

#[tokio::test]
async fn calls_answer_as_signal_cli_does() {
    let fake = FakeSignal::start().await;
    let alice = Person::new("+15550100001", "Alice");
    let sent = rpc(
        &fake,
        "send",
        json!({"recipient": [alice.number], "message": "hi"}),
    )
    .await;
    let ts = sent["result"]["timestamp"].as_u64().expect("a timestamp");
    assert_eq!(sent["id"], "t1");
    assert_eq!(sent["result"]["results"][0]["type"], "SUCCESS");
    let edit = json!({"recipient": alice.number, "message": "hi there", "editTimestamp": ts});
    rpc(&fake, "send", edit).await;
    let view = fake.view(&alice.number);
    assert_eq!(view.len(), 1);
    assert_eq!(view[0].1, "hi there", "the edit replaced the text");

    let empty = rpc(
        &fake,
        "send",
        json!({"recipient": alice.number, "message": ""}),
    )
    .await;
    assert_eq!(empty["error"]["code"], -1);
    let no_author = json!({"recipient": alice.number, "message": "x", "quoteTimestamp": ts});
    let res = rpc(&fake, "send", no_author).await;
    assert_eq!(res["error"]["message"], "Quote author parameter is missing");
    let unknown = rpc(&fake, "nope", json!({})).await;
    assert_eq!(unknown["error"]["code"], -32601);
    let missing =
        json!({"recipient": alice.number, "message": "", "attachments": ["/nonexistent/x.png"]});
    assert_eq!(rpc(&fake, "send", missing).await["error"]["code"], -32603);
    let version = rpc(&fake, "version", json!({})).await;
    assert!(version["result"]["version"].is_string());

    fake.rate_limit_next_send(7);
    let limited = rpc(
        &fake,
        "send",
        json!({"recipient": alice.number, "message": "x"}),
    )
    .await;
    assert_eq!(limited["error"]["code"], -5);
    let result = &limited["error"]["data"]["response"]["results"][0];
    assert_eq!(result["type"], "RATE_LIMIT_FAILURE");
    assert_eq!(result["retryAfterSeconds"], 7);
    assert_eq!(fake.sent().len(), 2, "nothing sent when refused");

    let plain = reqwest::Client::new()
        .post(format!("{}/api/v1/rpc", fake.url()))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), 415);
}

#[tokio::test]
async fn files_go_out_by_path_and_come_in_by_id() {
    let fake = FakeSignal::start().await;
    let alice = Person::new("+15550100001", "Alice");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chart.png");
    std::fs::write(&path, b"PNGDATA").unwrap();
    let params = json!({"recipient": alice.number, "message": "", "attachments": [path]});
    rpc(&fake, "send", params).await;
    let files = &fake.view(&alice.number)[0].2;
    assert_eq!(
        (files[0].name.as_str(), files[0].bytes.as_slice()),
        ("chart.png", &b"PNGDATA"[..])
    );

    let file = File {
        name: "notes.md",
        mime: "text/markdown",
        bytes: b"# Plan",
    };
    fake.file_message(None, &alice, "", file);
    let stream = reqwest::get(format!("{}/api/v1/events", fake.url()))
        .await
        .unwrap();
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    let mut body = stream.bytes_stream();
    let chunk = tokio::time::timeout(Duration::from_secs(5), body.next())
        .await
        .expect("the waiting envelope")
        .unwrap()
        .unwrap();
    let text = String::from_utf8(chunk.to_vec()).unwrap();
    assert!(text.starts_with("event:receive\ndata:{"), "{text}");
    let data: Value =
        serde_json::from_str(text.lines().nth(1).unwrap().trim_start_matches("data:")).unwrap();
    assert_eq!(data["account"], fake.bot().number);
    let att = &data["envelope"]["dataMessage"]["attachments"][0];
    assert_eq!(att["filename"], "notes.md");
    let id = att["id"].as_str().unwrap();
    let got = rpc(
        &fake,
        "getAttachment",
        json!({"id": id, "recipient": alice.number}),
    )
    .await;
    assert_eq!(got["result"]["data"], "IyBQbGFu", "base64 of the bytes");
    let none = rpc(
        &fake,
        "getAttachment",
        json!({"id": "nope", "recipient": alice.number}),
    )
    .await;
    assert_eq!(none["error"]["code"], -1);

    fake.drop_streams();
    let end = tokio::time::timeout(Duration::from_secs(5), body.next())
        .await
        .expect("the stream ends");
    assert!(end.is_none(), "a dropped stream ends");
}
