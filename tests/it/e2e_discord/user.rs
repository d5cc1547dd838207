//! Discord, as a user meets it (issue 15): a media-only message is answered, not dropped; a
//! slash command from a sender approved through pairing runs like a typed one; a refused
//! sender's `/stop` stops nothing. Same harness as the parent file.

use std::time::Duration;

use serde_json::json;

use super::{bounded, start, CHANNEL, DM, GUILD, STRANGER, USER, WAIT};
use herald_test_support::fake_discord::payloads::{message, MessageParts};
use herald_test_support::fake_llm::Step;

#[tokio::test]
async fn an_unreachable_image_and_a_sticker_each_get_an_answer() {
    bounded("media", async {
        let env = start(|_| {}).await;
        let mut m = message(MessageParts {
            id: 9_000_001,
            channel_id: DM,
            guild_id: None,
            author_id: USER,
            content: "",
            mentions: vec![],
            reference: None,
        });
        m["attachments"] = json!([{
            "id": "5001", "filename": "cat.png", "size": 1024,
            "url": "https://cdn.example/cat.png", "proxy_url": "https://cdn.example/cat.png",
            "content_type": "image/png", "width": 10, "height": 10
        }]);
        env.fake.dispatch("MESSAGE_CREATE", m.clone());
        m["id"] = json!("9000002");
        m["attachments"] = json!([]);
        m["sticker_items"] = json!([{"id": "7001", "name": "wave", "format_type": 1}]);
        env.fake.dispatch("MESSAGE_CREATE", m);
        let sent = env.sent_settled(2).await;
        assert_eq!(sent.len(), 2, "{sent:?}");
        // The image's URL cannot be fetched here: Herald says so itself, without the model.
        assert!(
            sent[0]
                .content
                .starts_with("I could not read a photo (cat.png): the download failed"),
            "{}",
            sent[0].content
        );
        // A sticker is named to the model, which answers it.
        assert_eq!(sent[1].content, "reply to: [a sticker (wave)]");
        assert_eq!(env.llm.request_count(), 1);
        env.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_paired_sender_runs_slash_commands_and_a_refused_stop_stops_nothing() {
    bounded("slash auth", async {
        let env = start(|_| {}).await;
        env.fake
            .wait_for("slash commands registered", WAIT, |f| {
                (f.registered_commands().len() >= 4).then_some(())
            })
            .await;
        // The stranger asks in a DM, gets a code, and the operator approves it.
        env.fake
            .dispatch_message_create(DM + 1, None, STRANGER, "let me in", false, None);
        env.fake.wait_for_sent(1, WAIT).await;
        let store = env.app().store.clone();
        let code = store.pairing_pending().await.unwrap()[0].code.clone();
        store.pairing_approve("discord", &code).await.unwrap();
        // They are told, and what they wrote while waiting is answered.
        let sent = env.sent_settled(3).await;
        assert_eq!(
            sent[1].content,
            "You are approved: you can talk to me now. I am answering what you wrote."
        );
        assert_eq!(sent[2].content, "reply to: let me in");

        let (_, token) =
            env.fake
                .dispatch_interaction_create(DM + 1, None, STRANGER, "status", &[]);
        // One answer: the deferred response edited into the status, no channel message.
        let answer = env
            .fake
            .wait_for("the answer", WAIT, |f| {
                f.followups().into_iter().find(|x| x.token == token)
            })
            .await;
        assert_eq!(answer.method, "PATCH");
        assert_eq!(answer.target.as_deref(), Some("@original"));
        let text = answer.body["content"].as_str().unwrap_or_default();
        assert!(text.starts_with("Session "), "{text}");
        tokio::time::sleep(Duration::from_millis(500)).await;
        let answers: Vec<_> = env
            .fake
            .followups()
            .into_iter()
            .filter(|x| x.token == token)
            .collect();
        assert_eq!(answers.len(), 1, "{answers:?}");
        let sent = env.sent_settled(3).await;
        assert_eq!(sent.len(), 3, "{sent:?}");

        // A turn runs in the guild channel; someone not allowed tries to stop it.
        env.llm.push(Step::Delay(
            Duration::from_millis(1_500),
            Box::new(Step::Reply("the long answer".into())),
        ));
        env.fake.dispatch_message_create(
            CHANNEL,
            Some(GUILD),
            USER,
            &format!(
                "<@{}> think hard",
                herald_test_support::fake_discord::BOT_USER_ID
            ),
            true,
            None,
        );
        let llm = env.llm.clone();
        env.fake
            .wait_for("the turn to start", WAIT, move |_| {
                (llm.request_count() >= 2).then_some(())
            })
            .await;
        let (_, token) =
            env.fake
                .dispatch_interaction_create(CHANNEL, Some(GUILD), STRANGER + 1, "stop", &[]);
        let ack = env
            .fake
            .wait_for("the refusal", WAIT, |f| {
                f.followups().into_iter().find(|x| x.token == token)
            })
            .await;
        assert_eq!(ack.body["content"], "You are not allowed to use this bot.");
        let sent = env.sent_settled(4).await;
        assert_eq!(sent[3].content, "the long answer", "{sent:?}");
        env.stop().await;
    })
    .await;
}

/// `/stop` as a slash command while a turn runs: one answer (the deferred response edited into
/// "Stopped."), and the stopped turn sends nothing to the channel.
#[tokio::test]
async fn a_slash_stop_answers_once() {
    bounded("slash stop", async {
        let env = start(|_| {}).await;
        env.fake
            .wait_for("slash commands registered", WAIT, |f| {
                (f.registered_commands().len() >= 4).then_some(())
            })
            .await;
        env.llm.push(Step::Delay(
            Duration::from_secs(8),
            Box::new(Step::Reply("never sent".into())),
        ));
        env.fake
            .dispatch_message_create(DM, None, USER, "think slowly", false, None);
        let llm = env.llm.clone();
        env.fake
            .wait_for("the turn to start", WAIT, move |_| {
                (llm.request_count() >= 1).then_some(())
            })
            .await;
        let (_, token) = env
            .fake
            .dispatch_interaction_create(DM, None, USER, "stop", &[]);
        let answer = env
            .fake
            .wait_for("the answer", WAIT, |f| {
                f.followups().into_iter().find(|x| x.token == token)
            })
            .await;
        assert_eq!(answer.target.as_deref(), Some("@original"));
        assert_eq!(answer.body["content"], "Stopped.");
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        assert_eq!(env.fake.followups().len(), 1, "{:?}", env.fake.followups());
        assert!(
            env.fake.sent_messages().is_empty(),
            "{:?}",
            env.fake.sent_messages()
        );
        env.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_photo_from_the_cdn_reaches_a_model_that_sees() {
    bounded("discord photo", async {
        let env = start(|c| c.llm.vision = true).await;
        // A real 10x10 PNG: the decode worker reads its header before a model sees it.
        let png = herald_test_support::hostile::png(10, 10);
        let file = env.fake.add_cdn_file("cat.png", "image/png", &png);
        env.fake.dispatch_message_with_files(
            DM,
            None,
            USER,
            "what breed?",
            std::slice::from_ref(&file),
            &[],
        );
        let sent = env.sent_settled(1).await;
        assert_eq!(
            sent[0].content,
            "reply to: what breed?\n\n[a photo (cat.png)]"
        );
        let images = env.llm.last_request().images();
        let want = format!(
            "data:image/png;base64,{}",
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &png)
        );
        assert_eq!(images.len(), 1);
        assert_eq!(images[0].1, want);
        assert_eq!(env.fake.cdn_downloads(file.id), 1);
        env.stop().await;
    })
    .await;
}
