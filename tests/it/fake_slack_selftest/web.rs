//! The Web API side of the fake: tokens, scopes, rate limits, the chat methods' refusals, and
//! history with and without metadata.

use serde_json::json;

use super::{call, call_form, start};

#[tokio::test]
async fn tokens_are_checked_as_slack_checks_them() {
    let fake = start().await;
    let bot = fake.config().bot_token.clone();
    let good = call(&fake, "auth.test", Some(&bot), json!({})).await;
    assert_eq!(good.status, 200);
    assert_eq!(good.body["ok"], true);
    assert_eq!(good.body["user_id"], "UBOT0001");
    assert_eq!(good.body["bot_id"], "BBOT0001");
    assert_eq!(good.body["team_id"], fake.config().team_id);
    let scopes = good.headers["x-oauth-scopes"].to_str().unwrap().to_string();
    assert!(scopes.split(',').any(|s| s == "chat:write"), "{scopes}");

    let wrong = call(&fake, "auth.test", Some("xoxb-not-ours"), json!({})).await;
    assert_eq!(
        (wrong.status, wrong.body["error"].clone()),
        (200, json!("invalid_auth"))
    );
    let none = call(&fake, "auth.test", None, json!({})).await;
    assert_eq!(none.body["error"], "not_authed");
    // A JSON body's token is not read: only the header counts.
    let in_body = call(&fake, "auth.test", None, json!({"token": bot})).await;
    assert_eq!(in_body.body["error"], "not_authed");
    let form = call_form(&fake, "auth.test", &[("token", &bot)]).await;
    assert_eq!(form.body["ok"], true);
    let app = fake.config().app_token.clone();
    let app_call = call(&fake, "auth.test", Some(&app), json!({})).await;
    assert_eq!(app_call.body["error"], "not_allowed_token_type");

    fake.revoke(&bot);
    let revoked = call(&fake, "auth.test", Some(&bot), json!({})).await;
    assert_eq!(revoked.body["error"], "token_revoked");
    fake.restore(&bot);

    fake.drop_scope("chat:write");
    fake.add_channel("C0GENERAL", "general");
    let args = json!({"channel": "C0GENERAL", "text": "hello"});
    let missing = call(&fake, "chat.postMessage", Some(&bot), args).await;
    assert_eq!(missing.body["error"], "missing_scope");
    assert_eq!(missing.body["needed"], "chat:write");
    let scopes = missing.headers["x-oauth-scopes"].to_str().unwrap();
    assert!(!scopes.split(',').any(|s| s == "chat:write"), "{scopes}");

    let unknown = call(&fake, "chat.postMessages", Some(&bot), json!({})).await;
    assert_eq!(unknown.body["error"], "unknown_method");
    let calls = fake.all_calls();
    assert_eq!(calls.len(), 9);
    assert_eq!(calls[1].error.as_deref(), Some("invalid_auth"));

    // JSON without a charset is served with Slack's warning.
    let bare: serde_json::Value = reqwest::Client::new()
        .post(format!("{}/auth.test", fake.api_url()))
        .bearer_auth(&bot)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(bare["ok"], true);
    assert_eq!(
        bare["response_metadata"]["warnings"],
        json!(["missing_charset"])
    );
    assert!(good.body.get("warning").is_none());
}

#[tokio::test]
async fn a_rate_limit_answers_429_with_retry_after_then_lets_calls_through() {
    let fake = start().await;
    let bot = fake.config().bot_token.clone();
    fake.add_channel("C0GENERAL", "general");
    fake.rate_limit("chat.postMessage", 1, 2);
    let args = json!({"channel": "C0GENERAL", "text": "one"});
    let limited = call(&fake, "chat.postMessage", Some(&bot), args.clone()).await;
    assert_eq!(limited.status, 429);
    assert_eq!(limited.headers["retry-after"], "2");
    assert_eq!(limited.body, json!({"ok": false, "error": "ratelimited"}));
    assert!(fake.posted().is_empty(), "a limited call posts nothing");

    let through = call(&fake, "chat.postMessage", Some(&bot), args).await;
    assert_eq!(through.body["ok"], true);
    let calls = fake.calls("chat.postMessage");
    assert_eq!(
        calls.iter().map(|c| c.status).collect::<Vec<_>>(),
        [429, 200]
    );
    assert!(calls[1].at >= calls[0].at);
    assert_eq!(fake.posted().len(), 1);
}

#[tokio::test]
async fn chat_methods_refuse_what_slack_refuses() {
    let fake = start().await;
    let bot = fake.config().bot_token.clone();
    fake.add_channel("C0GENERAL", "general");
    fake.add_channel("C0OTHER", "other");
    fake.set_bot_member("C0OTHER", false);
    let post = |args: serde_json::Value| call(&fake, "chat.postMessage", Some(&bot), args);

    let cases = [
        (
            json!({"channel": "C0NOWHERE", "text": "x"}),
            "channel_not_found",
        ),
        (json!({"channel": "C0OTHER", "text": "x"}), "not_in_channel"),
        (json!({"channel": "C0GENERAL"}), "no_text"),
        (
            json!({"channel": "C0GENERAL", "text": "x".repeat(40_001)}),
            "msg_too_long",
        ),
        (
            json!({"channel": "C0GENERAL", "text": "x", "metadata": {"event_payload": {}}}),
            "invalid_metadata_format",
        ),
    ];
    for (args, code) in cases {
        let a = post(args).await;
        assert_eq!((a.status, a.body["error"].clone()), (200, json!(code)));
    }
    let at_limit = post(json!({"channel": "C0GENERAL", "text": "y".repeat(40_000)})).await;
    assert_eq!(at_limit.body["ok"], true);

    let one = post(json!({"channel": "C0GENERAL", "text": "first"})).await;
    let two = post(json!({"channel": "C0GENERAL", "text": "second"})).await;
    let (t1, t2) = (
        one.body["ts"].as_str().unwrap(),
        two.body["ts"].as_str().unwrap(),
    );
    assert!(
        t1 < t2 && t1.len() == "1700000000.000100".len(),
        "{t1} {t2}"
    );
    assert_eq!(one.body["message"]["bot_id"], "BBOT0001");
    assert_eq!(one.body["channel"], "C0GENERAL");

    let person = fake.channel_message("C0GENERAL", "U0CAROL", "mine", None);
    let edit = |ts: &str| json!({"channel": "C0GENERAL", "ts": ts, "text": "changed"});
    let theirs = call(&fake, "chat.update", Some(&bot), edit(&person)).await;
    assert_eq!(theirs.body["error"], "cant_update_message");
    let nowhere = call(&fake, "chat.update", Some(&bot), edit("1.000001")).await;
    assert_eq!(nowhere.body["error"], "message_not_found");
    let updated = call(&fake, "chat.update", Some(&bot), edit(t1)).await;
    assert_eq!(updated.body["ok"], true);
    assert_eq!(fake.edits()[0].text, "changed");

    let del = json!({"channel": "C0GENERAL", "ts": t2});
    let gone = call(&fake, "chat.delete", Some(&bot), del.clone()).await;
    assert_eq!(gone.body["ok"], true);
    let twice = call(&fake, "chat.delete", Some(&bot), del).await;
    assert_eq!(twice.body["error"], "message_not_found");
    assert_eq!(fake.deletes().len(), 1);

    // Form encoding: the token and structured arguments as strings.
    let form = call_form(
        &fake,
        "chat.postMessage",
        &[
            ("token", &bot),
            ("channel", "C0GENERAL"),
            ("text", "by form"),
            ("blocks", "[]"),
        ],
    )
    .await;
    assert_eq!(form.body["ok"], true, "{}", form.body);
    assert_eq!(fake.posted().last().unwrap().text, "by form");
}

#[tokio::test]
async fn history_shows_metadata_only_when_asked_and_threads_in_order() {
    let fake = start().await;
    let bot = fake.config().bot_token.clone();
    fake.add_channel("C0GENERAL", "general");
    let parent = fake.mention("C0GENERAL", "U0DAVE", "question");
    let metadata = json!({"event_type": "herald_outbox", "event_payload": {"key": "k-1"}});
    let args = json!({"channel": "C0GENERAL", "text": "answer", "thread_ts": parent, "metadata": metadata});
    let reply = call(&fake, "chat.postMessage", Some(&bot), args).await;
    let reply_ts = reply.body["ts"].as_str().unwrap().to_string();
    let top = call(
        &fake,
        "chat.postMessage",
        Some(&bot),
        json!({"channel": "C0GENERAL", "text": "later", "metadata": metadata}),
    )
    .await;
    assert_eq!(fake.posted()[0].metadata_key().as_deref(), Some("k-1"));

    let plain = call(
        &fake,
        "conversations.history",
        Some(&bot),
        json!({"channel": "C0GENERAL"}),
    )
    .await;
    let msgs = plain.body["messages"].as_array().unwrap();
    // Newest first, thread replies not at the top level.
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[0]["ts"], top.body["ts"]);
    assert_eq!(msgs[1]["ts"], parent.as_str());
    assert_eq!(msgs[1]["reply_count"], 1);
    assert!(msgs.iter().all(|m| m.get("metadata").is_none()), "{msgs:?}");

    let url = format!(
        "{}/conversations.history?channel=C0GENERAL&include_all_metadata=true&limit=1",
        fake.api_url()
    );
    let with = reqwest::Client::new()
        .get(url)
        .bearer_auth(&bot)
        .send()
        .await
        .unwrap();
    let with: serde_json::Value = with.json().await.unwrap();
    assert_eq!(with["messages"].as_array().unwrap().len(), 1);
    assert_eq!(with["has_more"], true);
    assert_eq!(with["messages"][0]["metadata"], metadata);

    let thread = json!({"channel": "C0GENERAL", "ts": parent, "include_all_metadata": true});
    let replies = call(&fake, "conversations.replies", Some(&bot), thread).await;
    let msgs = replies.body["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 2, "{msgs:?}");
    assert_eq!(msgs[0]["ts"], parent.as_str());
    assert_eq!(msgs[1]["ts"], reply_ts.as_str());
    assert_eq!(msgs[1]["metadata"]["event_payload"]["key"], "k-1");
    assert_eq!(msgs[1]["parent_user_id"], "U0DAVE");
    let hidden = call(
        &fake,
        "conversations.replies",
        Some(&bot),
        json!({"channel": "C0GENERAL", "ts": parent}),
    )
    .await;
    assert!(hidden.body["messages"][1].get("metadata").is_none());

    let user = call(&fake, "users.info", Some(&bot), json!({"user": "U0DAVE"})).await;
    assert_eq!(user.body["user"]["real_name"], "User U0DAVE");
    fake.add_user("U0DAVE", "dave", "Dave Lister");
    let user = call_form(&fake, "users.info", &[("token", &bot), ("user", "U0DAVE")]).await;
    assert_eq!(user.body["user"]["profile"]["real_name"], "Dave Lister");
    let info = call(
        &fake,
        "conversations.info",
        Some(&bot),
        json!({"channel": "C0GENERAL"}),
    )
    .await;
    assert_eq!(info.body["channel"]["name"], "general");
}

#[tokio::test]
async fn the_control_endpoints_inject_and_list() {
    let fake = start().await;
    let bot = fake.config().bot_token.clone();
    let http = reqwest::Client::new();
    let injected: serde_json::Value = http
        .post(format!("{}/_fake/events", fake.base_url()))
        .json(&json!({"channel": "C0RANDOM", "user": "U0KIM", "text": "from outside"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(injected["ok"], true);
    let ts = injected["ts"].as_str().unwrap();
    assert_eq!(
        fake.channel_view("C0RANDOM"),
        [(
            ts.to_string(),
            "U0KIM".to_string(),
            "from outside".to_string()
        )]
    );
    assert_eq!(
        fake.pending_envelopes(),
        1,
        "delivered like a person's message"
    );

    let args = json!({"channel": "C0RANDOM", "text": "seen", "thread_ts": ts});
    call(&fake, "chat.postMessage", Some(&bot), args).await;
    let posted: serde_json::Value = http
        .get(format!("{}/_fake/posted", fake.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(posted["posts"][0]["text"], "seen");
    assert_eq!(posted["posts"][0]["thread_ts"], ts);
    assert_eq!(posted["edits"], json!([]));
}
