//! End to end through the WhatsApp adapter: the real core, its webhook route on the daemon's
//! listener and our reqwest Graph client against the fake Cloud API
//! (`test-support/src/fake_whatsapp`) and the fake model, SQLite in a temp dir. Every wait is
//! bounded. The 24-hour rule and cron briefs are in `e2e_whatsapp/window.rs`.

mod window;

use std::time::Duration;

use herald::app::App;
use herald::config::Config;
use herald::store::OutboxStatus;
use herald_test_support::fake_llm::FakeLlm;
use herald_test_support::fake_whatsapp::{
    signature, FakeWhatsApp, FakeWhatsAppConfig, Fault, Sent,
};
use herald_test_support::harness::{init, quiet, test_config, wait_for, wait_until};

pub const WAIT: Duration = Duration::from_secs(20);
/// The person on the allowlist.
pub const ANA: &str = "4915112349001";

pub struct Setup {
    pub fake: FakeWhatsApp,
    pub llm: FakeLlm,
    pub app: App,
    _data: tempfile::TempDir,
}

/// The fake, the model and the core with `[whatsapp]` on the fake, `ANA` allowed, `extra`
/// lines added to the section, then `tune`.
pub async fn start(extra: &str, tune: impl FnOnce(&mut Config)) -> Setup {
    init();
    let fake = FakeWhatsApp::start(FakeWhatsAppConfig::default()).await;
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().expect("temp dir");
    let cfg = fake.config();
    let toml = format!(
        "[whatsapp]\naccess_token = \"{}\"\nphone_number_id = \"{}\"\napp_secret = \"{}\"\n\
         verify_token = \"{}\"\napi_url = \"{}\"\nallowed_users = [\"+{ANA}\"]\n{extra}",
        cfg.access_token,
        cfg.phone_number_id,
        cfg.app_secret,
        cfg.verify_token,
        fake.api_url()
    );
    let mut section = herald::config::from_toml(&toml).expect("a [whatsapp] section");
    let mut c = test_config(&llm, &data);
    let table = section.sections.remove("whatsapp").expect("the table");
    c.sections.insert("whatsapp".into(), table);
    tune(&mut c);
    let app = App::start(c).await.expect("herald starts");
    fake.set_webhook(&hook_url(&app));
    Setup {
        fake,
        llm,
        app,
        _data: data,
    }
}

pub fn hook_url(app: &App) -> String {
    format!("http://{}/whatsapp/webhook", app.addr)
}

/// Waits until the bot sent `n` messages to `to`; returns them.
pub async fn sent_to(fake: &FakeWhatsApp, to: &str, n: usize) -> Vec<Sent> {
    wait_for(&format!("{n} messages to {to}"), WAIT, async || {
        let sent = fake.sent_to(to);
        (sent.len() >= n).then_some(sent)
    })
    .await
}

#[tokio::test]
async fn meta_verifies_the_webhook_with_the_verify_token_only() {
    let s = start("", |_| {}).await;
    let url = hook_url(&s.app);
    let token = s.fake.config().verify_token.clone();
    assert_eq!(
        s.fake.verify(&url, &token, "1158201444").await,
        (200, "1158201444".into())
    );
    assert_eq!(s.fake.verify(&url, "guess", "1158201444").await.0, 403);
    s.app.shutdown().await;
}

#[tokio::test]
async fn unsigned_or_forged_webhooks_are_refused_and_ingest_nothing() {
    let s = start("", |_| {}).await;
    // Ana wrote a minute ago, as far as WhatsApp knows (her window is open).
    s.fake.set_last_inbound(ANA, Some(60));
    let body = r#"{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages","value":{"messaging_product":"whatsapp","contacts":[{"profile":{"name":"Eve"},"wa_id":"4915112349001"}],"messages":[{"from":"4915112349001","id":"wamid.forged1","timestamp":"1700000000","type":"text","text":{"body":"run rm -rf"}}]}}]}]}"#;
    let http = reqwest::Client::new();
    let good = signature(&s.fake.config().app_secret, body.as_bytes());
    let cases = [
        (None, 401),
        (Some(signature("not the app secret", body.as_bytes())), 401),
        (Some("sha256=00".to_string()), 401),
        (Some(good.replace("sha256=", "")), 401),
    ];
    for (header, want) in cases {
        let mut req = http.post(hook_url(&s.app)).body(body);
        if let Some(h) = &header {
            req = req.header("x-hub-signature-256", h);
        }
        let status = req.send().await.unwrap().status().as_u16();
        assert_eq!(status, want, "{header:?}");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(s.llm.request_count(), 0, "no forged message ran a turn");
    assert!(s.fake.sent().is_empty());
    // The same bytes signed with the app secret are taken: the check is the signature.
    let res = http
        .post(hook_url(&s.app))
        .header("x-hub-signature-256", good)
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    sent_to(&s.fake, ANA, 1).await;
    s.app.shutdown().await;
}

#[tokio::test]
async fn a_redelivered_webhook_is_answered_once_with_a_read_receipt_and_typing() {
    let s = start("", |_| {}).await;
    let wamid = s.fake.text(ANA, "hello");
    let sent = sent_to(&s.fake, ANA, 1).await;
    assert_eq!(sent[0].text, "reply to: hello");
    assert_eq!(
        sent[0].context.as_deref(),
        Some(wamid.as_str()),
        "the reply quotes"
    );
    let hook = s
        .fake
        .hooks()
        .iter()
        .find(|h| h.about == [wamid.clone()])
        .unwrap()
        .id;
    s.fake.redeliver(hook);
    wait_until("the redelivery answered 200", WAIT, || async {
        s.fake.hooks().iter().filter(|h| h.acked).count() >= 2
    })
    .await;
    quiet(s.app.store.as_ref()).await;
    assert_eq!(s.fake.sent_to(ANA).len(), 1, "one answer");
    assert_eq!(s.llm.request_count(), 1, "one turn");
    assert!(
        s.fake.reads().iter().any(|r| r.wamid == wamid && r.typing),
        "read receipt with the typing indicator: {:?}",
        s.fake.reads()
    );
    s.app.shutdown().await;
}

/// Meta takes the message but its answer is lost (HTTP 500): the `sent` status carrying the
/// outbox key records the wamid, and the retry sends nothing more.
#[tokio::test]
async fn a_lost_answer_is_not_sent_again_once_the_sent_status_names_the_row() {
    let s = start("", |_| {}).await;
    s.fake.fail_next_send(Fault::AcceptedButLost);
    s.fake.text(ANA, "are you there");
    let first = sent_to(&s.fake, ANA, 1).await;
    quiet(s.app.store.as_ref()).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(s.fake.sent_to(ANA).len(), 1, "not sent twice");
    let rows = s.app.store.outbox_recent(5).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].status, OutboxStatus::Sent);
    assert_eq!(
        rows[0].platform_message_id.as_deref(),
        Some(first[0].wamid.as_str())
    );
    s.app.shutdown().await;
}

#[tokio::test]
async fn a_failed_status_fails_the_outbox_row_with_its_code() {
    let s = start("", |_| {}).await;
    s.fake.text(ANA, "ping");
    let sent = sent_to(&s.fake, ANA, 1).await;
    quiet(s.app.store.as_ref()).await;
    s.fake
        .fail_delivery(&sent[0].wamid, 131026, "Message undeliverable");
    let failed = wait_for("the row failed", WAIT, async || {
        s.app
            .store
            .outbox_failed(5)
            .await
            .unwrap()
            .into_iter()
            .next()
    })
    .await;
    let why = failed.last_error.unwrap_or_default();
    assert!(
        why.contains("131026") && why.contains("Message undeliverable"),
        "{why}"
    );
    s.app.shutdown().await;
}

#[tokio::test]
async fn an_unknown_type_gets_a_polite_answer_and_a_location_reaches_the_model() {
    let s = start("", |_| {}).await;
    let odd = s.fake.unsupported(ANA);
    let told = sent_to(&s.fake, ANA, 1).await;
    assert_eq!(told[0].text, herald::adapters::whatsapp::CANNOT_READ);
    assert_eq!(told[0].context.as_deref(), Some(odd.as_str()));
    assert_eq!(s.llm.request_count(), 0, "no turn for it");
    // A stranger's unreadable message is not answered at all.
    s.fake.unsupported("4915112349999");
    s.fake.location(ANA, 52.52, 13.405, "Alexanderplatz");
    let sent = sent_to(&s.fake, ANA, 2).await;
    assert!(
        sent[1]
            .text
            .contains("[location: 52.52000, 13.40500, Alexanderplatz]"),
        "{}",
        sent[1].text
    );
    quiet(s.app.store.as_ref()).await;
    assert!(s
        .fake
        .sent_to("4915112349999")
        .iter()
        .all(|m| m.text != herald::adapters::whatsapp::CANNOT_READ));
    s.app.shutdown().await;
}

#[tokio::test]
async fn doctor_names_a_refused_token_and_a_wrong_phone_number_id() {
    use herald::adapters::whatsapp::config::WhatsAppConfig;
    use herald::config::Secret;
    let fake = FakeWhatsApp::start(FakeWhatsAppConfig::default()).await;
    let cfg = fake.config();
    let good = WhatsAppConfig {
        access_token: Some(Secret::new(cfg.access_token.clone())),
        phone_number_id: Some(cfg.phone_number_id.clone()),
        app_secret: Some(Secret::new(cfg.app_secret.clone())),
        verify_token: Some(Secret::new(cfg.verify_token.clone())),
        api_url: fake.api_url().parse().unwrap(),
        ..WhatsAppConfig::default()
    };
    let report = herald::adapters::whatsapp::doctor(&good).await;
    assert_eq!(report[1].0, "whatsapp.phone_number_id");
    assert_eq!(report[1].1, Ok("+1 555-000-1111 (Herald Test)".to_string()));
    let bad_token = WhatsAppConfig {
        access_token: Some(Secret::new("EAAGrevoked")),
        ..good.clone()
    };
    let report = herald::adapters::whatsapp::doctor(&bad_token).await;
    assert_eq!(report[0].0, "whatsapp.access_token");
    let why = report[0].1.clone().unwrap_err();
    assert!(why.contains("190") && !why.contains("EAAGrevoked"), "{why}");
    let bad_phone = WhatsAppConfig {
        phone_number_id: Some("999".into()),
        ..good
    };
    let report = herald::adapters::whatsapp::doctor(&bad_phone).await;
    assert_eq!(report[1].0, "whatsapp.phone_number_id");
    assert!(
        report[1].1.clone().unwrap_err().contains("100"),
        "{report:?}"
    );
}
