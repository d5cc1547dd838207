//! End to end through the Signal adapter: the real core, our JSON-RPC client and event stream
//! against the fake signal-cli daemon (`test-support/src/fake_signal`) and the fake model,
//! SQLite in a temp dir. Every wait is bounded.

use std::time::Duration;

use herald::app::App;
use herald::config::Config;
use herald_test_support::fake_llm::FakeLlm;
use herald_test_support::fake_signal::{FakeSignal, Fault, Person};
use herald_test_support::harness::{init, quiet, test_config, wait_until};

const WAIT: Duration = Duration::from_secs(20);
const GROUP: &str = "R3JvdXBPZk9wcyBmb3IgdGhlIHNpZ25hbCB0ZXN0cyE=";

fn alice() -> Person {
    Person::new("+15550100001", "Alice")
}

async fn start(extra: &str) -> (FakeSignal, FakeLlm, App, tempfile::TempDir) {
    start_with(extra, |_| {}).await
}

async fn start_with(
    extra: &str,
    tune: impl FnOnce(&mut Config),
) -> (FakeSignal, FakeLlm, App, tempfile::TempDir) {
    init();
    let fake = FakeSignal::start().await;
    fake.add_group(GROUP, "Ops", &[&alice()]);
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let toml = format!(
        "[signal]\nurl = \"{}\"\naccount = \"{}\"\nallowed_users = [\"{}\"]\n{extra}",
        fake.url(),
        fake.bot().number,
        alice().number
    );
    let mut section = herald::config::from_toml(&toml).expect("a [signal] section");
    let mut c: Config = test_config(&llm, &data);
    c.sections
        .insert("signal".into(), section.sections.remove("signal").unwrap());
    tune(&mut c);
    let app = App::start(c).await.expect("app starts");
    fake.wait_connections(1, WAIT).await;
    (fake, llm, app, data)
}

/// Waits until `chat` shows `n` messages from the bot; returns their texts.
async fn shown(fake: &FakeSignal, chat: &str, n: usize) -> Vec<String> {
    wait_until("signal messages", WAIT, || {
        let got = fake.view(chat).len();
        async move { got >= n }
    })
    .await;
    fake.view(chat).into_iter().map(|m| m.1).collect()
}

#[tokio::test]
async fn a_message_is_answered_once_quoting_it_and_seen_again_it_is_harmless() {
    let (fake, llm, app, _data) = start("").await;
    let ts = fake.dm(&alice(), "hello there");
    assert_eq!(
        shown(&fake, "+15550100001", 1).await,
        ["reply to: hello there"]
    );
    let sent = fake.sent_to("+15550100001");
    assert_eq!(
        sent[0].quote,
        Some((ts, alice().uuid)),
        "the reply quotes the message"
    );
    assert!(
        fake.signalled().iter().any(|s| s.what == "typing"),
        "typing shown"
    );

    // The same envelope again (a reconnect): deduplicated on (author, timestamp).
    assert!(fake.replay(&alice(), ts));
    fake.dm(&alice(), "and again");
    shown(&fake, "+15550100001", 2).await;
    quiet(app.store.as_ref()).await;
    assert_eq!(llm.request_count(), 2, "the replay cost no turn");
    assert_eq!(fake.view("+15550100001").len(), 2);
    app.shutdown().await;
}

#[tokio::test]
async fn a_group_is_answered_on_a_mention_only() {
    let (fake, llm, app, _data) = start("").await;
    let chat = format!("group:{GROUP}");
    fake.group_message(GROUP, &alice(), "lunch anyone?", false);
    fake.group_message(GROUP, &alice(), "what time is it?", true);
    assert_eq!(shown(&fake, &chat, 1).await, ["reply to: what time is it?"]);
    quiet(app.store.as_ref()).await;
    assert_eq!(
        llm.request_count(),
        1,
        "the unaddressed message cost nothing"
    );
    let lane = "signal:group:R3JvdXBPZk9wcyBmb3IgdGhlIHNpZ25hbCB0ZXN0cyE";
    let sessions = app
        .store
        .session_current(&herald::domain::LaneKey::new(lane))
        .await
        .unwrap();
    assert!(sessions.is_some(), "the group is its own lane {lane}");
    app.shutdown().await;
}

#[tokio::test]
async fn a_daemon_that_goes_away_is_retried_and_nothing_is_lost() {
    let (fake, llm, app, _data) = start("").await;
    // The stream drops and the daemon refuses it for a while (as while it restarts).
    fake.set_registered(false);
    fake.drop_streams();
    fake.dm(&alice(), "are you there?");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        llm.request_count(),
        0,
        "nothing can arrive while it is down"
    );
    // Back, but the first two sends fail on the daemon's side.
    fake.fail_next("send", 2, Fault::Status(503));
    fake.set_registered(true);
    assert_eq!(
        shown(&fake, "+15550100001", 1).await,
        ["reply to: are you there?"]
    );
    assert!(fake.connections() >= 2, "the stream was opened again");
    let sends = fake.calls().iter().filter(|c| c.method == "send").count();
    assert_eq!(sends, 3, "two refused, the third delivered");
    app.shutdown().await;
}

#[tokio::test]
async fn a_sticker_is_politely_refused_once_and_a_stranger_gets_nothing_for_it() {
    let (fake, llm, app, _data) = start("").await;
    let ts = fake.sticker(None, &alice());
    let said = shown(&fake, "+15550100001", 1).await;
    assert_eq!(said, [herald::adapters::signal::CANNOT_READ]);
    fake.replay(&alice(), ts);
    let stranger = Person::new("+15550100077", "Stranger");
    fake.sticker(None, &stranger);
    fake.dm(&alice(), "ok, text then");
    shown(&fake, "+15550100001", 2).await;
    quiet(app.store.as_ref()).await;
    assert_eq!(fake.view("+15550100001").len(), 2, "refused once");
    assert!(
        fake.view("+15550100077").is_empty(),
        "a stranger's sticker gets nothing"
    );
    assert_eq!(llm.request_count(), 1);
    app.shutdown().await;
}

#[tokio::test]
async fn a_file_over_the_limit_is_not_fetched() {
    let (fake, llm, app, _data) = start_with("", |c| c.media.max_bytes = 32).await;
    let big = vec![b'x'; 64];
    let file = herald_test_support::fake_signal::File {
        name: "huge.bin",
        mime: "application/octet-stream",
        bytes: &big,
    };
    fake.file_message(None, &alice(), "look", file);
    shown(&fake, "+15550100001", 1).await;
    assert!(
        !fake.calls().iter().any(|c| c.method == "getAttachment"),
        "announced over the limit: not fetched"
    );
    let user = llm.last_request().last_user();
    assert!(user.contains("look"), "{user}");
    app.shutdown().await;
}

#[tokio::test]
async fn doctor_checks_the_daemon_and_the_account() {
    init();
    let fake = FakeSignal::start().await;
    let section = |url: &str| {
        let toml = format!(
            "[signal]\nurl = \"{url}\"\naccount = \"{}\"\n",
            fake.bot().number
        );
        let c = herald::config::from_toml(&toml).unwrap();
        c.section::<herald::adapters::signal::config::SignalConfig>("signal")
            .unwrap()
            .unwrap()
    };
    let ok = herald::adapters::signal::doctor(&section(&fake.url())).await;
    assert_eq!(ok.len(), 2, "{ok:?}");
    assert!(ok.iter().all(|(_, r)| r.is_ok()), "{ok:?}");
    fake.set_registered(false);
    let unregistered = herald::adapters::signal::doctor(&section(&fake.url())).await;
    assert_eq!(unregistered[1].0, "signal.account");
    assert!(unregistered[1].1.is_err(), "{unregistered:?}");
    let down = herald::adapters::signal::doctor(&section("http://127.0.0.1:9")).await;
    assert_eq!(down[0].0, "signal.url");
    assert!(
        down[0].1.as_ref().unwrap_err().contains("does not answer"),
        "{down:?}"
    );
}

#[tokio::test]
async fn a_reaction_on_the_question_answers_it_and_the_question_shows_the_outcome() {
    use herald_test_support::fake_llm::Step;
    let skills = tempfile::tempdir().unwrap();
    let dir = skills.path().to_path_buf();
    let (fake, llm, app, _data) = start_with("", |c| {
        c.agent.skills_dir = Some(dir);
        c.tools.require_approval = vec!["skill_manage".into()];
    })
    .await;
    let args = serde_json::json!({"action": "create", "name": "reacttriage",
        "description": "Sort bug reports", "body": "1. Label it."});
    llm.push(Step::ToolCall("skill_manage".into(), args.to_string()));
    fake.dm(&alice(), "make a triage skill");
    let question = herald_test_support::harness::wait_for("the question", WAIT, async || {
        fake.sent_to("+15550100001")
            .into_iter()
            .find(|s| s.message.contains(herald::lanes::ASK_IN_WORDS))
            .map(|s| s.timestamp)
    })
    .await;
    fake.react(None, &alice(), "✅", &fake.bot(), question);
    wait_until("the reply", WAIT, || {
        let done = fake
            .view("+15550100001")
            .iter()
            .any(|m| m.1 == "reply to: make a triage skill");
        async move { done }
    })
    .await;
    assert!(skills.path().join(".proposed").join("reacttriage").exists());
    let texts: Vec<String> = fake.view("+15550100001").into_iter().map(|m| m.1).collect();
    assert!(texts.contains(&"Approved.".to_string()), "{texts:?}");
    assert!(
        !texts
            .iter()
            .any(|t| t.contains(herald::lanes::ASK_IN_WORDS)),
        "the question was edited into its outcome: {texts:?}"
    );
    assert_eq!(
        llm.request_count(),
        2,
        "the reaction was no message for the agent"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn with_edits_off_a_streamed_answer_arrives_whole() {
    use herald_test_support::fake_llm::Step;
    let (fake, llm, app, _data) = start_with("edits = false\n", |c| {
        c.streaming.enabled = Some(true);
        c.streaming.edit_interval_ms = 300;
    })
    .await;
    let answer: Vec<String> = (0..120).map(|i| format!("word{i}")).collect();
    let answer = answer.join(" ");
    llm.push(Step::stream(&answer, 20, Duration::from_millis(30)));
    fake.dm(&alice(), "tell me a story");
    assert_eq!(shown(&fake, "+15550100001", 1).await, [answer]);
    quiet(app.store.as_ref()).await;
    assert_eq!(fake.edits(), 0, "nothing edited");
    assert_eq!(fake.view("+15550100001").len(), 1);
    app.shutdown().await;
}
