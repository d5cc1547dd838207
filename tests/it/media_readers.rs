//! The readers of issue #29: the real `Transcriber` against the fake speech-to-text server
//! (the form it sends, each way the endpoint can fail, the key in no error), and real PDFs
//! (written by test-support's lopdf writer) through `read_document`.

use std::time::{Duration, Instant};

use herald::config::{Config, ConfigUrl, Secret};
use herald::media::decode::{JobKind, Outcome, WireFormat};
use herald::media::{read_document, Decoder, DocFormat, MediaError, Transcriber};
use herald_test_support::fake_stt::{FakeStt, SttStep};
use herald_test_support::{harness, pdf};

const KEY: &str = "sk-test-0123456789abcdef";
const OGG: &[u8] = b"OggS\0\x02\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0OpusHead\x01\x01";

fn config(base_url: &str) -> Config {
    harness::init();
    let mut c = Config::default();
    c.llm.base_url = Some(ConfigUrl::parse(base_url).unwrap());
    c.llm.api_key = Some(Secret::new(KEY));
    c.llm.timeout_secs = 5;
    c
}

fn transcriber(stt: &FakeStt) -> Transcriber {
    Transcriber::from_config(&config(&stt.base_url())).expect("a transcriber")
}

/// The error's text, checked free of the key before any test looks at it.
fn error_text(result: Result<String, MediaError>) -> String {
    let err = result.expect_err("an error");
    assert!(matches!(err, MediaError::Transcription(_)), "{err:?}");
    let text = err.to_string();
    assert!(!text.contains(KEY), "the key leaked: {text}");
    assert!(!text.contains("0123456789abcdef"), "the key leaked: {text}");
    text
}

#[tokio::test]
async fn a_voice_note_becomes_its_transcript_with_the_form_openai_expects() {
    let stt = FakeStt::start().await;
    stt.push(SttStep::Transcript(
        "  Hello, can you remind me at five?\n".into(),
    ));
    let mut c = config(&stt.base_url());
    c.media.transcription_model = "whisper-large-v3".into();
    let t = Transcriber::from_config(&c).unwrap();
    let text = t.transcribe(OGG, "audio/ogg", "voice.ogg").await.unwrap();
    assert_eq!(text, "Hello, can you remind me at five?");
    let reqs = stt.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(r.model.as_deref(), Some("whisper-large-v3"));
    assert_eq!(r.response_format.as_deref(), Some("json"));
    assert_eq!(r.file_name.as_deref(), Some("voice.ogg"));
    assert_eq!(r.content_type.as_deref(), Some("audio/ogg"));
    assert_eq!((r.size, r.bytes.as_slice()), (OGG.len(), OGG));
    assert_eq!(r.auth.as_deref(), Some(format!("Bearer {KEY}").as_str()));
    assert!(r.other_fields.is_empty(), "{:?}", r.other_fields);
}

#[tokio::test]
async fn the_transcription_url_wins_over_the_models_base_url() {
    let stt = FakeStt::start().await;
    let mut c = config("http://127.0.0.1:9/v1");
    c.media.transcription_url = Some(ConfigUrl::parse(&stt.base_url()).unwrap());
    let t = Transcriber::from_config(&c).unwrap();
    let text = t
        .transcribe(b"ID3\x04\0", "audio/mpeg", "a.mp3")
        .await
        .unwrap();
    assert_eq!(text, "transcript of a.mp3");
    assert_eq!(stt.requests().len(), 1);
    assert!(Transcriber::from_config(&Config::default()).is_none());
}

#[tokio::test]
async fn an_empty_transcript_is_ok_and_empty() {
    let stt = FakeStt::start().await;
    stt.push(SttStep::Transcript(" ".into()));
    assert_eq!(
        transcriber(&stt)
            .transcribe(OGG, "audio/ogg", "v.ogg")
            .await,
        Ok(String::new())
    );
}

#[tokio::test]
async fn a_rejected_file_names_the_status_and_the_reason_without_the_key() {
    let stt = FakeStt::start().await;
    let body = format!(
        r#"{{"error":{{"message":"Invalid file format. Supported: flac, mp3, ogg. (key {KEY})"}}}}"#
    );
    stt.push(SttStep::Status(400, body));
    let text = error_text(
        transcriber(&stt)
            .transcribe(b"junk", "audio/ogg", "v.ogg")
            .await,
    );
    assert!(text.contains("rejected the audio"), "{text}");
    assert!(text.contains("400"), "{text}");
    assert!(text.contains("Invalid file format"), "{text}");
}

#[tokio::test]
async fn a_server_error_is_a_failure_naming_the_status() {
    let stt = FakeStt::start().await;
    stt.push(SttStep::Status(
        503,
        format!("upstream down; Authorization: Bearer {KEY}"),
    ));
    let text = error_text(
        transcriber(&stt)
            .transcribe(OGG, "audio/ogg", "v.ogg")
            .await,
    );
    assert!(text.contains("503"), "{text}");
    assert!(!text.contains("rejected"), "{text}");
}

#[tokio::test]
async fn a_slow_endpoint_times_out_at_the_deadline() {
    let stt = FakeStt::start().await;
    stt.push(SttStep::Delay(
        Duration::from_secs(10),
        Box::new(SttStep::Transcript("too late".into())),
    ));
    let mut c = config(&stt.base_url());
    c.llm.timeout_secs = 1;
    let t = Transcriber::from_config(&c).unwrap();
    let started = Instant::now();
    let text = error_text(t.transcribe(OGG, "audio/ogg", "v.ogg").await);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(text.contains("did not answer within 1 s"), "{text}");
}

#[tokio::test]
async fn a_garbage_answer_is_not_a_transcript() {
    let stt = FakeStt::start().await;
    stt.push(SttStep::Garbage(format!(
        "<html>proxy echo: authorization=Bearer {KEY}; api_key={KEY}</html>"
    )));
    let text = error_text(
        transcriber(&stt)
            .transcribe(OGG, "audio/ogg", "v.ogg")
            .await,
    );
    assert!(text.contains("not a transcript"), "{text}");
    assert!(text.contains("<html>proxy echo"), "{text}");
}

#[tokio::test]
async fn an_endpoint_that_is_not_there_cannot_be_reached() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let c = config(&format!("http://127.0.0.1:{port}/v1"));
    let t = Transcriber::from_config(&c).unwrap();
    let text = error_text(t.transcribe(OGG, "audio/ogg", "v.ogg").await);
    assert!(text.contains("cannot reach it"), "{text}");
}

fn pages(n: usize) -> Vec<String> {
    (1..=n)
        .map(|p| format!("Page {p} heading\nThe quarterly figures for region {p} rose."))
        .collect()
}

#[test]
fn a_pdf_gives_its_text_in_page_order() {
    let bytes = pdf::text_pdf(&pages(3));
    let doc = read_document(&bytes, Some("application/pdf"), Some("report.pdf"), 10_000)
        .unwrap()
        .unwrap();
    assert_eq!(doc.format, DocFormat::Pdf);
    assert!(!doc.truncated);
    let at = |s: &str| {
        doc.text
            .find(s)
            .unwrap_or_else(|| panic!("{s:?} in {:?}", doc.text))
    };
    assert!(at("Page 1 heading") < at("Page 2 heading"));
    assert!(at("Page 2 heading") < at("Page 3 heading"));
    assert!(
        doc.text.contains("figures for region 3 rose"),
        "{}",
        doc.text
    );
    assert_eq!(doc.total_chars, doc.text.chars().count());
}

#[test]
fn a_pdf_is_known_by_its_bytes_and_cut_at_the_budget() {
    let bytes = pdf::text_pdf(&pages(4));
    let doc = read_document(&bytes, Some("application/octet-stream"), Some("scan"), 30)
        .unwrap()
        .unwrap();
    assert_eq!((doc.format, doc.truncated), (DocFormat::Pdf, true));
    assert_eq!(doc.text.chars().count(), 30);
    assert!(doc.total_chars > 100, "{}", doc.total_chars);
}

#[test]
fn a_pdf_without_a_text_layer_is_ok_and_empty() {
    let doc = read_document(&pdf::empty_page_pdf(), None, Some("scan.pdf"), 100)
        .unwrap()
        .unwrap();
    assert_eq!((doc.text.as_str(), doc.total_chars), ("", 0));
}

#[test]
fn an_encrypted_pdf_is_ok_and_empty() {
    let bytes = pdf::encrypted_pdf(&pages(1), "user-secret");
    let doc = read_document(&bytes, None, Some("locked.pdf"), 100)
        .unwrap()
        .unwrap();
    assert_eq!(doc.format, DocFormat::Pdf);
    assert_eq!(doc.text, "", "the text of a locked PDF came out");
    // The same encryption with an empty user password opens: the writer encrypts for real,
    // and the reader tries the empty password.
    let open = pdf::encrypted_pdf(&pages(1), "");
    let doc = read_document(&open, None, Some("open.pdf"), 100)
        .unwrap()
        .unwrap();
    assert!(doc.text.contains("Page 1 heading"), "{:?}", doc.text);
}

#[test]
fn a_cut_off_pdf_is_corrupt() {
    let bytes = pdf::text_pdf(&pages(2));
    let err = read_document(&bytes[..bytes.len() / 3], None, Some("half.pdf"), 100).unwrap_err();
    assert!(matches!(err, MediaError::Corrupt(_)), "{err:?}");
    assert!(err.to_string().contains("not a readable PDF"), "{err}");
}

#[tokio::test]
async fn a_pdf_is_read_in_the_isolated_worker() {
    // The daemon's path: the real `herald decode` child beside this test binary.
    let decoder = Decoder::from_config(&Config::default());
    let bytes = pdf::text_pdf(&pages(2));
    let outcome = decoder
        .decode(JobKind::Document, &bytes, Some("application/pdf"), None)
        .await
        .expect("read");
    let Outcome::Document { format, text, .. } = outcome else {
        panic!("not a document: {outcome:?}");
    };
    assert_eq!(format, WireFormat::Pdf);
    assert!(text.contains("Page 2 heading"), "{text}");
}
