//! What an operator's log collector receives: the real `herald` binary with `log.format = "json"`
//! at debug level runs a scripted conversation with every kind of secret configured (model API
//! key, web token, Telegram and Discord bot tokens), including a provider that quotes the key
//! back in an error and a client that presents a wrong token. None of the secrets may appear
//! anywhere in the output, and the turn-finished line carries the fields a log query needs.

use std::time::Duration;

use herald_test_support::fake_discord::FakeDiscord;
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::fake_telegram::FakeTelegram;
use herald_test_support::harness::init;
use herald_test_support::herald::Herald;
use serde_json::{json, Value};

const API_KEY: &str = "sk-test-4f1c9a0b7e2d45c8a1b3";
const WEB_TOKEN: &str = "web-token-9d8c7b6a5f4e3d2c";
const TG_TOKEN: &str = "123456789:AAH-fakeTelegramTokenZZ0042";
const DC_TOKEN: &str = "MTIzNDU2Nzg5.fakeDiscord.TokenQQ77";

async fn chat(base: &str, token: &str, lane: &str, text: &str) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{base}/api/v1/chat"))
        .bearer_auth(token)
        .json(&json!({"lane": lane, "text": text, "sender": "tester"}))
        .timeout(Duration::from_secs(60))
        .send()
        .await
        .expect("chat request");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// A field of a JSON log line, looked up on the event and then on its spans (innermost first).
fn field<'a>(line: &'a Value, key: &str) -> Option<&'a Value> {
    if let Some(v) = line.get(key) {
        return Some(v);
    }
    if let Some(v) = line.get("span").and_then(|s| s.get(key)) {
        return Some(v);
    }
    line.get("spans")?
        .as_array()?
        .iter()
        .rev()
        .find_map(|s| s.get(key))
}

#[tokio::test]
async fn json_logs_of_a_full_run_carry_turn_fields_and_never_a_secret() {
    init();
    let llm = FakeLlm::start().await;
    let telegram = FakeTelegram::start(TG_TOKEN).await;
    let discord = FakeDiscord::start(DC_TOKEN).await;
    let data = tempfile::tempdir().unwrap();
    let log_path = data.path().join("herald.log");
    let mut child = Herald::serve_anywhere(data.path())
        .fake_model(&llm.base_url())
        .env("HERALD_LLM__MAX_RETRIES", "0")
        .env("OPENAI_API_KEY", API_KEY)
        .env("HERALD_WEB__TOKEN", WEB_TOKEN)
        .env("TELEGRAM_BOT_TOKEN", TG_TOKEN)
        .env("HERALD_TELEGRAM__API_URL", telegram.url())
        .env("DISCORD_BOT_TOKEN", DC_TOKEN)
        .env("HERALD_DISCORD__API_URL", discord.api_url())
        .env("HERALD_DISCORD__RATELIMITER", "false")
        .env("HERALD_LOG__FORMAT", "json")
        .env("HERALD_LOG__LEVEL", "debug")
        .log_to(&log_path)
        .spawn();
    child.wait_ready(Duration::from_secs(30)).await;
    let base = child.base_url();

    let (status, _) = chat(&base, "not-the-token", "web:ops", "let me in").await;
    assert_eq!(status, 401);
    let (status, body) = chat(&base, WEB_TOKEN, "web:ops", "hello").await;
    assert_eq!(
        (status, body["reply"].as_str()),
        (200, Some("reply to: hello"))
    );
    llm.push(Step::Status(
        401,
        vec![],
        format!(r#"{{"error":{{"message":"Incorrect API key provided: {API_KEY}"}}}}"#),
    ));
    let (status, body) = chat(&base, WEB_TOKEN, "web:ops", "second").await;
    assert_eq!(status, 200);
    let reply = body["reply"].as_str().unwrap_or_default().to_string();
    assert!(reply.contains("refused"), "{body}");
    assert!(!reply.contains(API_KEY));
    // A proxy that answers 200 with an HTML page echoing the request headers: the body is not a
    // completion, and its excerpt (log line, inbox note) must not carry the key either.
    llm.push(Step::Garbage(format!(
        "<html><pre>POST /v1/chat/completions\nAuthorization: Bearer {API_KEY}\n</pre></html>"
    )));
    let (status, body) = chat(&base, WEB_TOKEN, "web:ops", "third").await;
    assert_eq!(status, 200);
    assert!(!body.to_string().contains(API_KEY), "{body}");

    // SIGTERM: the shutdown path logs too.
    child.terminate();
    child.wait_exit(Duration::from_secs(30)).await;
    let out = std::fs::read_to_string(&log_path).unwrap();
    // The Telegram adapter really used its token during the run.
    assert!(
        !telegram.calls("getUpdates").is_empty(),
        "the poller never ran"
    );

    // Nor the database: every file of the data dir (database, WAL) is read as bytes.
    for entry in std::fs::read_dir(data.path()).unwrap() {
        let path = entry.unwrap().path();
        if path == log_path || !path.is_file() {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let found = bytes
            .windows(API_KEY.len())
            .any(|w| w == API_KEY.as_bytes());
        assert!(!found, "llm.api_key is stored in {}", path.display());
    }

    for (name, secret) in [
        ("llm.api_key", API_KEY),
        ("web.token", WEB_TOKEN),
        ("telegram.token", TG_TOKEN),
        ("discord.token", DC_TOKEN),
    ] {
        if let Some(at) = out.find(secret) {
            let line = out[..at].rsplit('\n').next().unwrap_or_default();
            panic!("{name} leaked into the log, in the line starting: {line}");
        }
        // The secret's distinctive middle part must not show either (a half-masked key is
        // still a key).
        let middle = &secret[secret.len() / 3..secret.len() * 2 / 3];
        assert!(!out.contains(middle), "part of {name} leaked into the log");
    }

    let lines: Vec<Value> = out
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(lines.len() > 5, "the run logged almost nothing:\n{out}");
    let finished: Vec<&Value> = lines
        .iter()
        .filter(|l| l["message"] == "turn finished")
        .collect();
    assert_eq!(finished.len(), 3, "one line per turn:\n{out}");
    let statuses: Vec<&str> = finished
        .iter()
        .map(|l| field(l, "status").and_then(Value::as_str).unwrap_or("-"))
        .collect();
    assert_eq!(statuses, ["done", "failed", "failed"]);
    for l in &finished {
        assert_eq!(field(l, "lane"), Some(&json!("web:ops")), "{l}");
        assert_eq!(field(l, "platform"), Some(&json!("web")), "{l}");
        assert!(
            field(l, "session")
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty()),
            "{l}"
        );
        assert!(
            field(l, "turn").is_some_and(|t| t.as_i64().is_some() || t.as_str().is_some()),
            "{l}"
        );
        assert!(l["level"] == "INFO" && l["timestamp"].is_string(), "{l}");
    }
    let failed = lines
        .iter()
        .find(|l| l["message"] == "turn failed; the user gets an error line")
        .expect("the failed turn is logged with its error");
    assert!(
        failed["error"]
            .as_str()
            .unwrap_or_default()
            .contains("Incorrect API key provided: ***"),
        "{failed}"
    );
    telegram.shutdown().await;
}

/// journald, a log file or a shipper reading a pipe get plain human lines: no colour codes
/// unless the output is a terminal.
#[tokio::test]
async fn human_logs_through_a_pipe_carry_no_colour_codes() {
    let data = tempfile::tempdir().unwrap();
    let log_path = data.path().join("herald.log");
    let mut child = Herald::serve(0, data.path()).log_to(&log_path).spawn();
    let out = child
        .wait_log("herald is ready", Duration::from_secs(30))
        .await;
    child.kill();
    assert!(out.contains(" INFO "), "human format: {out}");
    assert!(
        !out.contains('\u{1b}'),
        "colour codes in a piped log: {out:?}"
    );
}
