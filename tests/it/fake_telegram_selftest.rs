//! Proves the fake Telegram server against the real teloxide client, so tests built on the fake
//! exercise the same wire format the daemon meets in production.

use std::time::{Duration, Instant};

use herald_test_support::fake_telegram::{FakeTelegram, Fault, BOT_USERNAME};
use serde_json::Value;
use teloxide::prelude::*;
use teloxide::types::{MessageId, ParseMode, ReplyParameters, ThreadId, UpdateKind};
use teloxide::{ApiError, RequestError};

const TOKEN: &str = "123456:TEST-token";

fn bot(fake: &FakeTelegram) -> Bot {
    let url = url::Url::parse(&fake.url()).expect("fake url");
    Bot::new(fake.token()).set_api_url(url)
}

fn message_of(update: &teloxide::types::Update) -> &teloxide::types::Message {
    match &update.kind {
        UpdateKind::Message(m) => m,
        other => panic!("expected a message update, got {other:?}"),
    }
}

#[tokio::test]
async fn get_me_answers_as_the_bot() {
    let fake = FakeTelegram::start(TOKEN).await;
    let me = bot(&fake).get_me().await.expect("getMe");
    assert_eq!(me.username(), BOT_USERNAME);
    assert_eq!(me.id.0, 123456);
    assert!(me.is_bot);
}

#[tokio::test]
async fn a_wrong_token_is_unauthorized() {
    let fake = FakeTelegram::start(TOKEN).await;
    let url = url::Url::parse(&fake.url()).expect("fake url");
    let stranger = Bot::new("999:wrong").set_api_url(url);
    let err = stranger.get_me().await.expect_err("wrong token must fail");
    assert!(
        matches!(err, RequestError::Api(ApiError::InvalidToken)),
        "{err:?}"
    );
}

#[tokio::test]
async fn send_message_is_recorded_with_thread_reply_and_parse_mode() {
    let fake = FakeTelegram::start(TOKEN).await;
    let bot = bot(&fake);
    let first = bot.send_message(ChatId(42), "hello").await.expect("send");
    let second = bot
        .send_message(ChatId(-100777), "*bold* reply")
        .parse_mode(ParseMode::MarkdownV2)
        .message_thread_id(ThreadId(MessageId(7)))
        .reply_parameters(ReplyParameters::new(first.id))
        .await
        .expect("send formatted");
    assert_eq!(second.thread_id, Some(ThreadId(MessageId(7))));
    assert_eq!(second.text(), Some("*bold* reply"));
    assert_eq!(second.reply_to_message().map(|m| m.id), Some(first.id));

    let sent = fake.sent_messages();
    assert_eq!(sent.len(), 2);
    assert_eq!((sent[0].chat_id, sent[0].text.as_str()), (42, "hello"));
    assert_eq!(sent[0].message_id, i64::from(first.id.0));
    assert_eq!(sent[1].chat_id, -100777);
    assert_eq!(sent[1].thread_id, Some(7));
    assert_eq!(sent[1].parse_mode.as_deref(), Some("MarkdownV2"));
    assert_eq!(sent[1].reply_to, Some(i64::from(first.id.0)));
    assert_ne!(sent[0].message_id, sent[1].message_id);
    assert_eq!(fake.calls("SendMessage").len(), 2);
}

#[tokio::test]
async fn long_poll_returns_a_pushed_update_promptly_and_offset_confirms_it() {
    let fake = FakeTelegram::start(TOKEN).await;
    let bot = bot(&fake);
    let poll = tokio::spawn({
        let bot = bot.clone();
        async move { bot.get_updates().timeout(10).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!poll.is_finished(), "an empty long poll must wait");
    let pushed_at = Instant::now();
    let update_id = fake.push_private_text(42, 42, "hi there");
    let updates = poll.await.expect("join").expect("getUpdates");
    assert!(
        pushed_at.elapsed() < Duration::from_secs(2),
        "took {:?}",
        pushed_at.elapsed()
    );
    assert_eq!(updates.len(), 1);
    assert_eq!(i64::from(updates[0].id.0), update_id);
    assert_eq!(message_of(&updates[0]).text(), Some("hi there"));

    // Not confirmed yet: asking from the same id returns it again.
    let again = bot
        .get_updates()
        .offset(update_id as i32)
        .await
        .expect("again");
    assert_eq!(again.len(), 1);
    // Confirmed by a higher offset: gone.
    let after = bot
        .get_updates()
        .offset(update_id as i32 + 1)
        .await
        .expect("after");
    assert!(after.is_empty());
    assert_eq!(fake.pending_updates(), 0);
}

#[tokio::test]
async fn an_empty_long_poll_ends_after_its_timeout() {
    let fake = FakeTelegram::start(TOKEN).await;
    let started = Instant::now();
    let updates = bot(&fake)
        .get_updates()
        .timeout(1)
        .await
        .expect("getUpdates");
    assert!(updates.is_empty());
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_second_poller_ends_the_first_with_a_conflict() {
    let fake = FakeTelegram::start(TOKEN).await;
    let bot = bot(&fake);
    let first = tokio::spawn({
        let bot = bot.clone();
        async move { bot.get_updates().timeout(10).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    bot.get_updates().await.expect("second poll");
    let err = first
        .await
        .expect("join")
        .expect_err("first poll is superseded");
    assert!(
        matches!(
            err,
            RequestError::Api(ApiError::TerminatedByOtherGetUpdates)
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn builders_produce_updates_teloxide_parses() {
    let fake = FakeTelegram::start(TOKEN).await;
    let bot = bot(&fake);
    let ours = bot
        .send_message(ChatId(-100555), "earlier answer")
        .await
        .expect("send");
    let mention = format!("@{BOT_USERNAME}");
    fake.push_group_text(
        -100555,
        7,
        &format!("😀 hey {mention} look"),
        Some(&mention),
    );
    fake.push_topic_text(-100555, 99, 7, "in a topic");
    fake.push_reply(-100555, 7, "about that", i64::from(ours.id.0));

    let updates = bot.get_updates().await.expect("getUpdates");
    assert_eq!(updates.len(), 3);
    let group = message_of(&updates[0]);
    let entities = group.parse_entities().expect("entities");
    assert_eq!(
        entities[0].text(),
        mention,
        "UTF-16 offsets must land on the mention"
    );
    let topic = message_of(&updates[1]);
    assert_eq!(topic.thread_id, Some(ThreadId(MessageId(99))));
    assert!(topic.is_topic_message);
    let reply = message_of(&updates[2]).reply_to_message().expect("reply");
    assert_eq!(reply.id, ours.id);
    assert_eq!(reply.text(), Some("earlier answer"));
    assert!(reply.from.as_ref().is_some_and(|u| u.is_bot));
}

#[tokio::test]
async fn a_queued_retry_after_surfaces_as_teloxide_retry_after() {
    let fake = FakeTelegram::start(TOKEN).await;
    let bot = bot(&fake);
    fake.fail_next("sendMessage", Fault::RetryAfter(1));
    let err = bot
        .send_message(ChatId(42), "one")
        .await
        .expect_err("rate limited");
    assert!(
        matches!(err, RequestError::RetryAfter(s) if s.seconds() == 1),
        "{err:?}"
    );
    assert!(fake.sent_messages().is_empty(), "a 429 sends nothing");
    bot.send_message(ChatId(42), "one")
        .await
        .expect("fault is used up");
    assert_eq!(fake.sent_messages().len(), 1);
}

#[tokio::test]
async fn bad_entities_waits_for_a_formatted_send() {
    let fake = FakeTelegram::start(TOKEN).await;
    let bot = bot(&fake);
    fake.fail_next("sendMessage", Fault::BadEntities);
    bot.send_message(ChatId(42), "plain")
        .await
        .expect("plain passes");
    let err = bot
        .send_message(ChatId(42), "*broken")
        .parse_mode(ParseMode::MarkdownV2)
        .await
        .expect_err("formatted send is rejected");
    assert!(
        matches!(err, RequestError::Api(ApiError::CantParseEntities(_))),
        "{err:?}"
    );
    let sent: Vec<String> = fake.sent_messages().into_iter().map(|m| m.text).collect();
    assert_eq!(sent, ["plain"]);
}

#[tokio::test]
async fn dropped_connections_fail_the_client_with_or_without_delivery() {
    let fake = FakeTelegram::start(TOKEN).await;
    let bot = bot(&fake);
    fake.fail_next("sendMessage", Fault::Drop);
    fake.fail_next("sendMessage", Fault::DropAfterProcessing);
    let lost = bot
        .send_message(ChatId(42), "lost")
        .await
        .expect_err("dropped");
    assert!(matches!(lost, RequestError::Network(_)), "{lost:?}");
    let delivered = bot
        .send_message(ChatId(42), "delivered")
        .await
        .expect_err("dropped");
    assert!(
        matches!(delivered, RequestError::Network(_)),
        "{delivered:?}"
    );
    let sent: Vec<String> = fake.sent_messages().into_iter().map(|m| m.text).collect();
    assert_eq!(sent, ["delivered"], "only the second request was processed");
}

#[tokio::test]
async fn a_delay_fault_holds_the_answer_back() {
    let fake = FakeTelegram::start(TOKEN).await;
    fake.fail_next("getMe", Fault::Delay(Duration::from_millis(300)));
    let started = Instant::now();
    bot(&fake).get_me().await.expect("getMe");
    assert!(started.elapsed() >= Duration::from_millis(300));
}

#[tokio::test]
async fn form_encoded_posts_work() {
    let fake = FakeTelegram::start(TOKEN).await;
    let url = format!("{}/bot{}/sendMessage", fake.url(), fake.token());
    let response = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body("chat_id=-100123&text=via+form+%F0%9F%98%80&message_thread_id=5")
        .send()
        .await
        .expect("post");
    assert!(response.status().is_success());
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["ok"], true);
    assert_eq!(body["result"]["text"], "via form 😀");
    let sent = fake.sent_messages();
    assert_eq!((sent[0].chat_id, sent[0].thread_id), (-100123, Some(5)));
    assert_eq!(sent[0].text, "via form 😀");
}

#[tokio::test]
async fn webhook_methods_and_the_poll_conflict_they_cause() {
    let fake = FakeTelegram::start(TOKEN).await;
    let bot = bot(&fake);
    let hook = url::Url::parse("https://example.test/hook").expect("url");
    bot.set_webhook(hook.clone()).await.expect("setWebhook");
    let info = bot.get_webhook_info().await.expect("getWebhookInfo");
    assert_eq!(info.url, Some(hook));
    let err = bot
        .get_updates()
        .await
        .expect_err("polling while a webhook is set");
    assert!(matches!(err, RequestError::Api(_)), "{err:?}");
    bot.delete_webhook().await.expect("deleteWebhook");
    bot.get_updates().await.expect("polling works again");
    let sent = bot.send_message(ChatId(42), "draft").await.expect("send");
    let edited = bot
        .edit_message_text(ChatId(42), sent.id, "final")
        .await
        .expect("edit");
    assert_eq!(edited.text(), Some("final"));
    assert_eq!(fake.calls("editmessagetext")[0]["text"], "final");
    fake.shutdown().await;
}

#[tokio::test]
async fn media_messages_parse_and_files_download_through_teloxide() {
    use herald_test_support::fake_telegram::Media;
    use teloxide::net::Download;
    let fake = FakeTelegram::start(TOKEN).await;
    let bot = bot(&fake);
    let info = fake.add_file("ph", b"jpeg bytes");
    let media = [
        Media::Photo {
            file_id: "ph".into(),
            size: info.file_size,
            caption: Some("look".into()),
        },
        Media::Voice {
            file_id: "vo".into(),
            size: 10,
            duration: 3,
        },
        Media::Document {
            file_id: "do".into(),
            size: 10,
            name: "a.pdf".into(),
            mime: "application/pdf".into(),
            caption: None,
        },
        Media::Sticker {
            file_id: "st".into(),
            emoji: "😀".into(),
            set_name: "Animals".into(),
        },
        Media::Location {
            latitude: 52.52,
            longitude: 13.405,
        },
        Media::Venue {
            latitude: 1.0,
            longitude: 2.0,
            title: "Gate".into(),
            address: "Square".into(),
        },
        Media::Contact {
            phone: "+44 1".into(),
            first_name: "Ada".into(),
            last_name: Some("Lovelace".into()),
        },
        Media::Poll {
            question: "Lunch?".into(),
            options: vec!["pizza".into(), "sushi".into()],
        },
        Media::Dice {
            emoji: "🎲".into(),
            value: 5,
        },
    ];
    for m in &media {
        fake.push_media(1, 7, m);
    }
    let updates = bot.get_updates().await.expect("getUpdates");
    assert_eq!(updates.len(), media.len());
    let m: Vec<_> = updates.iter().map(message_of).collect();
    let photo = m[0].photo().expect("photo");
    assert_eq!(photo.last().unwrap().file.id.0, "ph");
    assert_eq!(m[0].caption(), Some("look"));
    assert_eq!(m[1].voice().expect("voice").duration.seconds(), 3);
    assert_eq!(m[2].document().unwrap().file_name.as_deref(), Some("a.pdf"));
    assert_eq!(m[3].sticker().unwrap().emoji.as_deref(), Some("😀"));
    assert_eq!(m[4].location().unwrap().latitude, 52.52);
    assert_eq!(m[5].venue().unwrap().title, "Gate");
    assert_eq!(m[6].contact().unwrap().first_name, "Ada");
    assert_eq!(m[7].poll().unwrap().options.len(), 2);
    assert_eq!(m[8].dice().unwrap().value, 5);

    // getFile and the download route, as teloxide uses them.
    let file = bot
        .get_file(photo.last().unwrap().file.id.clone())
        .await
        .expect("getFile");
    assert_eq!(file.path, info.file_path);
    let mut got = Vec::new();
    bot.download_file(&file.path, &mut got)
        .await
        .expect("download");
    assert_eq!(got, b"jpeg bytes");
    assert_eq!(fake.downloads("ph"), 1);
}
