//! Files both ways: a file a person shares is fetched with the bot token (the fake serves a
//! login page without it) and read by the media path; a file the agent attaches goes out by
//! Slack's external upload; a file over `media.max_bytes` gets a reply that says so.

use herald_test_support::fake_llm::Step;

use super::{fakes, posts_in, slack_config, start, USER, WAIT};
use herald_test_support::harness::wait_until;

#[tokio::test]
async fn a_file_in_is_read_and_a_file_out_is_uploaded() {
    let (fake, llm, data) = fakes().await;
    let app = start(slack_config(&fake, &llm, &data, "")).await;
    fake.wait_connected(WAIT).await;
    let dm = fake.dm_channel(USER);
    let bytes = b"The launch code is tangerine.\n".to_vec();
    let sha = herald::media::sha256_hex(&bytes);
    // The model answers by sending the same file back.
    llm.push(Step::ToolCall(
        "attach_file".into(),
        format!(r#"{{"file":"{}"}}"#, &sha[..12]),
    ));
    llm.push(Step::Reply("Here it is back.".into()));
    fake.file_message(&dm, USER, "what does this say?", "notes.txt", "text/plain", &bytes);
    let posts = posts_in(&fake, &dm, 1).await;
    assert_eq!(posts.last().unwrap().text, "Here it is back.");
    let first = &llm.requests()[0];
    let seen = serde_json::to_string(&first.messages()).unwrap();
    assert!(seen.contains("tangerine"), "the model read the file: {seen}");
    assert!(
        fake.file_fetches().iter().all(|f| f.authorized),
        "every fetch carried the bot token"
    );
    wait_until("the upload", WAIT, || {
        let n = fake.uploads().len();
        async move { n >= 1 }
    })
    .await;
    let up = &fake.uploads()[0];
    assert_eq!(up.bytes, bytes);
    assert_eq!(up.channel.as_deref(), Some(dm.as_str()));
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
    fake.file_message(&dm, USER, "", "big.bin", "application/pdf", &vec![b'x'; 4096]);
    let posts = posts_in(&fake, &dm, 1).await;
    let text = posts[0].text.to_lowercase();
    assert!(text.contains("too large") || text.contains("larger"), "{text}");
    assert!(fake.file_fetches().is_empty(), "an announced oversize file is not downloaded");
    app.shutdown().await;
}
