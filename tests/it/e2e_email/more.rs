//! The email adapter's behaviour beyond one conversation: approvals answered in words (only
//! in the requester's conversation), handled mail moved to `processed_folder`, and a file over
//! `media.max_bytes` named instead of read.

use herald::lanes::ASK_IN_WORDS;
use herald_test_support::fake_email::Letter;
use herald_test_support::fake_llm::Step;
use herald_test_support::harness::wait_for;
use serde_json::json;

use super::{start, start_with, ALICE, WAIT};

#[tokio::test]
async fn an_approval_is_answered_by_the_requesters_yes_and_not_by_someone_elses() {
    let skills = tempfile::tempdir().unwrap();
    let dir = skills.path().to_path_buf();
    let s = start(|c| {
        c.agent.skills_dir = Some(dir);
        c.tools.require_approval = vec!["skill_manage".into()];
    })
    .await;
    let args = json!({"action": "create", "name": "mailtriage",
        "description": "Sort bug reports", "body": "1. Label it."});
    s.llm
        .push(Step::ToolCall("skill_manage".into(), args.to_string()));
    s.mail
        .deliver(&Letter::new(
            ALICE,
            "Skills",
            "make a triage skill",
            "q1@example.org",
        ))
        .await;
    // The turn waits for the answer: its inbox event stays pending, so wait for the mail alone.
    let question = s.mail.wait_sent(1, WAIT).await.remove(0);
    assert!(question.text.contains("skill_manage"), "{}", question.text);
    assert!(question.text.contains(ASK_IN_WORDS), "{}", question.text);
    assert_eq!(question.in_reply_to.as_deref(), Some("q1@example.org"));
    let proposed = || skills.path().join(".proposed").join("mailtriage").exists();

    // Bob is allowed, but the question was not asked in his conversation: his "yes" answers
    // nothing and is an ordinary message of his own, which runs nothing of Alice's.
    let bob = Letter::new("bob@corp.test", "Re: Skills", "yes", "q2@corp.test")
        .replying_to(&question.message_id, &["q1@example.org".to_string()]);
    s.mail.deliver(&bob).await;
    let told_bob = s.mail.wait_sent(2, WAIT).await.remove(1);
    assert_eq!(told_bob.to, ["bob@corp.test"]);
    assert_eq!(told_bob.text, "reply to: yes");
    assert!(!proposed(), "someone else's yes ran the tool");

    // Alice's reply (quoted history and all) is the answer.
    let yes = Letter::new(
        ALICE,
        "Re: Skills",
        "Yes.\n\nOn Mon, 7 Dec 2026, Herald wrote:\n> Reply yes to approve or no to deny.",
        "q3@example.org",
    )
    .replying_to(&question.message_id, &["q1@example.org".to_string()]);
    s.mail.deliver(&yes).await;
    let sent = s.settled(4).await;
    let to_alice: Vec<&str> = sent[2..]
        .iter()
        .filter(|m| m.to == [ALICE])
        .map(|m| m.text.as_str())
        .collect();
    assert_eq!(to_alice.len(), 2, "{to_alice:?}");
    assert!(
        to_alice.contains(&"reply to: Subject: Skills\n\nmake a triage skill"),
        "{to_alice:?}"
    );
    assert!(proposed(), "the approved call ran");
    s.stop().await;
}

#[tokio::test]
async fn handled_mail_moves_to_the_processed_folder() {
    let s = start_with("processed_folder = \"Done\"\n", |_| {}).await;
    s.mail
        .deliver(&Letter::new(
            ALICE,
            "Filing",
            "File this.",
            "d1@example.org",
        ))
        .await;
    s.settled(1).await;
    wait_for("the mail moved", WAIT, async || {
        let (inbox, done) = (s.mail.folder("INBOX").await, s.mail.folder("Done").await);
        (inbox.is_empty() && done.len() == 1).then_some(())
    })
    .await;
    s.stop().await;
}

#[tokio::test]
async fn a_file_over_the_limit_is_named_not_read() {
    let s = start(|c| c.media.max_bytes = 2_000).await;
    let big = vec![b'x'; 5_000];
    let letter = Letter::new(ALICE, "Logs", "See the log.", "l1@example.org").file(
        "big.log",
        "text/plain",
        &big,
    );
    s.mail.deliver(&letter).await;
    s.settled(1).await;
    let user = s.llm.last_request().last_user();
    assert!(user.contains("See the log."), "{user}");
    assert!(
        user.contains("big.log (5000 bytes) is over the limit of 2000 bytes"),
        "{user}"
    );
    assert!(!user.contains("xxxxxxxx"), "{user}");
    s.stop().await;
}

/// A reply the server accepted just before Herald died (its copy in the Sent folder, our
/// record of it lost) is not mailed again: the retried row finds its Message-ID there.
#[tokio::test]
async fn a_row_already_in_the_sent_folder_is_not_mailed_again() {
    use herald::domain::LaneKey;
    use herald::store::{OutboxKey, ReplyKey};
    use herald_test_support::fake_email::ADDRESS;

    let s = start(|_| {}).await;
    // The first attempt meets a 4xx, so the row is retried: an attempt that did not end
    // cleanly, like one cut by a kill.
    s.mail.smtp.refuse_next(1, 1);
    // What the lost attempt left on the server: its copy, under the row's Message-ID.
    let lane = LaneKey::new(&format!("email:{ALICE}:k1@example.org"));
    let key = OutboxKey::chunk(ReplyKey::answer(&lane, 1, "turn"), 0).idem_key();
    let id = format!(
        "herald.{}.t@herald.test",
        &herald::media::sha256_hex(key.as_bytes())[..32]
    );
    let copy = format!(
        "From: {ADDRESS}\r\nTo: {ALICE}\r\nSubject: Re: Once\r\nMessage-ID: <{id}>\r\n\r\nreply\r\n"
    );
    s.mail.append("Sent", copy.as_bytes()).await;
    s.mail
        .deliver(&Letter::new(
            ALICE,
            "Once",
            "Only once, please.",
            "k1@example.org",
        ))
        .await;
    wait_for("the row recorded as sent", WAIT, async || {
        let rows = s.app.store.outbox_recent(10).await.ok()?;
        rows.iter()
            .any(|r| r.platform_message_id.as_deref() == Some(id.as_str()))
            .then_some(())
    })
    .await;
    assert!(
        s.mail.sent().is_empty(),
        "mailed again: {:?}",
        s.mail.sent()
    );
    assert_eq!(s.llm.request_count(), 1);
    s.stop().await;
}

/// The IMAP server goes away under an open IDLE and comes back: the reader reconnects,
/// selects the mailbox again and reads what arrived meanwhile.
#[tokio::test]
async fn the_reader_reconnects_after_the_server_restarts() {
    let mut s = start(|_| {}).await;
    s.mail
        .deliver(&Letter::new(
            ALICE,
            "Before",
            "Before the restart.",
            "rc1@example.org",
        ))
        .await;
    s.settled(1).await;
    s.mail.dovecot.restart();
    s.mail
        .deliver(&Letter::new(
            ALICE,
            "After",
            "After the restart.",
            "rc2@example.org",
        ))
        .await;
    let sent = s.settled(2).await;
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(sent[1].in_reply_to.as_deref(), Some("rc2@example.org"));
    assert_eq!(
        s.llm.request_count(),
        2,
        "the first mail was not read again"
    );
    s.stop().await;
}

/// A server without IDLE is looked at every `poll_secs`.
#[tokio::test]
async fn without_idle_the_mailbox_is_polled() {
    // Dovecot announces no IDLE after login with this capability list.
    let conf = "protocol imap {\n  imap_capability = IMAP4rev1 LITERAL+ SASL-IR ID ENABLE UIDPLUS MOVE\n}\n";
    let mail = herald_test_support::fake_email::MailServers::start_with(conf).await;
    let caps = herald_test_support::fake_email::mailbox::capabilities(
        mail.dovecot.port,
        herald_test_support::fake_email::ADDRESS,
        herald_test_support::fake_email::PASSWORD,
    )
    .await
    .unwrap();
    assert!(!caps.iter().any(|c| c.contains("IDLE")), "{caps:?}");
    let s = super::start_on(mail, "", |_| {}).await;
    s.mail
        .deliver(&Letter::new(
            ALICE,
            "Poll",
            "Found by a poll.",
            "pl1@example.org",
        ))
        .await;
    let sent = s.settled(1).await;
    assert_eq!(sent[0].in_reply_to.as_deref(), Some("pl1@example.org"));
    s.stop().await;
}

/// `herald doctor` logs in to both servers, and names a refused password without printing it.
#[tokio::test]
async fn doctor_logs_in_to_both_servers() {
    use herald_test_support::fake_email::{MailServers, PASSWORD};
    use herald_test_support::herald::Herald;

    herald_test_support::harness::init();
    let mail = MailServers::start().await;
    let llm = herald_test_support::fake_llm::FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let run = |password: &str| {
        let mut env = mail.env("[\"alice@example.org\"]");
        env.retain(|(k, _)| k != "HERALD_EMAIL__PASSWORD");
        env.push(("HERALD_EMAIL__PASSWORD".into(), password.into()));
        env.push(("HERALD_LLM__BASE_URL".into(), llm.base_url()));
        env.push(("HERALD_LLM__MODEL".into(), "fake-model".into()));
        let d = data.path().to_str().unwrap().to_string();
        async move {
            tokio::task::spawn_blocking(move || {
                let out = Herald::new()
                    .args(["doctor", "--data-dir", &d])
                    .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                    .output();
                let text = format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                (out.status.code().unwrap_or(-1), text)
            })
            .await
            .unwrap()
        }
    };
    let (code, out) = run(PASSWORD).await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("✓ email imap: IMAP login to 127.0.0.1:"),
        "{out}"
    );
    assert!(
        out.contains("✓ email smtp: SMTP login to 127.0.0.1:"),
        "{out}"
    );
    assert!(!out.contains(PASSWORD), "{out}");

    let (code, out) = run("wrong-password-9").await;
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("✗ email imap:") && out.contains("refused"),
        "{out}"
    );
    assert!(!out.contains("wrong-password-9"), "{out}");
}
