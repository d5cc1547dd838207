//! End to end through the Slack adapter: the real core, our reqwest Web API client and the
//! Socket Mode websocket against the fake Slack (`test-support/src/fake_slack`) and the fake
//! model, SQLite in a temp dir. Every wait is bounded.

mod events_api;
mod files;
mod limits;
mod once;
mod stream;

use std::time::Duration;

use herald::app::App;
use herald::config::Config;
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::fake_slack::{FakeSlack, FakeSlackConfig, Post};
use herald_test_support::harness::{init, test_config, wait_until};
use serde_json::json;

pub const WAIT: Duration = Duration::from_secs(20);
/// The person on the allowlist, and a second allowed one.
pub const USER: &str = "UALICE001";
pub const OTHER: &str = "UBOB00002";

pub async fn fakes() -> (FakeSlack, FakeLlm, tempfile::TempDir) {
    init();
    (
        FakeSlack::start(FakeSlackConfig::default()).await,
        FakeLlm::start().await,
        tempfile::tempdir().expect("temp dir"),
    )
}

/// The test config with `[slack]` on the fake (Socket Mode), `USER` and `OTHER` allowed, and
/// `extra` lines added to the section.
pub fn slack_config(
    fake: &FakeSlack,
    llm: &FakeLlm,
    data: &tempfile::TempDir,
    extra: &str,
) -> Config {
    let cfg = fake.config();
    let toml = format!(
        "[slack]\nbot_token = \"{}\"\napp_token = \"{}\"\nsigning_secret = \"{}\"\n\
         api_url = \"{}\"\nallowed_users = [\"{USER}\", \"{OTHER}\"]\n{extra}",
        cfg.bot_token,
        cfg.app_token,
        cfg.signing_secret,
        fake.api_url()
    );
    let mut section = herald::config::from_toml(&toml).expect("a [slack] section");
    let mut c = test_config(llm, data);
    let table = section.sections.remove("slack").expect("the slack table");
    c.sections.insert("slack".into(), table);
    c
}

pub async fn start(c: Config) -> App {
    App::start(c).await.expect("app starts")
}

/// Posts in `channel`, waiting until there are `n`.
pub async fn posts_in(fake: &FakeSlack, channel: &str, n: usize) -> Vec<Post> {
    wait_until("slack posts", WAIT, || {
        let got = fake.posted_in(channel).len();
        async move { got >= n }
    })
    .await;
    fake.posted_in(channel)
}

#[tokio::test]
async fn a_dm_is_answered_once_and_a_replayed_event_is_harmless() {
    let (fake, llm, data) = fakes().await;
    let app = start(slack_config(&fake, &llm, &data, "")).await;
    fake.wait_connected(WAIT).await;
    let ts = fake.dm(USER, "hello there & welcome");
    let dm = fake.dm_channel(USER);
    let posts = posts_in(&fake, &dm, 1).await;
    assert_eq!(posts[0].text, "reply to: hello there &amp; welcome");
    assert_eq!(
        posts[0].thread_ts, None,
        "a DM is answered in the DM itself"
    );
    assert!(
        posts[0].metadata_key().is_some(),
        "the post carries its outbox key"
    );
    let model_saw: Vec<String> = llm.requests().iter().map(|r| r.last_user()).collect();
    assert_eq!(model_saw, ["hello there & welcome"]);

    // The same message again, as a fresh delivery (a replay): one answer still.
    fake.send_event(
        json!({"type": "message", "channel": dm, "channel_type": "im",
        "user": USER, "text": "hello there & welcome", "ts": ts, "event_ts": ts}),
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        fake.posted_in(&dm).len(),
        1,
        "a replay is not answered again"
    );
    assert_eq!(llm.request_count(), 1);
    assert!(
        fake.pending_envelopes() == 0,
        "every envelope was acknowledged"
    );

    // Someone off the allowlist is refused, and the model never sees them.
    fake.dm("USTRANGER", "let me in");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(llm.request_count(), 1, "an unknown sender reaches no model");
    app.shutdown().await;
}

#[tokio::test]
async fn a_channel_mention_is_answered_in_its_thread_and_chatter_is_not() {
    let (fake, llm, data) = fakes().await;
    fake.add_channel("CGENERAL1", "general");
    let app = start(slack_config(&fake, &llm, &data, "")).await;
    fake.wait_connected(WAIT).await;
    fake.channel_message("CGENERAL1", USER, "just chatting among humans", None);
    let top = fake.mention("CGENERAL1", USER, "what time is it");
    let posts = posts_in(&fake, "CGENERAL1", 1).await;
    assert_eq!(
        posts[0].thread_ts.as_deref(),
        Some(top.as_str()),
        "answered in the thread"
    );
    assert_eq!(posts[0].text, "reply to: what time is it");
    // A follow-up in the thread is the same conversation.
    fake.mention_in_thread("CGENERAL1", OTHER, "and tomorrow?", &top);
    let posts = posts_in(&fake, "CGENERAL1", 2).await;
    assert_eq!(posts[1].thread_ts.as_deref(), Some(top.as_str()));
    let inputs: Vec<String> = llm.requests().iter().map(|r| r.last_user()).collect();
    assert_eq!(
        inputs,
        ["what time is it", "and tomorrow?"],
        "chatter never reached the model"
    );
    let second = &llm.requests()[1];
    assert!(
        second
            .messages()
            .iter()
            .any(|m| m["content"] == "what time is it"),
        "the thread's earlier message is in the same session"
    );
    // Bot messages (ours echoed back, or another bot's) are never answered.
    fake.bot_message("CGENERAL1", "BOTHER0001", "<@UBOT0001> hello bot");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(llm.request_count(), 2);
    app.shutdown().await;
}

#[tokio::test]
async fn an_approval_counts_only_the_requesters_click_and_closes_the_question() {
    let (fake, llm, data) = fakes().await;
    std::fs::create_dir_all(data.path().join("skills")).unwrap();
    let mut c = slack_config(&fake, &llm, &data, "");
    c.tools.require_approval = vec!["skill_manage".into()];
    let app = start(c).await;
    fake.wait_connected(WAIT).await;
    fake.add_channel("CTEAM0001", "team");
    let args = json!({"action": "create", "name": "triage", "description": "Sort bug reports",
        "body": "1. Label it."});
    llm.push(Step::ToolCall("skill_manage".into(), args.to_string()));
    let top = fake.mention("CTEAM0001", USER, "make a triage skill");
    let question = {
        let posts = posts_in(&fake, "CTEAM0001", 1).await;
        posts
            .into_iter()
            .find(|p| !p.buttons().is_empty())
            .expect("a question with buttons")
    };
    assert_eq!(
        question.thread_ts.as_deref(),
        Some(top.as_str()),
        "asked in the thread"
    );
    assert!(question.text.contains("skill_manage"), "{}", question.text);
    let buttons = question.buttons();
    assert_eq!(buttons.len(), 2);
    let (approve, deny) = (&buttons[0], &buttons[1]);
    assert_eq!(approve.text, "Approve");
    assert_eq!(deny.text, "Deny");

    // Someone else allowed in the channel presses Approve: it does not count.
    fake.click(
        "CTEAM0001",
        &question.ts,
        OTHER,
        &approve.action_id,
        approve.value.as_deref().unwrap(),
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !data.path().join("skills/.proposed/triage").exists(),
        "not approved by another"
    );
    // The requester approves: the tool runs and the question loses its buttons.
    fake.click(
        "CTEAM0001",
        &question.ts,
        USER,
        &approve.action_id,
        approve.value.as_deref().unwrap(),
    );
    wait_until("the approved tool ran", WAIT, || {
        let done = data.path().join("skills/.proposed/triage").exists();
        async move { done }
    })
    .await;
    wait_until("the question closed", WAIT, || {
        let closed = fake.edits().iter().any(|e| {
            e.ts == question.ts
                && e.blocks
                    .as_ref()
                    .is_some_and(|b| b.as_array().is_some_and(|a| a.is_empty()))
        });
        async move { closed }
    })
    .await;
    app.shutdown().await;
}

#[tokio::test]
async fn slash_commands_map_to_the_shared_commands() {
    let (fake, llm, data) = fakes().await;
    let app = start(slack_config(&fake, &llm, &data, "")).await;
    fake.wait_connected(WAIT).await;
    let dm = fake.dm_channel(USER);
    fake.dm(USER, "hi");
    posts_in(&fake, &dm, 1).await;
    fake.slash("/herald", "usage", USER, &dm);
    let posts = posts_in(&fake, &dm, 2).await;
    assert!(
        posts[1].text.starts_with("Your spending today"),
        "a usage answer: {}",
        posts[1].text
    );
    assert_eq!(
        llm.request_count(),
        1,
        "a command is handled by the core, not the model"
    );
    app.shutdown().await;
}
