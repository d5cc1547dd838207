//! Slow request bodies against the real binary and the in-process core: a flood of uploads
//! with one valid API key, a byte every 2 s, must never make `/healthz` fail; a key (and a web
//! caller) over its limit of requests in flight is told 429 with `Retry-After`; a body slower
//! than `server.body_timeout_secs` is answered 408.
//!
//! Once, 1,100 such uploads made every route time out for as long as they lasted: a request
//! waiting for its body counted as in flight, was never evicted, and no limit applied per key.

use std::sync::Mutex;
use std::time::Duration;

use herald_test_support::fake_llm::FakeLlm;
use herald_test_support::harness::{free_port, init, start_api, wait_until};
use herald_test_support::herald::{write_config, Herald};
use herald_test_support::slow_body::{probe_health, Flood};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const KEY: &str = "sk-herald-flood-0123456789";
const CAP: usize = 48;
const SLOW_CLIENTS: usize = 240;
const BYTE_EVERY: Duration = Duration::from_secs(2);
/// Enough probes that a starved `/healthz` cannot go unnoticed.
const PROBES: usize = 120;

/// The sum of a metric's samples whose line starts with `prefix` (a name, or a name and its
/// labels).
fn metric(text: &str, prefix: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The listener alone must hold: the key's limit is raised out of the way, so every upload
/// is admitted and waits for its body; at the cap they are evicted, and probes have their own
/// slots. Every probe answers 200 within the client's timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_body_flood_with_a_valid_key_never_starves_health() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let port = free_port();
    let extra = format!(
        "[api]\nenabled = true\nmax_concurrent_per_key = 100000\n\n\
         [[api.keys]]\nname = \"flood\"\nkey = \"{KEY}\"\nperson = \"ana\"\n\n\
         [[people]]\nname = \"ana\"\nids = []\n"
    );
    let config = write_config(
        data.path(),
        &format!("127.0.0.1:{port}"),
        &llm.base_url(),
        &extra,
    );
    let mut daemon = Herald::serve_config(&config, port)
        .fake_model(&llm.base_url())
        .env("HERALD_SERVER__MAX_CONNECTIONS", CAP.to_string())
        .log_to(&data.path().join("herald.log"))
        .spawn();
    daemon.wait_healthy(Duration::from_secs(30)).await;
    let (addr, base) = (daemon.addr(), daemon.base_url());

    let flood = Flood::new();
    let clients: Vec<_> = (0..SLOW_CLIENTS)
        .map(|_| tokio::spawn(flood.clone().client(addr.clone(), KEY.into(), BYTE_EVERY)))
        .collect();
    // The flood fills the cap and slow bodies get evicted for newcomers.
    let http = reqwest::Client::new();
    let scrape = || async {
        http.get(format!("{base}/metrics"))
            .send()
            .await
            .expect("the scrape answers during the flood")
            .text()
            .await
            .unwrap()
    };
    wait_until(
        "the flood fills the cap",
        Duration::from_secs(60),
        || async {
            let m = scrape().await;
            metric(&m, "herald_http_connections_at_cap_total") >= 1.0
                && metric(
                    &m,
                    "herald_http_connections_closed_total{reason=\"evicted\"}",
                ) >= 1.0
        },
    )
    .await;
    // The prober has its own thread and runtime: what it measures is the server, not this
    // process's own flood tasks.
    let probe_base = base.clone();
    let probes = tokio::task::spawn_blocking(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(probe_health(
                &probe_base,
                PROBES,
                Duration::from_millis(50),
                Duration::from_secs(10),
            ))
    })
    .await
    .unwrap();
    let m = scrape().await;
    let open = metric(&m, "herald_http_connections ");
    assert!(
        open as usize <= CAP + herald::http::serve::PROBE_SLOTS,
        "{open} connections open, cap {CAP}"
    );
    flood.stop();
    for c in clients {
        c.await.unwrap();
    }
    let failed: Vec<_> = probes.iter().filter(|p| p.result != Ok(200)).collect();
    assert!(
        failed.is_empty(),
        "{} of {} probes failed: {:?}",
        failed.len(),
        probes.len(),
        &failed[..failed.len().min(5)]
    );
    let answers = flood.answers();
    assert!(
        answers.count(0) >= 1,
        "some uploads were closed for newcomers: {answers:?}"
    );
    let mut ms: Vec<f64> = probes
        .iter()
        .map(|p| p.took.as_secs_f64() * 1000.0)
        .collect();
    ms.sort_by(f64::total_cmp);
    eprintln!(
        "{SLOW_CLIENTS} slow uploads against a cap of {CAP}: {} probes all 200, p50 {:.1} ms, \
         max {:.1} ms; uploads: {answers:?}",
        probes.len(),
        herald_test_support::slow_body::quantile(&ms, 0.5),
        ms[ms.len() - 1],
    );
    daemon.kill();
}

/// A raw connection that sent a request head announcing a body it has not sent.
async fn slow_upload(addr: &str, path: &str, auth: Option<&str>) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let auth = auth
        .map(|a| format!("Authorization: Bearer {a}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\n\
         Content-Length: 1000\r\n\r\n{{"
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s
}

/// Everything the server sends until it closes: (status, headers in lower case, body JSON).
async fn read_answer(s: &mut TcpStream) -> (u16, String, Value) {
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut raw))
        .await
        .expect("the server answers and closes")
        .unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (
        status,
        head.to_ascii_lowercase(),
        serde_json::from_str(body.trim()).unwrap_or(Value::Null),
    )
}

/// A key with two uploads in flight is refused a third (429 in OpenAI's shape, with
/// `Retry-After`), before its body is read; the two are answered 408 when their bodies miss
/// the deadline, and the key may send again.
#[tokio::test]
async fn a_key_over_its_limit_gets_429_and_a_slow_body_gets_408() {
    let (_llm, app, _data) = start_api(KEY, |c| {
        c.api.max_concurrent_per_key = 2;
        c.server.body_timeout_secs = 2;
    })
    .await;
    let addr = app.addr.to_string();
    let path = "/v1/chat/completions";
    let mut held = vec![
        slow_upload(&addr, path, Some(KEY)).await,
        slow_upload(&addr, path, Some(KEY)).await,
    ];
    // A third request of the key (a complete one) while both wait for their bodies.
    let http = reqwest::Client::new();
    let third = || async {
        http.post(format!("http://{addr}{path}"))
            .bearer_auth(KEY)
            .body("{}")
            .send()
            .await
            .unwrap()
    };
    let refused = &Mutex::new(None);
    wait_until(
        "the third request is refused",
        Duration::from_secs(10),
        || async {
            let r = third().await;
            if r.status() == 429 {
                let after = r.headers().get("retry-after").cloned();
                *refused.lock().unwrap() = Some((after, r.json::<Value>().await.unwrap()));
                return true;
            }
            false
        },
    )
    .await;
    let (after, body) = refused.lock().unwrap().take().unwrap();
    assert_eq!(after.as_ref().and_then(|v| v.to_str().ok()), Some("1"));
    assert_eq!(body["error"]["code"], "rate_limit_exceeded", "{body}");
    assert_eq!(body["error"]["type"], "rate_limit_error", "{body}");

    for s in &mut held {
        let (status, head, body) = read_answer(s).await;
        assert_eq!(status, 408, "{head}");
        assert!(head.contains("connection: close"), "{head}");
        assert_eq!(body["error"]["code"], "request_timeout", "{body}");
    }
    // Both are over: the key's budget is back (the empty request is a 400, not a 429).
    wait_until(
        "the key may send again",
        Duration::from_secs(10),
        || async { third().await.status() == 400 },
    )
    .await;
    app.shutdown().await;
}

/// The web API has the same limit per caller (here the trusted local operator): a third
/// request while two uploads wait is refused 429 with `Retry-After`; health is not limited.
#[tokio::test]
async fn a_web_caller_over_its_limit_gets_429() {
    let (_llm, app, _data) = start_api(KEY, |c| {
        c.web.max_concurrent_requests = 2;
        c.server.body_timeout_secs = 60;
    })
    .await;
    let addr = app.addr.to_string();
    let _held = [
        slow_upload(&addr, "/api/v1/chat", None).await,
        slow_upload(&addr, "/api/v1/chat", None).await,
    ];
    let http = reqwest::Client::new();
    let refused = &Mutex::new(None);
    wait_until(
        "a third request is refused",
        Duration::from_secs(10),
        || async {
            let r = http
                .get(format!("http://{addr}/api/v1/lanes/web:x/messages"))
                .send()
                .await
                .unwrap();
            if r.status() == 429 {
                let after = r.headers().get("retry-after").cloned();
                *refused.lock().unwrap() = Some((after, r.json::<Value>().await.unwrap()));
                return true;
            }
            false
        },
    )
    .await;
    let (after, body) = refused.lock().unwrap().take().unwrap();
    assert_eq!(after.as_ref().and_then(|v| v.to_str().ok()), Some("1"));
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|e| e.contains("web.max_concurrent_requests")),
        "{body}"
    );
    let health = http
        .get(format!("http://{addr}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    app.shutdown().await;
}
