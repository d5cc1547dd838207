//! Slack saying no: a 429 is waited out for its Retry-After and nothing is dropped; a token
//! revoked while running loses nothing; a wrong token is named by `doctor`.

use std::time::Duration;

use super::{fakes, posts_in, slack_config, start, USER, WAIT};

#[tokio::test]
async fn a_429_is_honoured_and_nothing_is_dropped() {
    let (fake, llm, data) = fakes().await;
    let app = start(slack_config(&fake, &llm, &data, "")).await;
    fake.wait_connected(WAIT).await;
    fake.rate_limit("chat.postMessage", 1, 2);
    let dm = fake.dm_channel(USER);
    fake.dm(USER, "are you there?");
    let posts = posts_in(&fake, &dm, 1).await;
    assert_eq!(posts[0].text, "reply to: are you there?");
    let calls = fake.calls("chat.postMessage");
    assert_eq!(calls[0].status, 429);
    let waited = calls[1].at.duration_since(calls[0].at);
    assert!(waited >= Duration::from_secs(2), "retried after {waited:?}");
    app.shutdown().await;
}

#[tokio::test]
async fn a_token_revoked_while_running_loses_nothing() {
    let (fake, llm, data) = fakes().await;
    let app = start(slack_config(&fake, &llm, &data, "")).await;
    fake.wait_connected(WAIT).await;
    let bot = fake.config().bot_token.clone();
    fake.revoke(&bot);
    let dm = fake.dm_channel(USER);
    fake.dm(USER, "still there?");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(fake.posted_in(&dm).is_empty());
    fake.restore(&bot);
    let posts = posts_in(&fake, &dm, 1).await;
    assert_eq!(posts[0].text, "reply to: still there?");
    app.shutdown().await;
}

#[tokio::test]
async fn doctor_names_a_bad_token_and_a_missing_scope() {
    let (fake, llm, data) = fakes().await;
    let good = slack_config(&fake, &llm, &data, "");
    let section: herald::adapters::slack::config::SlackConfig =
        good.section("slack").unwrap().unwrap();
    let report = herald::adapters::slack::doctor(&section).await;
    assert!(report.iter().all(|(_, r)| r.is_ok()), "{report:?}");

    fake.drop_scope("files:write");
    let report = herald::adapters::slack::doctor(&section).await;
    let scopes = report
        .iter()
        .find(|(l, _)| *l == "slack bot scopes")
        .unwrap();
    assert!(
        scopes.1.as_ref().unwrap_err().contains("files:write"),
        "{scopes:?}"
    );

    let mut wrong = section.clone();
    wrong.bot_token = Some(herald::config::Secret::new("xoxb-not-the-token"));
    wrong.app_token = Some(herald::config::Secret::new("xapp-not-the-token"));
    let report = herald::adapters::slack::doctor(&wrong).await;
    for key in ["slack.bot_token", "slack.app_token"] {
        let (_, r) = report.iter().find(|(l, _)| *l == key).unwrap();
        assert!(
            r.as_ref().unwrap_err().contains("invalid_auth"),
            "{key}: {r:?}"
        );
    }
    let text = format!("{report:?}");
    assert!(
        !text.contains("xoxb-not-the-token"),
        "no token in the report"
    );

    // A token of the wrong kind stops the config load (and so the start), naming the key.
    let err = herald::config::from_toml(&format!(
        "[slack]\nbot_token = \"xapp-1-wrong-kind\"\napp_token = \"{}\"\n",
        fake.config().app_token
    ))
    .expect_err("a wrong kind of token is refused")
    .to_string();
    assert!(err.contains("slack.bot_token"), "{err}");
}

#[tokio::test]
async fn a_token_slack_refuses_stops_the_start_naming_its_key() {
    let (fake, llm, data) = fakes().await;
    let cfg = fake.config().clone();
    for (key, bot, app) in [
        (
            "slack.bot_token",
            "xoxb-revoked-bot",
            cfg.app_token.as_str(),
        ),
        (
            "slack.app_token",
            cfg.bot_token.as_str(),
            "xapp-revoked-app",
        ),
    ] {
        let toml = format!(
            "[slack]\nbot_token = \"{bot}\"\napp_token = \"{app}\"\napi_url = \"{}\"\n\
             allowed_users = [\"{USER}\"]\n",
            fake.api_url()
        );
        let mut section = herald::config::from_toml(&toml).expect("a [slack] section");
        let mut c = herald_test_support::harness::test_config(&llm, &data);
        c.sections
            .insert("slack".into(), section.sections.remove("slack").unwrap());
        let err = match herald::app::App::start(c).await {
            Ok(_) => panic!("{key}: the daemon started with a refused token"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains(key), "{key}: {err}");
        assert!(err.contains("invalid_auth"), "{key}: {err}");
        assert!(!err.contains("revoked-"), "no token in the error: {err}");
    }
    assert!(fake.posted().is_empty());
}
