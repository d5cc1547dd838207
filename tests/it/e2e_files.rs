//! Files a tool produced reach the model and the person: the real core with the test MCP
//! server (`shop__chart` answers a PNG image part), the fake model scripted to call it and then
//! `attach_file`, and the person on the real teloxide client against the fake Bot API, on the
//! real serenity client against the fake Discord, or on the web chat. What is checked is what a
//! person receives (one photo, the right bytes, once), what the model was shown (the image as a
//! part only when it sees), that another lane's file cannot be attached, and that a SIGKILL
//! between the upload and `mark_sent` costs at most the documented one resend.

use std::time::Duration;

use herald::app::App;
use herald::config::Secret;
use herald_test_support::fake_discord::FakeDiscord;
use herald_test_support::fake_llm::{FakeLlm, Recorded, Step};
use herald_test_support::fake_telegram::Fault;
use herald_test_support::harness::Client;
use herald_test_support::harness::{free_port, init, quiet, quiet_at, test_config, wait_until};
use herald_test_support::herald::{write_config, Herald};
use herald_test_support::mcp::{
    chart, chart_then_attach, shop_ready, shop_with_starts, short_id as short,
};
use herald_test_support::telegram::{fakes, tg_config, TOKEN, USER};

const WAIT: Duration = Duration::from_secs(30);

/// Whether a request carries an image part (a user message with an `image_url` content part).
fn carries_image(r: &Recorded) -> bool {
    r.messages().iter().any(|m| {
        m["content"]
            .as_array()
            .is_some_and(|parts| parts.iter().any(|p| p["type"] == "image_url"))
    })
}

/// The tool result the model read for `tool`'s call, in request `r`.
fn tool_text(r: &Recorded, n: usize) -> String {
    r.messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .nth(n)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// The body of a GET, as bytes.
async fn get_bytes(client: &Client, path: &str) -> (u16, Vec<u8>) {
    let r = reqwest::get(format!("{}{path}", client.base))
        .await
        .unwrap();
    (r.status().as_u16(), r.bytes().await.unwrap().to_vec())
}

async fn telegram_photo_turn(vision: bool) {
    let (tg, llm, data) = fakes().await;
    let mut c = tg_config(&tg, &llm, &data);
    c.mcp.servers = vec![shop_with_starts(data.path())];
    c.llm.vision = vision;
    let app = App::start(c).await.expect("app starts");
    shop_ready(data.path()).await;

    chart_then_attach(&llm, "sales", "Here is your chart.");
    tg.push_private_text(USER, USER, "chart my sales");
    let sent = tg.wait_for_sent(1, WAIT).await;
    wait_until("the photo", WAIT, || async { !tg.uploads().is_empty() }).await;
    quiet(app.store.as_ref()).await;

    assert_eq!(sent[0].text, "Here is your chart.");
    let uploads = tg.uploads();
    assert_eq!(uploads.len(), 1, "exactly one photo: {uploads:?}");
    assert_eq!(uploads[0].method, "sendPhoto");
    assert_eq!(uploads[0].chat_id, USER);
    assert_eq!(
        uploads[0].bytes,
        chart("sales"),
        "the tool's bytes, unchanged"
    );
    assert_eq!(
        uploads[0].file_name,
        format!("{}.png", short(&chart("sales")))
    );
    assert_eq!(tg.sent_messages().len(), 1, "the text once, no more");

    let reqs = llm.requests();
    assert_eq!(reqs.len(), 3);
    let told = tool_text(&reqs[1], 0);
    assert!(told.starts_with("here is the chart\n"), "{told}");
    let line = format!(
        "\n[file {}: image from shop__chart (image/png",
        short(&chart("sales"))
    );
    assert!(told.contains(&line), "{told}");
    assert_eq!(
        carries_image(&reqs[1]),
        vision,
        "image part only for a model that sees"
    );
    if !vision {
        assert!(told.contains("this model cannot see it"), "{told}");
    }
    assert!(tool_text(&reqs[2], 1).contains("will be sent with your reply"));
    app.shutdown().await;
}

#[tokio::test]
async fn a_tool_image_reaches_a_seeing_model_and_the_person_once_over_telegram() {
    telegram_photo_turn(true).await;
}

#[tokio::test]
async fn without_vision_the_model_reads_a_line_and_the_person_still_gets_the_photo() {
    telegram_photo_turn(false).await;
}

#[tokio::test]
async fn a_tool_image_arrives_as_one_discord_attachment() {
    init();
    let fake = FakeDiscord::start("fake-token").await;
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut c = test_config(&llm, &data);
    c.discord.token = Some(Secret::new("fake-token"));
    c.discord.api_url = fake.api_url().parse().unwrap();
    c.discord.ratelimiter = false;
    c.discord.allowed_users = vec!["42".into()];
    c.mcp.servers = vec![shop_with_starts(data.path())];
    let app = App::start(c).await.expect("app starts");
    fake.wait_ready(WAIT).await;
    shop_ready(data.path()).await;

    chart_then_attach(&llm, "q3", "Your chart.");
    fake.dispatch_message_create(900, None, 42, "chart q3", false, None);
    fake.wait_for_sent(2, WAIT).await;
    quiet(app.store.as_ref()).await;
    let sent = fake.sent_messages();
    assert_eq!(sent.len(), 2, "the text, then the file: {sent:?}");
    assert_eq!(sent[0].content, "Your chart.");
    assert!(sent[0].files.is_empty());
    assert_eq!(sent[1].files.len(), 1);
    assert_eq!(sent[1].files[0].bytes, chart("q3"));
    assert_eq!(
        sent[1].files[0].file_name,
        format!("{}.png", short(&chart("q3")))
    );
    app.shutdown().await;
}

#[tokio::test]
async fn another_lanes_file_cannot_be_attached_and_the_web_serves_a_file_to_its_lane_only() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut c = test_config(&llm, &data);
    c.mcp.servers = vec![shop_with_starts(data.path())];
    let app = App::start(c).await.expect("app starts");
    shop_ready(data.path()).await;
    let client = Client::new(&app);

    chart_then_attach(&llm, "alice", "Alice's chart.");
    let (status, body) = client.chat("web:alice", "chart").await;
    assert_eq!(status, 200, "{body}");
    let sha = herald::media::sha256_hex(&chart("alice"));

    // Bob's agent knows the id (and even the whole hash): it finds nothing.
    for id in [short(&chart("alice")), sha.clone()] {
        llm.push(Step::ToolCall(
            "attach_file".into(),
            format!(r#"{{"file":"{id}"}}"#),
        ));
        llm.push(Step::Reply("Nothing to send.".into()));
        let (status, _) = client.chat("web:bob", "send me alice's chart").await;
        assert_eq!(status, 200);
        let told = llm.requests().last().unwrap().last_tool_result();
        assert_eq!(
            told,
            format!("error: there is no file {id} in this conversation")
        );
    }
    quiet(app.store.as_ref()).await;
    let rows = app.store.outbox_recent(20).await.unwrap();
    let files: Vec<_> = rows.iter().filter(|r| r.media.is_some()).collect();
    assert_eq!(files.len(), 1, "only Alice's reply carries a file");
    assert_eq!(files[0].lane.as_str(), "web:alice");

    let (status, bytes) = get_bytes(&client, &format!("/api/v1/lanes/web:alice/media/{sha}")).await;
    assert_eq!(status, 200);
    assert_eq!(bytes, chart("alice"));
    let (status, _) = get_bytes(&client, &format!("/api/v1/lanes/web:bob/media/{sha}")).await;
    assert_eq!(status, 404, "not Bob's file");
    app.shutdown().await;
}

#[tokio::test]
async fn a_sigkill_between_the_upload_and_mark_sent_resends_the_file_at_most_once() {
    let (tg, llm, data) = fakes().await;
    let port = free_port();
    let servers = format!(
        "[[mcp.servers]]\nname = \"shop\"\ncommand = \"python3\"\nargs = [{:?}, \"--mode\", \"normal\", \"--starts\", {:?}]\n",
        herald_test_support::mcp::script().display().to_string(),
        data.path().join("starts").display().to_string()
    );
    let file = write_config(
        data.path(),
        &format!("127.0.0.1:{port}"),
        &llm.base_url(),
        &servers,
    );
    let spawn = || {
        Herald::serve_config(&file, port)
            .fast_leases()
            .env("HERALD_TELEGRAM__TOKEN", TOKEN)
            .env("HERALD_TELEGRAM__API_URL", tg.url())
            .env("HERALD_TELEGRAM__MODE", "polling")
            .env("HERALD_TELEGRAM__ALLOW_ALL_USERS", "true")
            .env("HERALD_PAIRING__ENABLED", "false")
            .env("HERALD_TELEGRAM__POLL_TIMEOUT_SECS", "1")
            // Asserts unstreamed sends (one message per answer).
            .env("HERALD_STREAMING__ENABLED", "false")
            .env("HERALD_LOG__LEVEL", "warn")
            .spawn()
    };
    let mut first = spawn();
    first.wait_ready(WAIT).await;
    // The upload is taken, and the answer never comes while this process lives.
    tg.fail_next("sendPhoto", Fault::AnswerLate(Duration::from_secs(120)));
    shop_ready(data.path()).await;
    chart_then_attach(&llm, "kill", "Chart coming.");
    tg.push_private_text(USER, USER, "chart, then die");
    wait_until("the upload reached Telegram", WAIT, || async {
        !tg.uploads().is_empty()
    })
    .await;
    first.kill();

    let mut second = spawn();
    second.wait_ready(WAIT).await;
    // The killed replica's claim is taken over once its liveness lease lapses.
    wait_until("the resend", Duration::from_secs(40), || async {
        tg.uploads().len() >= 2
    })
    .await;
    quiet_at(data.path()).await;
    let uploads = tg.uploads();
    assert_eq!(
        uploads.len(),
        2,
        "the documented window: one resend, no more"
    );
    assert!(uploads.iter().all(|u| u.bytes == chart("kill")));
    let texts: Vec<_> = tg
        .sent_messages()
        .into_iter()
        .filter(|m| m.text == "Chart coming.")
        .collect();
    assert_eq!(texts.len(), 1, "the text went once");
    assert_eq!(llm.request_count(), 3, "the turn ran once");
    second.kill();
}
