//! Inbound webhooks (`[[hooks]]`) through the real core: signed deliveries from a GitHub-style
//! sender, a monitor and a form service, delivered to a person on the fake Telegram. What is
//! asserted is what the person receives, what the fake model was asked, and what the store
//! holds (nothing at all for a refused delivery).

use std::time::Duration;

use herald::app::App;
use herald::config::{Config, FilterRule, HookMode, HookSpec, Secret, SignatureKind};
use herald::store::FireStatus;
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::fake_telegram::FakeTelegram;
use herald_test_support::harness::{quiet, wait_until, Client};
use herald_test_support::telegram::{fakes, tg_config, USER};
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

const SECRET: &str = "a-webhook-secret-of-some-length";

fn hook(name: &str, signature: SignatureKind, mode: HookMode, prompt: &str) -> HookSpec {
    HookSpec {
        name: name.into(),
        secret: Some(Secret::new(SECRET)),
        secret_env: None,
        signature,
        mode,
        prompt: prompt.into(),
        deliver: vec![format!("telegram:{USER}")],
        budget: None,
        filter: Vec::new(),
        max_body_bytes: 256 * 1024,
        rate_per_min: 60,
    }
}

/// GitHub's failed-workflow hook: only `workflow_run` events that concluded in failure.
fn ci_hook() -> HookSpec {
    let mut h = hook(
        "ci",
        SignatureKind::Github,
        HookMode::Agent,
        "CI run {{payload.workflow_run.name}} on {{payload.workflow_run.head_branch}} failed. \
         Tell me what broke, in two lines.",
    );
    h.filter = vec![
        FilterRule {
            header: Some("X-GitHub-Event".into()),
            equals: Some("workflow_run".into()),
            ..FilterRule::default()
        },
        FilterRule {
            path: Some("workflow_run.conclusion".into()),
            one_of: Some(vec!["failure".into(), "timed_out".into()]),
            ..FilterRule::default()
        },
    ];
    h
}

fn hmac_hex(body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

async fn start(
    tg: &FakeTelegram,
    llm: &FakeLlm,
    data: &tempfile::TempDir,
    hooks: Vec<HookSpec>,
) -> App {
    let mut c: Config = tg_config(tg, llm, data);
    c.hooks = hooks;
    herald::config::validate(&c).expect("valid config");
    App::start(c).await.expect("app starts")
}

fn run(conclusion: &str) -> Value {
    json!({
        "action": "completed",
        "workflow_run": {"name": "tests", "head_branch": "main", "conclusion": conclusion},
        "repository": {"full_name": "acme/herald"}
    })
}

/// Posts `body` to `/hooks/<name>` with `headers`; returns (status, JSON answer).
async fn post(app: &App, name: &str, body: &[u8], headers: &[(&str, String)]) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .post(format!("http://{}/hooks/{name}", app.addr))
        .header("content-type", "application/json")
        .body(body.to_vec());
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

type Headers = Vec<(&'static str, String)>;

fn github(body: &[u8], delivery: &str, event: &str) -> Headers {
    vec![
        ("x-hub-signature-256", format!("sha256={}", hmac_hex(body))),
        ("x-github-delivery", delivery.to_string()),
        ("x-github-event", event.to_string()),
    ]
}

/// What the person on Telegram received, in order.
fn received(tg: &FakeTelegram) -> Vec<String> {
    tg.sent_messages().into_iter().map(|m| m.text).collect()
}

async fn hook_log(app: &App, config_hooks: &[HookSpec], name: &str) -> String {
    let c = Config {
        hooks: config_hooks.to_vec(),
        ..Config::default()
    };
    herald::cli::hooks::log(app.store.as_ref(), &c, Some(name), 20)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_signed_github_delivery_runs_once_and_its_redelivery_runs_nothing() {
    let (tg, llm, data) = fakes().await;
    llm.push(Step::Reply(
        "The tests job on main broke: a flaky timeout.".into(),
    ));
    let hooks = vec![ci_hook()];
    let app = start(&tg, &llm, &data, hooks.clone()).await;
    let body = serde_json::to_vec(&run("failure")).unwrap();

    let (status, answer) = post(&app, "ci", &body, &github(&body, "d-100", "workflow_run")).await;
    assert_eq!(status, 202, "{answer}");
    assert_eq!(answer["delivery"], "d-100");
    wait_until(
        "the brief reaches the person",
        Duration::from_secs(10),
        || async { !received(&tg).is_empty() },
    )
    .await;
    quiet(app.store.as_ref()).await;

    // GitHub redelivers (a timeout on its side, or the operator's "Redeliver" button).
    let (status, answer) = post(&app, "ci", &body, &github(&body, "d-100", "workflow_run")).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["status"], "duplicate");
    quiet(app.store.as_ref()).await;
    assert_eq!(
        received(&tg),
        ["The tests job on main broke: a flaky timeout."],
        "one brief, once"
    );
    assert_eq!(
        llm.request_count(),
        1,
        "the redelivery asked the model nothing"
    );

    // The model got the rendered prompt, then the payload fenced as untrusted data.
    let asked = llm.last_request().last_user();
    assert!(
        asked.starts_with("CI run tests on main failed. Tell me what broke"),
        "{asked}"
    );
    assert!(asked.contains("untrusted data"), "{asked}");
    assert!(asked.contains("\"full_name\": \"acme/herald\""), "{asked}");

    // The brief is in the person's conversation, so they can ask about it.
    let lane = format!("telegram:{USER}");
    let transcript = Client::new(&app).transcript(&lane).await;
    assert!(
        transcript
            .iter()
            .any(|(role, text)| role == "assistant" && text.contains("flaky timeout")),
        "{transcript:?}"
    );

    // `herald hooks log` shows the one run, finished, delivered.
    wait_until(
        "the run is logged as ok",
        Duration::from_secs(15),
        || async {
            let fires = app.store.cron_fires(Some("hook:ci"), 10).await.unwrap();
            fires.len() == 1 && fires[0].status == FireStatus::Ok
        },
    )
    .await;
    let log = hook_log(&app, &hooks, "ci").await;
    assert!(log.contains("hook:ci"), "{log}");
    assert!(log.contains("delivery d-100"), "{log}");
    assert!(log.contains(&format!("delivered to {lane}")), "{log}");
    assert_eq!(log.lines().count(), 1, "{log}");
    app.shutdown().await;
}

#[tokio::test]
async fn the_filter_drops_noise_before_anything_is_written() {
    let (tg, llm, data) = fakes().await;
    let app = start(&tg, &llm, &data, vec![ci_hook()]).await;
    // A green run, and a push event: both signed, both noise.
    let green = serde_json::to_vec(&run("success")).unwrap();
    let (status, answer) = post(&app, "ci", &green, &github(&green, "d-1", "workflow_run")).await;
    assert_eq!((status, answer["status"].as_str()), (200, Some("filtered")));
    let red = serde_json::to_vec(&run("failure")).unwrap();
    let (status, answer) = post(&app, "ci", &red, &github(&red, "d-2", "push")).await;
    assert_eq!((status, answer["status"].as_str()), (200, Some("filtered")));
    quiet(app.store.as_ref()).await;
    assert!(app.store.lanes_overview(10).await.unwrap().is_empty());
    assert_eq!(llm.request_count(), 0);
    assert!(received(&tg).is_empty());
    app.shutdown().await;
}

#[tokio::test]
async fn refused_deliveries_leave_no_trace() {
    let (tg, llm, data) = fakes().await;
    let mut small = hook("small", SignatureKind::HmacSha256, HookMode::Notify, "x");
    small.max_body_bytes = 64;
    let app = start(&tg, &llm, &data, vec![ci_hook(), small]).await;
    let body = serde_json::to_vec(&run("failure")).unwrap();
    let mut forged = github(&body, "d-1", "workflow_run");
    forged[0].1 = format!("sha256={}", "0".repeat(64));
    let no_sig: Vec<_> = github(&body, "d-2", "workflow_run")
        .into_iter()
        .skip(1)
        .collect();
    // Signed for another body: a replayed signature on a changed payload.
    let replayed = github(b"{}", "d-3", "workflow_run");
    let big = vec![b' '; 65];
    let big_sig = vec![("x-signature-256", hmac_hex(&big))];
    let cases: Vec<(&str, &[u8], Headers, u16)> = vec![
        ("ci", &body, forged, 401),
        ("ci", &body, no_sig, 401),
        ("ci", &body, replayed, 401),
        ("nope", &body, github(&body, "d-4", "workflow_run"), 404),
        ("small", &big, big_sig, 413),
    ];
    for (name, body, headers, want) in cases {
        let (status, answer) = post(&app, name, body, &headers).await;
        assert_eq!(status, want, "{name}: {answer}");
        assert!(!answer.to_string().contains(SECRET));
    }
    quiet(app.store.as_ref()).await;
    assert!(app.store.lanes_overview(10).await.unwrap().is_empty());
    assert!(app.store.cron_fires(None, 10).await.unwrap().is_empty());
    assert_eq!(llm.request_count(), 0);
    assert!(received(&tg).is_empty());
    app.shutdown().await;
}

#[tokio::test]
async fn notify_delivers_the_rendered_text_without_asking_the_model() {
    let (tg, llm, data) = fakes().await;
    let alert = hook(
        "alerts",
        SignatureKind::HmacSha256,
        HookMode::Notify,
        "[{{payload.status}}] {{payload.alerts.0.labels.alertname}}: {{payload.alerts.0.annotations.summary}}",
    );
    let hooks = vec![alert];
    let app = start(&tg, &llm, &data, hooks.clone()).await;
    let body = serde_json::to_vec(&json!({
        "status": "firing",
        "alerts": [{"labels": {"alertname": "DiskFull"},
                    "annotations": {"summary": "/var is 97% full on db-1"}}]
    }))
    .unwrap();
    let (status, answer) = post(
        &app,
        "alerts",
        &body,
        &[("x-signature-256", hmac_hex(&body))],
    )
    .await;
    assert_eq!(status, 202, "{answer}");
    assert!(answer["delivery"].as_str().unwrap().starts_with("body-"));
    wait_until(
        "the alert reaches the person",
        Duration::from_secs(10),
        || async { !received(&tg).is_empty() },
    )
    .await;
    quiet(app.store.as_ref()).await;
    // The same body again, with no delivery id: its hash is the id, so it is the same delivery.
    let (status, _) = post(
        &app,
        "alerts",
        &body,
        &[("x-signature-256", hmac_hex(&body))],
    )
    .await;
    assert_eq!(status, 200);
    quiet(app.store.as_ref()).await;
    assert_eq!(
        received(&tg),
        ["[firing] DiskFull: /var is 97% full on db-1"]
    );
    assert_eq!(llm.request_count(), 0, "notify never asks the model");
    wait_until(
        "the run is logged as ok",
        Duration::from_secs(15),
        || async {
            let fires = app.store.cron_fires(Some("hook:alerts"), 10).await.unwrap();
            fires.len() == 1 && fires[0].status == FireStatus::Ok
        },
    )
    .await;
    app.shutdown().await;
}

#[tokio::test]
async fn a_bearer_hook_admits_its_token_and_refuses_past_its_rate() {
    let (tg, llm, data) = fakes().await;
    let mut form = hook(
        "form",
        SignatureKind::Bearer,
        HookMode::Notify,
        "New form entry from {{payload.name}}",
    );
    form.rate_per_min = 2;
    let app = start(&tg, &llm, &data, vec![form]).await;
    let bearer = |key: &str| {
        vec![
            ("authorization", format!("Bearer {SECRET}")),
            ("idempotency-key", key.to_string()),
        ]
    };
    let (status, _) = post(
        &app,
        "form",
        br#"{"name":"Ann"}"#,
        &[("authorization", "Bearer wrong-token".into())],
    )
    .await;
    assert_eq!(status, 401, "a wrong token");
    for (i, who) in ["Ann", "Bob"].iter().enumerate() {
        let body = format!(r#"{{"name":"{who}"}}"#);
        let (status, a) = post(&app, "form", body.as_bytes(), &bearer(&format!("k{i}"))).await;
        assert_eq!(status, 202, "{a}");
    }
    let (status, _) = post(&app, "form", br#"{"name":"Cy"}"#, &bearer("k9")).await;
    assert_eq!(status, 429, "the third delivery within a minute");
    wait_until(
        "both entries reach the person",
        Duration::from_secs(10),
        || async { received(&tg).len() >= 2 },
    )
    .await;
    quiet(app.store.as_ref()).await;
    let mut got = received(&tg);
    got.sort();
    assert_eq!(got, ["New form entry from Ann", "New form entry from Bob"]);
    assert_eq!(llm.request_count(), 0);
    app.shutdown().await;
}

/// A hook's own `budget` caps its runs like a cron job's: a run over it is skipped before the
/// model and the log says why, while a hook without one runs under `budget.cron_run`.
#[tokio::test]
async fn a_hooks_budget_caps_its_runs() {
    let (tg, llm, data) = fakes().await;
    let mut tight = ci_hook();
    tight.name = "tight".into();
    tight.filter.clear();
    tight.budget = Some(herald::domain::Amount::from_units(0.05).unwrap());
    let mut roomy = tight.clone();
    roomy.name = "roomy".into();
    roomy.budget = None;
    let mut c: Config = tg_config(&tg, &llm, &data);
    c.hooks = vec![tight, roomy];
    c.llm.max_tokens = 100;
    c.budget.cron_run = Some(0.5);
    c.budget.prices = vec![herald::config::PriceConfig {
        model: "fake-*".into(),
        input: Some(0.0),
        output: Some(1000.0),
        cache_read: Some(0.0),
        cache_write: Some(0.0),
    }];
    herald::config::validate(&c).unwrap();
    let app = App::start(c).await.unwrap();
    let body = serde_json::to_vec(&run("failure")).unwrap();
    for name in ["tight", "roomy"] {
        let (status, a) = post(&app, name, &body, &github(&body, name, "workflow_run")).await;
        assert_eq!(status, 202, "{a}");
    }
    wait_until("both runs are logged", Duration::from_secs(15), || async {
        let mut done = 0;
        for job in ["hook:tight", "hook:roomy"] {
            let fires = app.store.cron_fires(Some(job), 10).await.unwrap();
            done += fires
                .iter()
                .filter(|f| f.status != FireStatus::Claimed)
                .count();
        }
        done == 2
    })
    .await;
    let tight = app.store.cron_fires(Some("hook:tight"), 10).await.unwrap();
    assert_eq!(tight[0].status, FireStatus::Skipped, "{tight:?}");
    let note = tight[0].note.clone().unwrap_or_default();
    assert!(note.contains("would pass its budget"), "{note}");
    let roomy = app.store.cron_fires(Some("hook:roomy"), 10).await.unwrap();
    assert_eq!(roomy[0].status, FireStatus::Ok, "{roomy:?}");
    assert_eq!(
        llm.request_count(),
        1,
        "only the roomy run reached the model"
    );
    app.shutdown().await;
}

/// `herald hooks test`: a saved payload's filter verdict and the exact message it would run.
#[tokio::test]
async fn hooks_test_renders_a_saved_payload_without_the_store() {
    let data = tempfile::tempdir().unwrap();
    let file = data.path().join("run.json");
    std::fs::write(&file, serde_json::to_vec(&run("failure")).unwrap()).unwrap();
    let c = Config {
        hooks: vec![ci_hook()],
        ..Config::default()
    };
    let event = ["X-GitHub-Event=workflow_run".to_string()];
    let out = herald::cli::hooks::test(&c, "ci", &file, &event).unwrap();
    assert!(out.contains("the filter keeps it"), "{out}");
    assert!(out.contains("CI run tests on main failed."), "{out}");
    assert!(out.contains("untrusted data"), "{out}");
    let out = herald::cli::hooks::test(&c, "ci", &file, &[]).unwrap();
    assert!(
        out.contains("the filter drops it: X-GitHub-Event is absent"),
        "{out}"
    );
    let err = herald::cli::hooks::test(&c, "nope", &file, &[]).unwrap_err();
    assert!(err.to_string().contains("no hook named \"nope\""), "{err}");
}
