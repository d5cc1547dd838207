//! The 24-hour rule through a cron brief: to a person who has not written for 24 hours the
//! brief goes out as the approved template, the brief as its parameter; without a template it
//! fails at once with the reason and is never sent free-form.

use std::sync::{Arc, Mutex};

use chrono::{DateTime, TimeZone, Utc};
use herald::app::App;
use herald::cron::{JobSpec, Scheduler};
use herald::store::{FireStatus, OutboxStatus};
use herald_test_support::harness::{quiet, wait_for};

use super::{sent_to, start, ANA, WAIT};

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, 7, 0, 0).unwrap()
}

/// A morning brief for Ana, fired once by a scheduler whose clock the test holds.
async fn fire_brief(app: &App) -> Scheduler {
    let spec = JobSpec {
        name: "morning".into(),
        schedule: "every 1h".into(),
        prompt: "Write the morning brief.".into(),
        deliver: vec![format!("whatsapp:{ANA}")],
        timezone: None,
        catch_up: Some("once".into()),
        enabled: true,
        budget: None,
    };
    app.store
        .cron_job_add(&spec, t0().timestamp_millis())
        .await
        .unwrap();
    let now = Arc::new(Mutex::new(t0() + chrono::TimeDelta::minutes(61)));
    let clock = now.clone();
    let sched = app
        .scheduler("test/cron")
        .with_clock(Arc::new(move || *clock.lock().unwrap()));
    sched.tick().await.unwrap();
    wait_for("the fire to finish", WAIT, async || {
        sched.tick().await.unwrap();
        let fires = app.store.cron_fires(Some("morning"), 10).await.unwrap();
        fires
            .iter()
            .all(|f| f.status != FireStatus::Claimed)
            .then_some(())
    })
    .await;
    sched
}

#[tokio::test]
async fn a_cron_brief_to_a_person_outside_24_hours_goes_out_as_the_template() {
    let s = start(
        "brief_template = \"daily_brief\"\ntemplate_language = \"de\"\n",
        |c| c.cron.enabled = false,
    )
    .await;
    s.fake.approve_template("daily_brief", "de");
    // Ana last wrote 25 hours ago: Herald heard it then, and WhatsApp's window is closed.
    let heard = (Utc::now().timestamp() - 25 * 3600).to_string();
    s.app
        .store
        .kv_set(&format!("whatsapp:heard:{ANA}"), &heard)
        .await
        .unwrap();
    s.fake.set_last_inbound(ANA, Some(25 * 3600));
    let _sched = fire_brief(&s.app).await;
    let sent = sent_to(&s.fake, ANA, 1).await;
    assert_eq!(sent[0].kind, "template");
    assert_eq!(
        sent[0].template,
        Some(("daily_brief".to_string(), "de".to_string()))
    );
    assert!(
        sent[0].text.contains("morning brief"),
        "the brief is the parameter: {}",
        sent[0].text
    );
    quiet(s.app.store.as_ref()).await;
    assert_eq!(s.fake.sent_to(ANA).len(), 1);
    s.app.shutdown().await;
}

#[tokio::test]
async fn without_a_template_the_brief_fails_at_once_with_the_reason() {
    let s = start("", |c| c.cron.enabled = false).await;
    let _sched = fire_brief(&s.app).await;
    let failed = wait_for("the brief's row failed", WAIT, async || {
        s.app
            .store
            .outbox_failed(5)
            .await
            .unwrap()
            .into_iter()
            .next()
    })
    .await;
    assert_eq!(failed.status, OutboxStatus::Failed);
    assert_eq!(failed.attempts, 1, "failed at once, not retried");
    let why = failed.last_error.unwrap_or_default();
    assert!(
        why.contains("24-hour window") && why.contains("whatsapp.brief_template"),
        "{why}"
    );
    assert_eq!(
        s.fake.send_calls(),
        0,
        "nothing sent free-form for WhatsApp to refuse"
    );
    // The operator reads the reason where cron runs are listed.
    let log = herald::cli::cron::execute(
        s.app.store.as_ref(),
        &herald::config::Config::default(),
        herald::cli::cron::CronCmd::Log {
            name: None,
            limit: 5,
        },
        Utc::now(),
    )
    .await
    .unwrap();
    assert!(
        log.contains("delivery to whatsapp:") && log.contains("24-hour window"),
        "{log}"
    );
    s.app.shutdown().await;
}
