//! Faults while messages flow: the fake model answers 429 with Retry-After, 500, garbage, or
//! hangs past the client timeout, at random, for a third of the calls. Every message must still
//! be answered exactly once — by the model after retries, or by one error line when the retries
//! run out (the inbox row then ends `failed`) — and the failures must show in `/metrics` and in
//! the log, where an operator looks.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use herald_test_support::{fake_llm, promise};

use fake_llm::{FakeLlm, Step};
use promise::census;
use promise::daemon::{herald_bin, Backend, Daemon, Spec};
use promise::load::{self, Channel, LoadSpec, WebChannel};

/// The value of the first metric line that starts with `prefix` and contains every `parts`.
fn metric(text: &str, prefix: &str, parts: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(prefix) && parts.iter().all(|p| l.contains(p)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .reduce(|a, b| a + b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intermittent_model_failures_still_answer_every_message_once() {
    promise::init();
    let llm = FakeLlm::start().await;
    let backend = Backend::from_env().await;
    let spec = Spec::new(&herald_bin(), "faults", &backend, &llm.base_url())
        .set("HERALD_LLM__TIMEOUT_SECS", "1")
        .set("HERALD_LLM__MAX_RETRIES", "1")
        .set("HERALD_LLM__MAX_RETRY_AFTER_SECS", "1");
    let daemon = Daemon::start(&spec, 0).await;
    let web = WebChannel::new(vec![spec.base_url()]);

    // One message that surely runs out of retries: two 500s for its two calls.
    llm.push(Step::Status(500, vec![], "upstream exploded".into()));
    llm.push(Step::Status(500, vec![], "upstream exploded".into()));
    let doomed = web
        .deliver("web:doomed", "doomed-1", "will this fail?")
        .await
        .expect("answered");
    assert_eq!(doomed.status, "failed");
    assert!(
        !doomed.reply.is_empty(),
        "the user gets an error line, not silence"
    );

    llm.set_jitter(Duration::from_millis(50));
    llm.set_random_faults(
        0.35,
        vec![
            Step::Status(
                429,
                vec![("Retry-After".into(), "1".into())],
                r#"{"error":{"message":"slow down"}}"#.into(),
            ),
            Step::Status(500, vec![], "internal error".into()),
            Step::Garbage("<html>bad gateway</html>".into()),
            Step::Hang,
        ],
    );
    let mut sent = load::run(
        web.clone(),
        LoadSpec {
            lanes: 4,
            min_per_lane: 8,
            keep_going: Arc::new(AtomicBool::new(false)),
            lane_prefix: "faulty".into(),
            give_up: Duration::from_secs(60),
        },
    )
    .await;
    sent.push(load::Sent {
        lane: "web:doomed".into(),
        client_id: "doomed-1".into(),
        text: "will this fail?".into(),
        inbox_id: doomed.inbox_id,
        status: doomed.status.clone(),
        reply: doomed.reply.clone(),
        attempts: 1,
        latency_ms: 0.0,
    });
    assert!(census::drain(&backend.url, "web", Duration::from_secs(20)).await);

    let metrics = reqwest::get(format!("{}/metrics", spec.base_url()))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics body");
    let log = std::fs::read_to_string(spec.log_path()).unwrap_or_default();
    drop(daemon);
    let c = census::take(&backend.url, "web", &sent, &[]).await;
    backend.cleanup().await;
    println!("{}", serde_json::to_string_pretty(&c).unwrap());
    c.assert_promise();
    assert!(c.inbox_by_status.get("failed").copied().unwrap_or(0) >= 1);
    assert!(c.inbox_by_status.get("done").copied().unwrap_or(0) >= 1);

    let retries = metric(&metrics, "herald_llm_retries_total", &[]).unwrap_or(0.0);
    assert!(retries >= 1.0, "retries are counted:\n{metrics}");
    let ok = metric(&metrics, "herald_llm_calls_total", &["outcome=\"ok\""]).unwrap_or(0.0);
    assert!(ok >= 1.0, "successful calls are counted:\n{metrics}");
    let transient = metric(
        &metrics,
        "herald_llm_calls_total",
        &["outcome=\"transient\""],
    )
    .unwrap_or(0.0);
    assert!(
        transient >= 1.0,
        "the doomed call is counted as transient:\n{metrics}"
    );
    assert!(
        log.contains("model call failed; retrying"),
        "retries are logged; log:\n{log}"
    );
}
