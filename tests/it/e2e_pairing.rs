//! Pairing: an unknown user who writes in a private chat gets a one-time code; the operator
//! approves it with the CLI; from then on the user talks to the agent. Groups stay silent.

use herald::app::App;
use herald::domain::{ChatType, MessageEvent, Platform};
use herald::store::InboxStatus;
use herald_test_support::fake_llm::FakeLlm;
use herald_test_support::harness::{init, settled, test_config};

fn dm(sender: &str, text: &str) -> MessageEvent {
    let mut ev = MessageEvent::text(Platform::named("telegram"), sender, sender, text);
    ev.sender_name = format!("user {sender}");
    ev
}

#[tokio::test]
async fn unknown_dm_gets_a_code_and_is_let_in_after_approval() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let app = App::start(test_config(&llm, &data)).await.unwrap();

    // First message: a code, no model call.
    let id = app.ingest.ingest(&dm("555", "hello?")).await.unwrap().id();
    assert_eq!(settled(&*app.store, id).await.status, InboxStatus::Skipped);
    let reply = app.store.outbox_for_inbox(id).await.unwrap();
    assert_eq!(reply.len(), 1);
    let text = &reply[0].text;
    assert!(text.contains("pairing code"), "{text}");
    let pending = app.store.pairing_pending().await.unwrap();
    assert_eq!(pending.len(), 1);
    let code = pending[0].code.clone();
    assert!(text.contains(&code) && text.contains("herald pairing approve telegram"));
    assert_eq!(code.len(), 8);

    // Writing again right away: no new code and no reminder spam.
    let id2 = app.ingest.ingest(&dm("555", "hello??")).await.unwrap().id();
    assert_eq!(settled(&*app.store, id2).await.status, InboxStatus::Skipped);
    assert!(app.store.outbox_for_inbox(id2).await.unwrap().is_empty());
    assert_eq!(app.store.pairing_pending().await.unwrap().len(), 1);

    // A stranger in a group gets nothing at all.
    let mut group = dm("777", "hi all");
    group.chat_id = "-100".into();
    group.chat_type = ChatType::Group;
    let id3 = app.ingest.ingest(&group).await.unwrap().id();
    assert_eq!(settled(&*app.store, id3).await.status, InboxStatus::Skipped);
    assert!(app.store.outbox_for_inbox(id3).await.unwrap().is_empty());
    assert_eq!(llm.request_count(), 0);

    // The operator approves with the CLI (lower-case input is accepted). The child is awaited,
    // not waited for: a blocking wait would freeze this runtime, and with it an app task that
    // may be inside a write transaction, until the CLI's busy timeout ran out.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_herald"))
        .arg("--data-dir")
        .arg(data.path())
        .args(["pairing", "approve", "telegram", &code.to_lowercase()])
        .env_clear()
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("approved telegram sender 555"));

    // What they wrote while waiting is answered now, after the notice of approval.
    assert_eq!(settled(&*app.store, id).await.status, InboxStatus::Done);
    assert_eq!(settled(&*app.store, id2).await.status, InboxStatus::Done);
    assert_eq!(llm.request_count(), 2);
    let id4 = app.ingest.ingest(&dm("555", "now?")).await.unwrap().id();
    assert_eq!(settled(&*app.store, id4).await.status, InboxStatus::Done);
    assert_eq!(llm.request_count(), 3);
    assert_eq!(
        app.store.outbox_for_inbox(id4).await.unwrap()[0].text,
        "reply to: now?"
    );

    // The same code cannot be approved twice.
    let again = tokio::process::Command::new(env!("CARGO_BIN_EXE_herald"))
        .arg("--data-dir")
        .arg(data.path())
        .args(["pairing", "approve", "telegram", &code])
        .env_clear()
        .output()
        .await
        .unwrap();
    assert!(!again.status.success());
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("no pending, unexpired pairing code"), "{err}");
    app.shutdown().await;
}

/// Issue 25: throwaway accounts filling `pairing.max_pending` do not lock onboarding out. At
/// the cap the oldest pending code is evicted and the newcomer still gets one.
#[tokio::test]
async fn at_the_cap_the_oldest_code_is_evicted_and_a_new_sender_still_gets_one() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut config = test_config(&llm, &data);
    config.pairing.max_pending = 2;
    let app = App::start(config).await.unwrap();
    let mut replies = Vec::new();
    for sender in ["1", "2", "3"] {
        let id = app.ingest.ingest(&dm(sender, "hi")).await.unwrap().id();
        settled(&*app.store, id).await;
        let out = app.store.outbox_for_inbox(id).await.unwrap();
        replies.push(out.iter().any(|o| o.text.contains("Your pairing code is")));
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(
        replies,
        [true, true, true],
        "every unknown sender gets a code, also past the cap"
    );
    let mut pending: Vec<String> = app
        .store
        .pairing_pending()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.sender_id)
        .collect();
    pending.sort();
    assert_eq!(pending, ["2", "3"], "the oldest code made room");
    app.shutdown().await;
}

/// `herald pairing ARGS` against the test's data folder: (success, stdout, stderr).
async fn cli(data: &tempfile::TempDir, args: &[&str]) -> (bool, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_herald"))
        .arg("--data-dir")
        .arg(data.path())
        .arg("pairing")
        .args(args)
        .env_clear()
        .output()
        .await
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Through Telegram: the person hears that they were approved, the question that made them
/// ask for a code is answered after that, and the operator sees and revokes them in the CLI.
#[tokio::test]
async fn telegram_person_is_told_of_approval_and_answered_then_listed_and_revoked() {
    use herald::store::{APPROVED_NOTICE, APPROVED_REQUEUED};
    use herald_test_support::telegram::{fakes, start};
    const STRANGER: i64 = 2002;
    let wait = std::time::Duration::from_secs(20);
    let (tg, llm, data) = fakes().await;
    let app = start(&tg, &llm, &data).await;
    tg.push_private_text(STRANGER, STRANGER, "what is the capital of France?");
    let sent = tg.wait_for_sent(1, wait).await;
    assert!(sent[0].text.contains("pairing code"), "{}", sent[0].text);
    let code = app.store.pairing_pending().await.unwrap()[0].code.clone();

    let (ok, _, _) = cli(&data, &["list"]).await;
    assert!(ok);
    let (ok, out, err) = cli(&data, &["approve", "telegram", &code]).await;
    assert!(ok, "{err}");
    assert!(out.contains("approved telegram sender 2002"), "{out}");

    let sent = tg.wait_for_sent(3, wait).await;
    assert_eq!(sent[1].chat_id, STRANGER);
    assert_eq!(
        sent[1].text,
        format!("{APPROVED_NOTICE}{APPROVED_REQUEUED}")
    );
    assert_eq!(sent[2].chat_id, STRANGER);
    assert_eq!(sent[2].text, "reply to: what is the capital of France?");
    assert_eq!(llm.request_count(), 1);

    let (ok, out, _) = cli(&data, &["list"]).await;
    assert!(ok);
    assert!(out.contains("no pending pairing codes"), "{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("telegram  sender 2002"))
        .unwrap_or_else(|| panic!("the approved sender is listed: {out}"));
    assert!(line.contains("approved "), "{line}");

    let (ok, out, err) = cli(&data, &["revoke", "telegram", "2002"]).await;
    assert!(ok, "{err}");
    assert!(out.contains("revoked telegram sender 2002"), "{out}");
    let (_, out, _) = cli(&data, &["list"]).await;
    assert!(out.contains("no senders approved through pairing"), "{out}");
    assert_eq!(tg.sent_messages().len(), 3, "nothing was sent twice");
    app.shutdown().await;
}
