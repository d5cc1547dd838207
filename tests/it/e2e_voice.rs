//! Spoken replies (`[voice]`) over the real teloxide client and the fake Bot API: a voice
//! note, transcribed by the fake speech-to-text endpoint, is answered with the reply's text
//! and a Telegram voice message (`sendVoice`) holding exactly the bytes the fake speech API
//! made for that text (`response_format = "opus"`); a typed message gets text only;
//! `reply_with_voice = "never"` is honoured; a failing speech API leaves the text reply alone;
//! `/voice on` makes a conversation's typed messages spoken too, `/voice off` stops it. Each
//! reply is sent once (the outbox settles with nothing left).

use std::time::Duration;

use herald::app::App;
use herald::config::{Config, ConfigUrl, PriceConfig, ReplyWithVoice};
use herald_test_support::db::Db;
use herald_test_support::fake_llm::FakeLlm;
use herald_test_support::fake_stt::{FakeStt, SttStep};
use herald_test_support::fake_telegram::{FakeTelegram, Media};
use herald_test_support::fake_tts::{audio_for, FakeTts, TtsStep};
use herald_test_support::harness::{quiet, wait_until};
use herald_test_support::telegram::{fakes, tg_config, USER};

const WAIT: Duration = Duration::from_secs(30);

fn config(
    tg: &FakeTelegram,
    llm: &FakeLlm,
    stt: &FakeStt,
    tts: &FakeTts,
    data: &tempfile::TempDir,
) -> Config {
    let mut c = tg_config(tg, llm, data);
    c.media.transcription_url = Some(ConfigUrl::parse(&stt.base_url()).unwrap());
    c.voice.tts_url = Some(ConfigUrl::parse(&tts.base_url()).unwrap());
    c.voice.tts_model = "tts-1".into();
    c.voice.voice = "nova".into();
    c
}

/// A voice note saying `said`, as the person sends it.
fn voice_note(tg: &FakeTelegram, stt: &FakeStt, id: &str, said: &str) {
    let ogg = b"OggS\x00\x02person's voice".to_vec();
    tg.add_file(id, &ogg);
    stt.push(SttStep::Transcript(said.into()));
    tg.push_media(
        USER,
        USER,
        &Media::Voice {
            file_id: id.into(),
            size: ogg.len() as u64,
            duration: 2,
        },
    );
}

async fn uploads_reach(tg: &FakeTelegram, n: usize) {
    wait_until(&format!("{n} upload(s)"), WAIT, || async {
        tg.uploads().len() >= n
    })
    .await;
}

async fn a_voice_note_is_answered_by_a_voice_message_with_its_text(db: Db) {
    let (tg, llm, data) = fakes().await;
    let (stt, tts) = (FakeStt::start().await, FakeTts::start().await);
    let mut c = config(&tg, &llm, &stt, &tts, &data);
    // Speech priced per character: 15 per million characters spoken.
    c.budget.prices = vec![PriceConfig {
        model: "tts-*".into(),
        input: Some(15.0),
        output: None,
        cache_read: None,
        cache_write: None,
    }];
    db.apply(&mut c);
    let app = App::start(c).await.unwrap();

    voice_note(&tg, &stt, "v1", "when does the ferry leave");
    let sent = tg.wait_for_sent(1, WAIT).await;
    let reply = "reply to: [a voice message, transcribed]: when does the ferry leave";
    assert_eq!(sent[0].text, reply);
    uploads_reach(&tg, 1).await;
    let up = &tg.uploads()[0];
    assert_eq!(up.method, "sendVoice");
    assert_eq!(up.chat_id, USER);
    assert_eq!(
        up.bytes,
        audio_for(reply),
        "the speech API's bytes are the voice file"
    );
    let asked = tts.requests();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].body["input"], reply);
    assert_eq!(asked[0].body["response_format"], "opus");
    assert_eq!(asked[0].body["model"], "tts-1");
    assert_eq!(asked[0].body["voice"], "nova");
    // The speech is in the ledger, priced by the characters spoken, paid by the person.
    let rows = app.store.spend_rows(0).await.unwrap();
    let speech: Vec<_> = rows.iter().filter(|r| r.model == "tts-1").collect();
    assert_eq!(speech.len(), 1, "{rows:?}");
    let chars = reply.chars().count() as i64;
    assert_eq!(speech[0].fresh_input, chars);
    assert_eq!(
        speech[0].cost,
        Some(chars * 15_000),
        "15 per million characters"
    );
    assert_eq!(
        speech[0].person.as_deref(),
        Some(format!("telegram-{USER}").as_str())
    );

    // A typed message is answered with text only.
    tg.push_private_text(USER, USER, "and in winter?");
    tg.wait_for_sent(2, WAIT).await;
    quiet(app.store.as_ref()).await;
    assert_eq!(tg.uploads().len(), 1);
    assert_eq!(tts.requests().len(), 1);

    // `/voice on`: typed messages are spoken too; `/voice off` stops it.
    tg.push_private_text(USER, USER, "/voice on");
    let sent = tg.wait_for_sent(3, WAIT).await;
    assert!(
        sent[2].text.starts_with("Spoken replies are on"),
        "{}",
        sent[2].text
    );
    tg.push_private_text(USER, USER, "read it to me");
    tg.wait_for_sent(4, WAIT).await;
    uploads_reach(&tg, 2).await;
    assert_eq!(tg.uploads()[1].bytes, audio_for("reply to: read it to me"));
    tg.push_private_text(USER, USER, "/voice off");
    tg.wait_for_sent(5, WAIT).await;
    voice_note(&tg, &stt, "v2", "quietly now");
    tg.wait_for_sent(6, WAIT).await;
    quiet(app.store.as_ref()).await;
    assert_eq!(tg.uploads().len(), 2, "no voice after /voice off");
    assert_eq!(tg.sent_messages().len(), 6, "every text sent once");
    app.shutdown().await;
}

herald_test_support::on_each_backend!(
    a_voice_note_is_answered_by_a_voice_message_with_its_text_sqlite,
    a_voice_note_is_answered_by_a_voice_message_with_its_text_postgres,
    a_voice_note_is_answered_by_a_voice_message_with_its_text
);

#[tokio::test]
async fn never_means_text_only_and_a_failing_speech_api_falls_back_to_text() {
    let (tg, llm, data) = fakes().await;
    let (stt, tts) = (FakeStt::start().await, FakeTts::start().await);
    let mut c = config(&tg, &llm, &stt, &tts, &data);
    c.voice.reply_with_voice = ReplyWithVoice::Never;
    let app = App::start(c).await.unwrap();
    voice_note(&tg, &stt, "v1", "say it");
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert_eq!(
        sent[0].text,
        "reply to: [a voice message, transcribed]: say it"
    );
    quiet(app.store.as_ref()).await;
    assert!(tg.uploads().is_empty());
    assert!(tts.requests().is_empty(), "the speech API was not asked");
    app.shutdown().await;

    let (tg, llm, data) = fakes().await;
    let (stt, tts) = (FakeStt::start().await, FakeTts::start().await);
    tts.push(TtsStep::Status(500, "the voice model is overloaded".into()));
    let mut c = config(&tg, &llm, &stt, &tts, &data);
    c.voice.timeout_secs = 1;
    let app = App::start(c).await.unwrap();
    voice_note(&tg, &stt, "v1", "say it");
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert_eq!(
        sent[0].text,
        "reply to: [a voice message, transcribed]: say it"
    );
    quiet(app.store.as_ref()).await;
    assert_eq!(tts.requests().len(), 1, "asked once");
    assert!(tg.uploads().is_empty(), "no voice file after a failure");
    assert_eq!(tg.sent_messages().len(), 1);

    // A speech API slower than voice.timeout_secs: the text goes alone, as soon as it gives up.
    tts.push(TtsStep::Delay(Duration::from_secs(20)));
    voice_note(&tg, &stt, "v2", "say it slowly");
    let sent = tg.wait_for_sent(2, Duration::from_secs(10)).await;
    assert_eq!(
        sent[1].text,
        "reply to: [a voice message, transcribed]: say it slowly"
    );
    quiet(app.store.as_ref()).await;
    assert_eq!(tts.requests().len(), 2);
    assert!(tg.uploads().is_empty(), "no voice file after a timeout");
    app.shutdown().await;
}
