//! Media reaches the agent (issue 29), end to end over the fake Telegram (with `getFile` and
//! its file server), the fake Discord CDN, the fake speech-to-text endpoint and the fake model:
//! photos become image parts for a model that sees, voice notes become transcripts, documents
//! their text, a sticker a line the model can read; a file over the cap gets Herald's own
//! answer and no model call.

use std::time::Duration;

use base64::Engine;
use herald::app::App;
use herald::config::{Config, ConfigUrl};
use herald::domain::LaneKey;
use herald::store::SearchScope;

use herald_test_support::db::Db;
use herald_test_support::fake_llm::{FakeLlm, Recorded};
use herald_test_support::fake_stt::{FakeStt, SttStep};
use herald_test_support::fake_telegram::{FakeTelegram, Media};
use herald_test_support::pdf::text_pdf;
use herald_test_support::telegram::{fakes, tg_config, USER};

const WAIT: Duration = Duration::from_secs(30);

/// A PNG's signature and header chunk: enough for a sniffer, small enough to compare.
fn png(tag: u8) -> Vec<u8> {
    let mut b = vec![0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];
    b.extend_from_slice(&[
        0, 0, 0, 13, b'I', b'H', b'D', b'R', 0, 0, 0, 1, 0, 0, 0, 1, 8, 2,
    ]);
    b.push(tag);
    b
}

fn data_url(bytes: &[u8]) -> String {
    format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

fn media_config(
    tg: &FakeTelegram,
    llm: &FakeLlm,
    stt: &FakeStt,
    data: &tempfile::TempDir,
) -> Config {
    let mut c = tg_config(tg, llm, data);
    c.llm.vision = true;
    c.media.transcription_url = Some(ConfigUrl::parse(&stt.base_url()).unwrap());
    c.media.max_bytes = 64 * 1024;
    c.media.keep_images_turns = 1;
    c
}

/// Sends `media`, waits for the `n`-th reply, and returns it with the model request that
/// answered it (if the model was asked).
async fn exchange(
    tg: &FakeTelegram,
    llm: &FakeLlm,
    media: Media,
    n: usize,
) -> (String, Option<Recorded>) {
    let asked = llm.request_count();
    tg.push_media(USER, USER, &media);
    let sent = tg.wait_for_sent(n, WAIT).await;
    let request = (llm.request_count() > asked).then(|| llm.last_request());
    (sent[n - 1].text.clone(), request)
}

async fn telegram_media_reaches_the_model(db: Db) {
    let (tg, llm, data) = fakes().await;
    let stt = FakeStt::start().await;
    let mut config = media_config(&tg, &llm, &stt, &data);
    db.apply(&mut config);
    let app = App::start(config).await.unwrap();

    // A captioned photo: the caption, a line naming the photo, and the image itself.
    let first = png(1);
    tg.add_file("photo-1", &first);
    let photo = |id: &str, caption: Option<&str>| Media::Photo {
        file_id: id.into(),
        size: 27,
        caption: caption.map(str::to_string),
    };
    let (reply, req) = exchange(&tg, &llm, photo("photo-1", Some("what is this?")), 1).await;
    assert_eq!(reply, "reply to: what is this?\n\n[a photo]");
    let req = req.expect("the model was asked");
    assert_eq!(req.images().len(), 1);
    assert_eq!(req.images()[0].1, data_url(&first));

    // An uncaptioned photo: the first one is still in view (one later message allowed).
    let second = png(2);
    tg.add_file("photo-2", &second);
    let (reply, req) = exchange(&tg, &llm, photo("photo-2", None), 2).await;
    assert_eq!(reply, "reply to: [a photo]");
    let urls: Vec<String> = req.unwrap().images().into_iter().map(|(_, u)| u).collect();
    assert_eq!(urls, vec![data_url(&first), data_url(&second)]);

    // A voice note is transcribed; the first photo has left the view for its placeholder.
    let ogg = b"OggS\x00\x02fake opus voice note".to_vec();
    tg.add_file("voice-1", &ogg);
    stt.push(SttStep::Transcript("call mum at six".into()));
    let voice = Media::Voice {
        file_id: "voice-1".into(),
        size: ogg.len() as u64,
        duration: 2,
    };
    let (reply, req) = exchange(&tg, &llm, voice, 3).await;
    assert_eq!(
        reply,
        "reply to: [a voice message, transcribed]: call mum at six"
    );
    let req = req.unwrap();
    let urls: Vec<String> = req.images().into_iter().map(|(_, u)| u).collect();
    assert_eq!(
        urls,
        vec![data_url(&second)],
        "only the newer photo is still shown"
    );
    let bodies = serde_json::to_string(req.messages()).unwrap();
    assert!(bodies.contains("it is no longer in view"), "{bodies}");
    let heard = stt.requests();
    assert_eq!(heard.len(), 1);
    assert_eq!(heard[0].model.as_deref(), Some("whisper-1"));
    assert_eq!(heard[0].bytes, ogg);

    // A text document and a PDF: their text reaches the model, named.
    let notes = "# Plan\n- ship the release on Friday\n";
    tg.add_file("doc-1", notes.as_bytes());
    let doc = |id: &str, name: &str, mime: &str, size: usize| Media::Document {
        file_id: id.into(),
        size: size as u64,
        name: name.into(),
        mime: mime.into(),
        caption: None,
    };
    let (_, req) = exchange(
        &tg,
        &llm,
        doc("doc-1", "notes.md", "text/markdown", notes.len()),
        4,
    )
    .await;
    let told = req.unwrap().last_user();
    assert!(
        told.contains("a document (notes.md) (Markdown); its text follows"),
        "{told}"
    );
    assert!(told.contains("- ship the release on Friday"), "{told}");

    let pdf = text_pdf(&["Quarterly revenue grew twelve percent".to_string()]);
    tg.add_file("pdf-1", &pdf);
    let (_, req) = exchange(
        &tg,
        &llm,
        doc("pdf-1", "q3.pdf", "application/pdf", pdf.len()),
        5,
    )
    .await;
    let told = req.unwrap().last_user();
    assert!(told.contains("(PDF); its text follows"), "{told}");
    assert!(
        told.contains("Quarterly revenue grew twelve percent"),
        "{told}"
    );

    // A sticker is a line the model can answer.
    let sticker = Media::Sticker {
        file_id: "st-1".into(),
        emoji: "👍".into(),
        set_name: "Hands".into(),
    };
    let (reply, _) = exchange(&tg, &llm, sticker, 6).await;
    assert!(reply.starts_with("reply to: [a sticker (👍"), "{reply}");

    // Over the cap: Herald answers itself, downloads nothing and asks no model.
    let big = vec![b'x'; 200 * 1024];
    tg.add_file("big-1", &big);
    let asked = llm.request_count();
    let (reply, req) = exchange(
        &tg,
        &llm,
        doc("big-1", "big.txt", "text/plain", big.len()),
        7,
    )
    .await;
    assert!(req.is_none() && llm.request_count() == asked);
    assert_eq!(
        reply,
        "I could not read a document (big.txt): the file is 200.0 KB, over the 64.0 KB limit. \
         Your message is recorded; please send a smaller or different file, or type what you need."
    );
    assert_eq!(tg.downloads("big-1"), 0);

    // What was said in the voice note is what search finds; the photo is kept by reference.
    let lane = LaneKey::new(&format!("telegram:{USER}"));
    let hits = app
        .store
        .search(SearchScope::Lane(&lane), "mum", &[], 5)
        .await
        .unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    let session = app.store.session_current(&lane).await.unwrap().unwrap();
    let rows = app.store.messages(&session.id, true).await.unwrap();
    let first_row = &rows[0];
    assert_eq!(first_row.media.len(), 1);
    assert_eq!(
        first_row.media[0].sha256.as_deref(),
        Some(herald::media::sha256_hex(&first).as_str())
    );
    assert_eq!(rows.last().unwrap().content, reply);
    app.shutdown().await;
    tg.shutdown().await;
}

herald_test_support::on_each_backend!(
    telegram_media_reaches_the_model_sqlite,
    telegram_media_reaches_the_model_postgres,
    telegram_media_reaches_the_model
);

#[tokio::test]
async fn without_vision_the_model_is_told_and_a_failed_transcription_is_answered() {
    let (tg, llm, data) = fakes().await;
    let stt = FakeStt::start().await;
    let mut config = media_config(&tg, &llm, &stt, &data);
    config.llm.vision = false;
    let app = App::start(config).await.unwrap();

    tg.add_file("photo-1", &png(3));
    let photo = Media::Photo {
        file_id: "photo-1".into(),
        size: 27,
        caption: Some("nice, right?".into()),
    };
    let (reply, req) = exchange(&tg, &llm, photo, 1).await;
    let req = req.expect("the model answers");
    assert!(req.images().is_empty());
    assert_eq!(
        reply,
        "reply to: nice, right?\n\n[the person sent a photo; you cannot see images, so say so if it matters]"
    );

    // The endpoint refuses the audio: one clear answer, no model call, the note recorded.
    tg.add_file("voice-1", b"OggS\x00\x02voice");
    stt.push(SttStep::Status(
        400,
        r#"{"error":{"message":"unsupported format"}}"#.into(),
    ));
    let asked = llm.request_count();
    let voice = Media::Voice {
        file_id: "voice-1".into(),
        size: 11,
        duration: 1,
    };
    let (reply, _) = exchange(&tg, &llm, voice, 2).await;
    assert_eq!(llm.request_count(), asked);
    assert!(
        reply.starts_with("I could not read a voice message: the speech-to-text endpoint failed"),
        "{reply}"
    );
    assert!(reply.contains("400"), "{reply}");
    let lane = LaneKey::new(&format!("telegram:{USER}"));
    let session = app.store.session_current(&lane).await.unwrap().unwrap();
    let rows = app.store.messages(&session.id, true).await.unwrap();
    let note = &rows[rows.len() - 2];
    assert_eq!(
        note.media.len(),
        1,
        "the voice note stays recorded by reference"
    );
    app.shutdown().await;
    tg.shutdown().await;
}
