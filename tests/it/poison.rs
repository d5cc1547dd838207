//! Issue 52, poison messages: one message whose processing kills the process every time (here a
//! SIGKILL while its file downloads, before its turn starts — where an abort inside a decoder
//! happens) must not take its chat down for good. The real binary is killed three times
//! during that message; after the third restart the person has exactly one "could not be
//! processed" message, `herald inbox dead` lists it, and their next message is answered.
//! `herald inbox retry` sends it back, and the running daemon's rescan takes it up again.
//! A reply chunk whose send is killed is counted the same way: past `outbox.max_attempts` it
//! is abandoned unsent and listed.

use std::path::Path;
use std::time::Duration;

use herald_test_support::fake_llm::FakeLlm;
use herald_test_support::fake_telegram::{FakeTelegram, Fault, FileFault, Media, SentMessage};
use herald_test_support::harness::{free_port, init, wait_until};
use herald_test_support::herald::{Herald, Running};
use herald_test_support::telegram::{TOKEN, USER};

const WAIT: Duration = Duration::from_secs(40);
const FILE: &str = "poison-doc";

fn spawn(data: &Path, port: u16, tg: &FakeTelegram, llm: &FakeLlm) -> Running {
    daemon(data, port, tg, llm).spawn()
}

fn daemon(data: &Path, port: u16, tg: &FakeTelegram, llm: &FakeLlm) -> Herald {
    Herald::serve(port, data)
        .fake_model(&llm.base_url())
        .fast_leases()
        .env("HERALD_TELEGRAM__TOKEN", TOKEN)
        .env("HERALD_TELEGRAM__API_URL", tg.url())
        .env("HERALD_TELEGRAM__MODE", "polling")
        .env("HERALD_TELEGRAM__ALLOWED_USERS", format!("[\"{USER}\"]"))
        .env("HERALD_TELEGRAM__POLL_TIMEOUT_SECS", "1")
        .env("HERALD_STREAMING__ENABLED", "false")
        .env("HERALD_LOG__LEVEL", "warn")
}

/// `herald <args>` on the daemon's data folder: (exit success, stdout + stderr).
fn cli(data: &Path, args: &[&str]) -> (bool, String) {
    let out = Herald::new()
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .output();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn dead_notices(sent: &[SentMessage]) -> usize {
    sent.iter()
        .filter(|m| m.text.contains("could not be processed"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_kills_every_turn_is_dead_lettered_and_the_chat_goes_on() {
    init();
    let tg = FakeTelegram::start(TOKEN).await;
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let port = free_port();
    // The file's download never finishes while a process lives: each start of this message
    // is killed in the middle of reading it.
    tg.add_file(FILE, b"the terms of the contract");
    tg.set_file_fault(FILE, FileFault::Slow(Duration::from_secs(600)));
    tg.push_media(
        USER,
        USER,
        &Media::Document {
            file_id: FILE.into(),
            size: 25,
            name: "contract.txt".into(),
            mime: "text/plain".into(),
            caption: Some("please read this contract".into()),
        },
    );
    for kill in 1..=3 {
        let mut daemon = spawn(data.path(), port, &tg, &llm);
        daemon.wait_ready(WAIT).await;
        wait_until(&format!("start {kill} of the message"), WAIT, || async {
            tg.downloads(FILE) >= kill
        })
        .await;
        daemon.kill();
    }
    assert_eq!(llm.request_count(), 0, "no start got as far as the model");
    assert_eq!(dead_notices(&tg.sent_messages()), 0);

    // The third restart: the message has used its three attempts.
    let mut daemon = spawn(data.path(), port, &tg, &llm);
    daemon.wait_ready(WAIT).await;
    wait_until("the person is told", WAIT, || async {
        dead_notices(&tg.sent_messages()) > 0
    })
    .await;
    tg.push_private_text(USER, USER, "are you there?");
    wait_until("the next message is answered", WAIT, || async {
        tg.sent_messages()
            .iter()
            .any(|m| m.text == "reply to: are you there?")
    })
    .await;
    let sent = tg.chat_view(USER);
    assert_eq!(dead_notices(&sent), 1, "told once: {sent:#?}");
    assert!(
        sent.iter()
            .any(|m| m.text.contains("could not be processed (tried 3 times)")),
        "{sent:#?}"
    );
    assert_eq!(tg.downloads(FILE), 3, "not started a fourth time");

    // The operator's view, from another process on the same store.
    let (ok, listing) = cli(data.path(), &["inbox", "dead"]);
    assert!(ok, "{listing}");
    let line = listing
        .lines()
        .find(|l| l.contains(&format!("telegram:{USER}")))
        .unwrap_or_else(|| panic!("the dead message is listed: {listing}"));
    assert!(line.contains("please read this contract"), "{line}");
    assert!(line.contains("  3  "), "three attempts: {line}");
    assert!(line.contains("without a result"), "the reason: {line}");
    let id = line.split_whitespace().next().unwrap().to_string();
    // The admin page's list says the same.
    let admin: serde_json::Value =
        reqwest::get(format!("http://127.0.0.1:{port}/api/v1/admin/dead"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    let row = &admin["inbox"][0];
    assert_eq!(row["id"].to_string(), id, "{admin}");
    assert_eq!(row["attempts"], 3, "{admin}");
    assert_eq!(row["preview"], "please read this contract", "{admin}");

    let (ok, said) = cli(data.path(), &["inbox", "retry", &id]);
    assert!(ok, "{said}");
    assert!(
        said.contains("pending again") && said.contains("rescan"),
        "{said}"
    );
    let (ok, listing) = cli(data.path(), &["inbox", "dead"]);
    assert!(
        ok && listing.contains("no dead inbound messages"),
        "{listing}"
    );
    // Nothing was woken, yet the daemon's rescan starts the message again.
    wait_until("the retried message is started again", WAIT, || async {
        tg.downloads(FILE) >= 4
    })
    .await;
    let (ok, again) = cli(data.path(), &["inbox", "retry", &id]);
    assert!(!ok && again.contains("not a dead message"), "{again}");
    daemon.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_whose_send_is_killed_past_its_cap_is_abandoned_and_listed() {
    init();
    let tg = FakeTelegram::start(TOKEN).await;
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let port = free_port();
    let spawn_capped = || {
        daemon(data.path(), port, &tg, &llm)
            .env("HERALD_OUTBOX__MAX_ATTEMPTS", "1")
            .spawn()
    };
    // Telegram takes the reply, and the answer never comes while this process lives.
    tg.fail_next("sendMessage", Fault::AnswerLate(Duration::from_secs(120)));
    let mut first = spawn_capped();
    first.wait_ready(WAIT).await;
    tg.push_private_text(USER, USER, "hello");
    wait_until("the reply reached Telegram", WAIT, || async {
        !tg.sent_messages().is_empty()
    })
    .await;
    first.kill();

    // Its one allowed send ended in a kill: the next claim abandons it instead of sending.
    let mut second = spawn_capped();
    second.wait_ready(WAIT).await;
    wait_until("the chunk is abandoned", WAIT, || async {
        cli(data.path(), &["inbox", "dead"]).1.contains("abandoned")
    })
    .await;
    let listing = cli(data.path(), &["inbox", "dead"]).1;
    let line = listing
        .lines()
        .find(|l| l.contains("abandoned"))
        .unwrap_or_else(|| panic!("the abandoned chunk is listed: {listing}"));
    assert!(listing.contains("outbox rows given up"), "{listing}");
    assert!(line.contains("reply to: hello"), "{line}");
    assert!(line.contains("1 sends ended without a result"), "{line}");
    // Abandoned, not resent: the person has the one copy Telegram took before the kill.
    tg.push_private_text(USER, USER, "still there?");
    wait_until("the lane's next reply", WAIT, || async {
        tg.sent_messages()
            .iter()
            .any(|m| m.text == "reply to: still there?")
    })
    .await;
    let hello: Vec<_> = tg
        .sent_messages()
        .into_iter()
        .filter(|m| m.text == "reply to: hello")
        .collect();
    assert_eq!(hello.len(), 1, "{hello:#?}");
    second.kill();
}
