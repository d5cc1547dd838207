//! Live configuration reload through the real core: a person added to the allowlist is
//! answered with no restart while another chat's streamed reply finishes unbroken; an invalid
//! file changes nothing and says why (to `herald reload`, the admin API and the page's JSON);
//! a cron job rescheduled by a reload fires at its new time only (SQLite and Postgres); a hook's new prompt is used
//! by the next delivery; keys that need a restart are named.

use std::time::Duration;

use chrono::Utc;
use herald::adapters::split::{split_message, Measure, TELEGRAM_LIMIT};
use herald::adapters::telegram::format::markdown_to_html;
use herald::app::App;
use herald::config::{Config, HookMode, HookSpec, LoadOptions, Secret, SignatureKind};
use herald::cron::JobSpec;
use herald::store::FireStatus;
use herald_test_support::db::Db;
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::fake_telegram::{message_json, FakeTelegram};
use herald_test_support::harness::{init, quiet, test_config, wait_until};
use herald_test_support::on_each_backend;
use herald_test_support::telegram::{fakes, tg_config, USER};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(30);
/// A second person, not on the allowlist at start.
const BOB: i64 = 2002;

fn final_chunks(answer: &str) -> Vec<String> {
    split_message(answer, TELEGRAM_LIMIT, Measure::Utf16)
        .iter()
        .map(|c| markdown_to_html(c))
        .collect()
}

fn view(tg: &FakeTelegram, chat: i64) -> Vec<String> {
    tg.chat_view(chat).into_iter().map(|m| m.text).collect()
}

#[tokio::test]
async fn a_reload_adding_a_person_answers_them_while_a_streamed_reply_finishes() {
    let (tg, llm, data) = fakes().await;
    let mut c = tg_config(&tg, &llm, &data);
    c.streaming.enabled = Some(true);
    c.streaming.edit_interval_ms = 300;
    c.pairing.enabled = false;
    let start = c.clone();
    let app = App::start(c).await.unwrap();
    let answer = (0..120)
        .map(|i| format!("word{i}"))
        .collect::<Vec<_>>()
        .join(" ");
    llm.push_when(
        "long story",
        Step::stream(&answer, 20, Duration::from_millis(60)),
    );
    llm.push_when("hello from bob", Step::Reply("Hi Bob, welcome.".into()));

    // Bob is not allowed yet: his message asks the model nothing.
    tg.push_message(|id| message_json(id, BOB, BOB, "hello from bob, early"));
    quiet(app.store.as_ref()).await;
    assert_eq!(llm.request_count(), 0);

    tg.push_message(|id| message_json(id, USER, USER, "tell me a long story"));
    wait_until("the story starts streaming", WAIT, || async {
        !view(&tg, USER).is_empty()
    })
    .await;
    let mut next = start.clone();
    next.telegram.allowed_users.push(BOB.to_string());
    let report = app.reload.apply(next).await.expect("a valid reload");
    assert_eq!(report.applied, ["telegram.allowed_users"]);
    assert!(report.restart_needed.is_empty(), "{report:?}");
    assert_eq!(report.generation, 2);
    assert!(
        view(&tg, USER) != final_chunks(&answer),
        "the reload happened while the story was still being written"
    );

    tg.push_message(|id| message_json(id, BOB, BOB, "hello from bob"));
    wait_until("Bob is answered", WAIT, || async {
        view(&tg, BOB) == ["Hi Bob, welcome."]
    })
    .await;
    wait_until("the story ends whole", WAIT, || async {
        view(&tg, USER) == final_chunks(&answer)
    })
    .await;
    let to_user = tg
        .sent_messages()
        .into_iter()
        .filter(|m| m.chat_id == USER)
        .count();
    assert_eq!(to_user, 1, "one message, edited to the whole story");
    app.shutdown().await;
}

#[tokio::test]
async fn an_invalid_config_changes_nothing_and_says_why() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut c = test_config(&llm, &data);
    c.web.token = Some(Secret::new("reload-test-token"));
    let app = App::start(c.clone()).await.unwrap();
    let file = data.path().join("herald.toml");
    std::fs::write(&file, "[server]\nmax_connections = 0\n").unwrap();
    app.reload.set_source(LoadOptions {
        file: Some(file.clone()),
        ..LoadOptions::default()
    });

    // `herald reload` against the daemon: refused, naming the key.
    let mut cli = c.clone();
    cli.server.listen = app.addr;
    let err = herald::cli::reload::reload(&cli).await.unwrap_err();
    let text = format!("{err:#}");
    assert!(text.contains("server.max_connections"), "{text}");
    assert!(text.contains("422"), "{text}");
    let status = app.reload.status();
    assert_eq!(status.generation, 1, "nothing changed");
    assert!(status
        .last_error
        .as_deref()
        .is_some_and(|e| e.contains("server.max_connections")));
    assert_eq!(
        app.reload.current().server.max_connections,
        c.server.max_connections
    );

    // The admin JSON shows the same.
    let overview: Value = reqwest::Client::new()
        .get(format!("http://{}/api/v1/admin/overview", app.addr))
        .bearer_auth("reload-test-token")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(overview["config"]["generation"], 1);
    assert!(overview["config"]["last_error"]
        .as_str()
        .unwrap()
        .contains("server.max_connections"));

    // Without the token the reload route is closed.
    let resp = reqwest::Client::new()
        .post(format!("http://{}/api/v1/admin/reload", app.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 401);

    // A restart-only key is named and left as it was; the error is cleared.
    let mut moved = c.clone();
    moved.server.listen = "127.0.0.1:1".parse().unwrap();
    let report = app.reload.apply(moved).await.unwrap();
    assert_eq!(report.restart_needed, ["server.listen"]);
    assert!(report.applied.is_empty());
    assert_eq!(app.reload.status().last_error, None);
    assert_eq!(app.reload.status().restart_needed, ["server.listen"]);
    app.shutdown().await;
}

fn one_shot(name: &str, at: chrono::DateTime<Utc>) -> JobSpec {
    JobSpec {
        name: name.into(),
        schedule: at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        prompt: format!("Write the {name} brief."),
        deliver: vec!["web:alice".into()],
        timezone: None,
        catch_up: None,
        enabled: true,
        budget: None,
    }
}

async fn a_cron_job_rescheduled_by_reload_fires_at_its_new_time_only(db: Db) {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut c = test_config(&llm, &data);
    db.apply(&mut c);
    let later = Utc::now() + chrono::TimeDelta::hours(1);
    c.cron.jobs = vec![one_shot("brief", later), one_shot("gone", later)];
    let app = App::start(c.clone()).await.unwrap();

    let soon = Utc::now() + chrono::TimeDelta::seconds(3);
    let mut next = c.clone();
    next.cron.jobs = vec![one_shot("brief", soon)];
    let report = app.reload.apply(next).await.unwrap();
    assert_eq!(report.applied, ["cron.jobs"]);
    let names: Vec<String> = app
        .store
        .cron_jobs()
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.name)
        .collect();
    assert_eq!(names, ["brief"], "the removed job is gone");

    wait_until("the rescheduled job fires", WAIT, || async {
        let fires = app.store.cron_fires(Some("brief"), 10).await.unwrap();
        fires.iter().any(|f| f.status == FireStatus::Ok)
    })
    .await;
    quiet(app.store.as_ref()).await;
    let fires = app.store.cron_fires(Some("brief"), 10).await.unwrap();
    assert_eq!(fires.len(), 1, "{fires:?}");
    assert_eq!(
        fires[0].scheduled_at,
        soon.timestamp() * 1000,
        "at its new time"
    );
    assert_eq!(llm.request_count(), 1);
    app.shutdown().await;
}

on_each_backend!(
    sqlite_cron_rescheduled,
    postgres_cron_rescheduled,
    a_cron_job_rescheduled_by_reload_fires_at_its_new_time_only
);

#[tokio::test]
async fn a_hooks_new_prompt_is_used_by_the_next_delivery() {
    let (tg, llm, data) = fakes().await;
    let mut c: Config = tg_config(&tg, &llm, &data);
    let secret = "a-webhook-secret-of-some-length";
    c.hooks = vec![HookSpec {
        name: "alerts".into(),
        secret: Some(Secret::new(secret)),
        secret_env: None,
        signature: SignatureKind::Bearer,
        mode: HookMode::Notify,
        prompt: "old: {{payload.msg}}".into(),
        deliver: vec![format!("telegram:{USER}")],
        budget: None,
        filter: Vec::new(),
        max_body_bytes: 4096,
        rate_per_min: 60,
    }];
    let app = App::start(c.clone()).await.unwrap();
    let mut next = c.clone();
    next.hooks[0].prompt = "new: {{payload.msg}}".into();
    let report = app.reload.apply(next).await.unwrap();
    assert_eq!(report.applied, ["hooks"]);
    let resp = reqwest::Client::new()
        .post(format!("http://{}/hooks/alerts", app.addr))
        .bearer_auth(secret)
        .body(r#"{"msg":"disk full"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 202);
    wait_until("the alert arrives", WAIT, || async {
        !view(&tg, USER).is_empty()
    })
    .await;
    quiet(app.store.as_ref()).await;
    assert_eq!(view(&tg, USER), ["new: disk full"]);
    app.shutdown().await;
}

/// The real binary: SIGHUP and `herald reload` reload the daemon's own file; an invalid file
/// leaves it running as it was, and `herald reload` exits non-zero naming the key.
#[tokio::test]
async fn sighup_and_herald_reload_reload_the_running_daemon() {
    use herald_test_support::harness::free_port;
    use herald_test_support::herald::{write_config, Herald};
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let file = write_config(data.path(), &listen, &llm.base_url(), "");
    let log = data.path().join("herald.log");
    let mut daemon = Herald::serve_config(&file, port).log_to(&log).spawn();
    daemon.wait_ready(WAIT).await;
    let generation = || async {
        let v: Value = reqwest::get(format!("http://{listen}/api/v1/admin/config"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v["config"]["generation"].as_u64().unwrap()
    };
    assert_eq!(generation().await, 1);

    write_config(
        data.path(),
        &listen,
        &llm.base_url(),
        "[telegram]\nallowed_users = [\"42\"]\n",
    );
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &daemon.pid().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    daemon.wait_log("configuration reloaded", WAIT).await;
    assert_eq!(generation().await, 2);

    write_config(
        data.path(),
        &listen,
        &llm.base_url(),
        "[telegram]\nallowed_users = [\"42\", \"43\"]\n",
    );
    let out = Herald::new()
        .arg("--config")
        .arg(&file)
        .arg("reload")
        .output();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("applied: telegram.allowed_users"),
        "{stdout}"
    );
    assert_eq!(generation().await, 3);

    // An invalid file: `herald reload` refuses it with the key named; SIGHUP changes nothing.
    write_config(
        data.path(),
        &listen,
        &llm.base_url(),
        "[lanes]\nlease_ttl_secs = 0\n",
    );
    let out = Herald::new()
        .arg("--config")
        .arg(&file)
        .arg("reload")
        .output();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("lanes."), "{stderr}");
    std::process::Command::new("kill")
        .args(["-HUP", &daemon.pid().to_string()])
        .status()
        .unwrap();
    daemon.wait_log("configuration reload refused", WAIT).await;
    assert_eq!(generation().await, 3, "nothing changed");
    assert!(daemon.try_wait().is_none(), "still running");
}

/// `reload.watch`: saving the file reloads it (the watcher task alone: a SIGHUP handler
/// would be process-global state in this shared test binary).
#[tokio::test]
async fn a_saved_config_file_is_reloaded_when_watched() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let app = App::start(test_config(&llm, &data)).await.unwrap();
    let file = data.path().join("herald.toml");
    std::fs::write(&file, "[reload]\nwatch = true\n").unwrap();
    app.reload.set_source(LoadOptions {
        file: Some(file.clone()),
        ..LoadOptions::default()
    });
    let cancel = tokio_util::sync::CancellationToken::new();
    // The file as it is when the watcher is made is the running one.
    let task = tokio::spawn(herald::reload::watch::on_file_change(
        app.reload.clone(),
        Duration::from_millis(100),
        cancel.clone(),
    ));
    std::fs::write(
        &file,
        "[reload]\nwatch = true\n\n[telegram]\nallowed_users = [\"42\"]\n",
    )
    .unwrap();
    wait_until("the saved file is reloaded", WAIT, || async {
        app.reload.status().generation == 2
    })
    .await;
    assert_eq!(app.reload.current().telegram.allowed_users, ["42"]);
    cancel.cancel();
    task.await.unwrap();
    app.shutdown().await;
}
