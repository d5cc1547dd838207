//! Outbound fetches of untrusted URLs go through one guarded client (issue 52, item 5), seen
//! from outside the real `herald` binary: a Telegram file server that redirects a download to
//! another port of 127.0.0.1, to the cloud metadata address or to a private address gets a
//! clear refusal to the person, the place it pointed at receives nothing, and no header Herald
//! sends the file server carries the bot token (a redirect on the same host is followed, with
//! no `Referer`). Also the `key_env` setup copied from docs/api.md: a variable named
//! `HERALD_API_KEY_LAPTOP` is the key's secret, not a configuration key, and the daemon starts
//! and serves /v1/models with it.

use std::time::Duration;

use herald_test_support::fake_llm::FakeLlm;
use herald_test_support::fake_telegram::{FakeTelegram, FileFault, Media};
use herald_test_support::harness::{free_port, init};
use herald_test_support::herald::{write_config, Herald, Running};
use herald_test_support::recorder::Recorder;
use herald_test_support::telegram::{TOKEN, USER};

const WAIT: Duration = Duration::from_secs(30);

/// The real binary polling the fake Bot API as `USER`'s bot, answering with the fake model.
async fn daemon(tg: &FakeTelegram, llm: &FakeLlm, data: &tempfile::TempDir) -> Running {
    let port = free_port();
    let file = write_config(
        data.path(),
        &format!("127.0.0.1:{port}"),
        &llm.base_url(),
        "",
    );
    let mut herald = Herald::serve_config(&file, port)
        .env("HERALD_TELEGRAM__TOKEN", TOKEN)
        .env("HERALD_TELEGRAM__API_URL", tg.url())
        .env("HERALD_TELEGRAM__MODE", "polling")
        .env("HERALD_TELEGRAM__ALLOWED_USERS", format!("[{USER}]"))
        .env("HERALD_PAIRING__ENABLED", "false")
        .env("HERALD_TELEGRAM__POLL_TIMEOUT_SECS", "1")
        .env("HERALD_STREAMING__ENABLED", "false")
        .env("HERALD_MEDIA__FETCH_TIMEOUT_SECS", "20")
        .env("HERALD_LOG__LEVEL", "info")
        .log_to(&data.path().join("herald.log"))
        .spawn();
    herald.wait_ready(WAIT).await;
    herald
}

fn document(file_id: &str, name: &str, size: usize) -> Media {
    Media::Document {
        file_id: file_id.into(),
        size: size as u64,
        name: name.into(),
        mime: "text/plain".into(),
        caption: None,
    }
}

#[tokio::test]
async fn a_file_server_redirecting_a_download_elsewhere_is_refused_and_never_sees_the_token() {
    init();
    let tg = FakeTelegram::start(TOKEN).await;
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let elsewhere = Recorder::start().await;
    let mut herald = daemon(&tg, &llm, &data).await;

    // A redirect on the file server's own host is followed, and the second request carries no
    // Referer (reqwest would send the first URL, token and all).
    let notes = "the launch moves to Thursday";
    let target = tg.add_file("moved-target", notes.as_bytes());
    tg.add_file("moved", b"never served");
    tg.set_file_fault(
        "moved",
        FileFault::Redirect(format!("/file/bot{TOKEN}/{}", target.file_path)),
    );
    tg.push_media(USER, USER, &document("moved", "notes.txt", notes.len()));
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert!(
        llm.last_request().last_user().contains(notes),
        "the redirected file's text reached the model: {:?}",
        llm.last_request().last_user()
    );
    assert!(sent[0].text.starts_with("reply to:"), "{:?}", sent[0].text);
    assert_eq!(tg.downloads("moved-target"), 1);

    // Redirects off the host: another port of 127.0.0.1, the metadata endpoint, a private
    // address. Each gets Herald's own answer, no model call, and nothing reaches the target.
    let asked = llm.request_count();
    let targets = [
        format!("{}/latest/meta-data/", elsewhere.url()),
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/".to_string(),
        "http://10.0.0.1/admin".to_string(),
        format!("http://localhost:{}/steal", elsewhere.port()),
    ];
    for (i, to) in targets.iter().enumerate() {
        let id = format!("away-{i}");
        tg.add_file(&id, b"never served");
        tg.set_file_fault(&id, FileFault::Redirect(to.clone()));
        tg.push_media(USER, USER, &document(&id, "report.txt", 12));
        let sent = tg.wait_for_sent(i + 2, WAIT).await;
        assert_eq!(
            sent[i + 1].text,
            "I could not read a document (report.txt): the download was refused: its server \
             redirected it to another host, which is not followed. Your message is recorded; \
             please send a smaller or different file, or type what you need.",
            "redirect to {to}"
        );
        assert_eq!(tg.downloads(&id), 1, "{to}");
    }
    assert_eq!(
        llm.request_count(),
        asked,
        "no model call for a refused file"
    );
    assert!(
        elsewhere.seen().is_empty(),
        "the other server was reached: {:?}",
        elsewhere.seen()
    );

    // Every request the file server received: the token is in its path, never in a header.
    let secret = TOKEN.split_once(':').unwrap().1;
    let requests = tg.download_headers();
    assert_eq!(requests.len(), 2 + targets.len(), "{requests:?}");
    for headers in &requests {
        for (name, value) in headers {
            assert_ne!(name, "referer", "a Referer was sent: {headers:?}");
            assert!(
                !value.contains(secret),
                "the token is in header {name}: {headers:?}"
            );
        }
    }
    let log = herald.log();
    assert!(log.contains("could not fetch an attachment"), "{log}");
    assert!(!log.contains(secret), "the token is in the log: {log}");
    herald.kill();
}

#[tokio::test]
async fn a_key_env_variable_named_like_a_config_key_starts_the_daemon_and_opens_the_api() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let port = free_port();
    // The setup of docs/api.md, as an operator copies it.
    let file = write_config(
        data.path(),
        &format!("127.0.0.1:{port}"),
        &llm.base_url(),
        "[[people]]\nname = \"owner\"\n\n[api]\nenabled = true\n\n[[api.keys]]\n\
         name = \"laptop\"\nkey_env = \"HERALD_API_KEY_LAPTOP\"\nperson = \"owner\"\n",
    );
    let key = "k-3f9a1c7e5b2d4086a1e0";
    let mut herald = Herald::serve_config(&file, port)
        .env("HERALD_API_KEY_LAPTOP", key)
        .spawn();
    herald.wait_ready(WAIT).await;

    let http = reqwest::Client::new();
    let models = |bearer: &'static str| {
        http.get(format!("{}/v1/models", herald.base_url()))
            .bearer_auth(bearer)
            .send()
    };
    let ok = models(key).await.unwrap();
    assert_eq!(ok.status().as_u16(), 200);
    let body: serde_json::Value = ok.json().await.unwrap();
    assert_eq!(body["data"][0]["id"], "herald", "{body}");
    let wrong = models("k-not-the-laptop-key-000").await.unwrap();
    assert_eq!(wrong.status().as_u16(), 401);
    herald.kill();
}
