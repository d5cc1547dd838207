//! Files both ways: a file a person shares is fetched with the bot token (the fake serves a
//! login page without it) and read by the media path; a file the agent attaches (the test MCP
//! server's chart) goes out by Slack's external upload, into the thread; a file over
//! `media.max_bytes` gets a reply that says so and is never downloaded.

use herald_test_support::fake_llm::Step;
use herald_test_support::harness::wait_until;
use herald_test_support::mcp::stdio_server;

use super::{fakes, posts_in, slack_config, start, USER, WAIT};

#[tokio::test]
async fn a_file_in_is_fetched_with_the_bot_token_and_read() {
    let (fake, llm, data) = fakes().await;
    let app = start(slack_config(&fake, &llm, &data, "")).await;
    fake.wait_connected(WAIT).await;
    let dm = fake.dm_channel(USER);
    let bytes = b"The launch code is tangerine.\n".to_vec();
    fake.file_message(
        &dm,
        USER,
        "what does this say?",
        "notes.txt",
        "text/plain",
        &bytes,
    );
    let posts = posts_in(&fake, &dm, 1).await;
    assert!(
        posts[0].text.starts_with("reply to: what does this say?"),
        "{}",
        posts[0].text
    );
    let seen = serde_json::to_string(&llm.requests()[0].messages()).unwrap();
    assert!(
        seen.contains("notes.txt") && seen.contains("tangerine"),
        "the model read the file: {seen}"
    );
    let fetches = fake.file_fetches();
    assert_eq!(fetches.len(), 1, "fetched once: {fetches:?}");
    assert!(fetches[0].authorized, "with the bot token");
    app.shutdown().await;
}

/// The bytes the test MCP server's `shop__chart` answers for `label`.
fn chart(label: &str) -> Vec<u8> {
    let mut b = b"\x89PNG\r\n\x1a\n".to_vec();
    b.extend(format!("chart:{label}").as_bytes());
    b
}

#[tokio::test]
async fn a_file_the_agent_attaches_is_uploaded_into_the_thread() {
    let (fake, llm, data) = fakes().await;
    let mut c = slack_config(&fake, &llm, &data, "");
    let starts = data.path().join("starts");
    c.mcp.servers = vec![stdio_server(
        "shop",
        "normal",
        &["--starts", &starts.display().to_string()],
    )];
    let app = start(c).await;
    fake.wait_connected(WAIT).await;
    wait_until("the shop server lists its tools", WAIT, || {
        let ready = std::fs::read_to_string(&starts).is_ok_and(|s| !s.is_empty());
        async move { ready }
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let sha = herald::media::sha256_hex(&chart("sales"));
    llm.push(Step::ToolCall(
        "shop__chart".into(),
        r#"{"label":"sales"}"#.into(),
    ));
    llm.push(Step::ToolCall(
        "attach_file".into(),
        format!(r#"{{"file":"{}"}}"#, &sha[..12]),
    ));
    llm.push(Step::Reply("Here is your chart.".into()));
    fake.add_channel("CSALES001", "sales");
    let top = fake.mention("CSALES001", USER, "chart my sales");
    let posts = posts_in(&fake, "CSALES001", 1).await;
    assert_eq!(posts[0].text, "Here is your chart.");
    wait_until("the upload", WAIT, || {
        let n = fake.uploads().len();
        async move { n >= 1 }
    })
    .await;
    let uploads = fake.uploads();
    assert_eq!(uploads.len(), 1, "one file: {uploads:?}");
    assert_eq!(
        uploads[0].bytes,
        chart("sales"),
        "the tool's bytes, unchanged"
    );
    assert_eq!(uploads[0].channel.as_deref(), Some("CSALES001"));
    assert_eq!(
        uploads[0].thread_ts.as_deref(),
        Some(top.as_str()),
        "in the thread"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn a_file_over_the_cap_gets_a_reply_that_says_so() {
    let (fake, llm, data) = fakes().await;
    let mut c = slack_config(&fake, &llm, &data, "");
    c.media.max_bytes = 1024;
    let app = start(c).await;
    fake.wait_connected(WAIT).await;
    let dm = fake.dm_channel(USER);
    fake.file_message(
        &dm,
        USER,
        "",
        "big.bin",
        "application/pdf",
        &vec![b'x'; 4096],
    );
    let posts = posts_in(&fake, &dm, 1).await;
    let text = &posts[0].text;
    assert!(
        text.contains("big.bin") && text.contains("over the 1.0 KB limit"),
        "{text}"
    );
    assert!(
        fake.file_fetches().is_empty(),
        "an announced oversize file is not downloaded"
    );
    app.shutdown().await;
}
