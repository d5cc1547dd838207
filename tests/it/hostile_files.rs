//! Hostile files (issue 52): each is decoded by the isolated `herald decode` worker, refused or
//! survived with one clear line to the person, while another chat goes on being answered.
//! The files are generated here (test-support's `hostile`): a PDF whose form draws itself, a
//! PDF inflating past a gigabyte padded to 20 MB, a .docx zip bomb, a billion-laughs .docx, a
//! PNG claiming 60000x60000, truncated and looping files. The real binary's peak memory is
//! read from /proc; the parent's mapping of a worker's death is checked with stand-in workers.

use std::path::PathBuf;
use std::time::Duration;

use herald::app::App;
use herald::media::decode::{Decoder, JobKind, Limits, Outcome};
use herald::media::MediaError;
use herald_test_support::fake_telegram::{FakeTelegram, Media};
use herald_test_support::harness::{free_port, wait_until};
use herald_test_support::herald::{herald_bin, write_config, Herald};
use herald_test_support::hostile;
use herald_test_support::telegram::{fakes, tg_config, TOKEN, USER};
use herald_test_support::telegram_load::proc::ProcStats;

const WAIT: Duration = Duration::from_secs(60);
/// A second person whose plain text must be answered while the first one's files are read.
const OTHER: i64 = 1002;
const RECORDED: &str =
    " Your message is recorded; please send a smaller or different file, or type what you need.";

fn document(id: &str, name: &str, mime: &str, size: usize) -> Media {
    Media::Document {
        file_id: id.into(),
        size: size as u64,
        name: name.into(),
        mime: mime.into(),
        caption: None,
    }
}

fn photo(id: &str, size: usize) -> Media {
    Media::Photo {
        file_id: id.into(),
        size: size as u64,
        caption: None,
    }
}

/// The latest message the bot sent to `chat` once it has sent `n` there.
async fn reply_in(tg: &FakeTelegram, chat: i64, n: usize) -> String {
    wait_until(&format!("reply {n} in chat {chat}"), WAIT, || async {
        tg.chat_view(chat).len() >= n
    })
    .await;
    tg.chat_view(chat)[n - 1].text.clone()
}

/// Sends `file` from `USER` and text from `OTHER` right after it; returns the reply to the
/// file once both chats have their `n`-th answer.
async fn send_beside_text(tg: &FakeTelegram, bytes: &[u8], media: Media, n: usize) -> String {
    let id = match &media {
        Media::Document { file_id, .. } | Media::Photo { file_id, .. } => file_id.clone(),
        _ => unreachable!(),
    };
    tg.add_file(&id, bytes);
    tg.push_media(USER, USER, &media);
    tg.push_private_text(OTHER, OTHER, &format!("still there? {n}"));
    assert_eq!(
        reply_in(tg, OTHER, n).await,
        format!("reply to: still there? {n}"),
        "the other chat is answered"
    );
    reply_in(tg, USER, n).await
}

#[tokio::test]
async fn hostile_files_get_a_clear_line_and_the_other_chat_is_answered() {
    let (tg, llm, data) = fakes().await;
    let mut config = tg_config(&tg, &llm, &data);
    config.telegram.allowed_users.push(OTHER.to_string());
    config.llm.vision = true;
    config.media.max_bytes = 8 * 1024 * 1024;
    let app = App::start(config).await.unwrap();
    let doc = |id: &str, name: &str, bytes: &[u8]| {
        document(id, name, "application/octet-stream", bytes.len())
    };
    let mut n = 0;
    let mut send = async |bytes: Vec<u8>, media: Media| {
        n += 1;
        send_beside_text(&tg, &bytes, media, n).await
    };

    let pdf = hostile::recursive_form_pdf();
    let reply = send(pdf.clone(), doc("loop", "loop.pdf", &pdf)).await;
    assert_eq!(
        reply,
        format!("I could not read a document (loop.pdf): the file could not be read: it is malformed (a form in it draws itself).{RECORDED}")
    );

    let bomb = hostile::inflate_bomb_pdf(1 << 30, None);
    assert!(bomb.len() < 2 << 20, "a gigabyte from {} bytes", bomb.len());
    let reply = send(bomb.clone(), doc("bomb", "bomb.pdf", &bomb)).await;
    assert_eq!(
        reply,
        format!("I could not read a document (bomb.pdf): it is too large when unpacked (over the 64.0 MB limit).{RECORDED}")
    );

    let zip = hostile::zip_bomb_docx(u32::MAX - (1 << 20));
    let reply = send(zip.clone(), doc("zip", "report.docx", &zip)).await;
    assert_eq!(
        reply,
        format!("I could not read a document (report.docx): it is too large when unpacked (over the 64.0 MB limit).{RECORDED}")
    );

    let laughs = hostile::billion_laughs_docx();
    let reply = send(laughs.clone(), doc("lol", "lol.docx", &laughs)).await;
    assert_eq!(
        reply,
        format!("I could not read a document (lol.docx): the file could not be read: it is malformed (it declares its own XML entities, which Herald does not expand).{RECORDED}")
    );

    let huge = hostile::png_header(60_000, 60_000);
    let reply = send(huge.clone(), photo("huge", huge.len())).await;
    assert_eq!(
        reply,
        format!("I could not read a photo: the image is 60000x60000, over the limit of 50 million pixels.{RECORDED}")
    );

    let cut = hostile::png_header(800, 600)[..12].to_vec();
    let reply = send(cut.clone(), photo("cut", cut.len())).await;
    assert!(
        reply.starts_with("I could not read a photo: the file could not be read: it is malformed (not a readable image"),
        "{reply}"
    );

    let text = herald_test_support::pdf::text_pdf(&["Half a page".to_string()]);
    let half = text[..text.len() / 2].to_vec();
    let reply = send(half.clone(), doc("half", "half.pdf", &half)).await;
    assert!(
        reply.starts_with("I could not read a document (half.pdf): the file could not be read: not a readable PDF"),
        "{reply}"
    );

    let looping = hostile::looping_pages_pdf();
    let reply = send(looping.clone(), doc("tree", "tree.pdf", &looping)).await;
    assert!(
        reply.starts_with("reply to: [the person sent a document (tree.pdf) (PDF); it has no text")
            || reply.starts_with("I could not read a document (tree.pdf)"),
        "{reply}"
    );

    // Ordinary files still reach the model: a .docx as text, a photo byte for byte.
    let word = hostile::text_docx(&["Minutes of Monday", "Ship on Friday &amp; rest"]);
    let asked = llm.request_count();
    send(word.clone(), doc("word", "minutes.docx", &word)).await;
    wait_until("the model read the docx", WAIT, || async {
        llm.requests()
            .iter()
            .skip(asked)
            .any(|r| r.last_user().contains("Ship on Friday & rest"))
    })
    .await;
    let told = llm
        .requests()
        .into_iter()
        .skip(asked)
        .map(|r| r.last_user())
        .find(|u| u.contains("Ship on Friday"))
        .unwrap();
    assert!(
        told.contains("(minutes.docx) (Word document); its text follows"),
        "{told}"
    );
    assert!(
        told.contains("Minutes of Monday\nShip on Friday & rest"),
        "{told}"
    );

    let small = hostile::png(4, 3);
    let before = llm.request_count();
    send(small.clone(), photo("small", small.len())).await;
    wait_until("the model saw the photo", WAIT, || async {
        llm.requests()
            .iter()
            .skip(before)
            .any(|r| !r.images().is_empty())
    })
    .await;
    let seen = llm
        .requests()
        .into_iter()
        .skip(before)
        .find(|r| !r.images().is_empty())
        .unwrap();
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(&small);
    assert_eq!(seen.images()[0].1, format!("data:image/png;base64,{b64}"));

    app.shutdown().await;
    tg.shutdown().await;
}

#[tokio::test]
async fn the_real_daemon_survives_the_done_when_files_under_300_mb() {
    let (tg, llm, data) = fakes().await;
    let port = free_port();
    let file = write_config(
        data.path(),
        &format!("127.0.0.1:{port}"),
        &llm.base_url(),
        "",
    );
    let mut daemon = Herald::serve_config(&file, port)
        .env("HERALD_TELEGRAM__TOKEN", TOKEN)
        .env("HERALD_TELEGRAM__API_URL", tg.url())
        .env("HERALD_TELEGRAM__MODE", "polling")
        .env(
            "HERALD_TELEGRAM__ALLOWED_USERS",
            format!("[\"{USER}\", \"{OTHER}\"]"),
        )
        .env("HERALD_PAIRING__ENABLED", "false")
        .env("HERALD_TELEGRAM__POLL_TIMEOUT_SECS", "1")
        .env("HERALD_STREAMING__ENABLED", "false")
        .env("HERALD_LLM__VISION", "true")
        .env("HERALD_LOG__LEVEL", "warn")
        .spawn();
    daemon.wait_ready(WAIT).await;
    let doc =
        |id: &str, name: &str, bytes: &[u8]| document(id, name, "application/pdf", bytes.len());

    // At the default media.max_bytes (20 MiB): a 20 MB PDF inflating to 1.5 GiB.
    let bomb = hostile::inflate_bomb_pdf(3 << 29, Some(20_000_000));
    assert!(
        bomb.len() >= 19_900_000 && bomb.len() < 20 << 20,
        "{}",
        bomb.len()
    );
    let reply = send_beside_text(&tg, &bomb, doc("bomb", "bomb.pdf", &bomb), 1).await;
    assert_eq!(
        reply,
        format!("I could not read a document (bomb.pdf): it is too large when unpacked (over the 64.0 MB limit).{RECORDED}")
    );
    let pdf = hostile::recursive_form_pdf();
    let reply = send_beside_text(&tg, &pdf, doc("loop", "loop.pdf", &pdf), 2).await;
    assert!(reply.contains("a form in it draws itself"), "{reply}");
    let zip = hostile::zip_bomb_docx(u32::MAX - (1 << 20));
    let reply = send_beside_text(&tg, &zip, doc("zip", "r.docx", &zip), 3).await;
    assert!(reply.contains("too large when unpacked"), "{reply}");
    let png = hostile::png_header(60_000, 60_000);
    let reply = send_beside_text(&tg, &png, photo("png", png.len()), 4).await;
    assert!(reply.contains("the image is 60000x60000"), "{reply}");

    assert!(daemon.try_wait().is_none(), "the daemon is still running");
    let peak = ProcStats::read(daemon.pid()).peak_rss_mib;
    eprintln!("hostile files: daemon peak RSS {peak:.0} MiB");
    assert!(peak < 300.0, "peak RSS {peak:.0} MiB");
    daemon.kill();
    tg.shutdown().await;
}

fn stand_in(script: &str, timeout: Duration) -> Decoder {
    Decoder::new(
        Some(PathBuf::from("/bin/sh")),
        vec!["-c".into(), script.into()],
        Limits::default(),
        512,
        timeout,
    )
}

async fn decode_with(d: &Decoder) -> Result<Outcome, MediaError> {
    d.decode(JobKind::Document, b"%PDF-1.4", None, Some("x.pdf"))
        .await
}

#[tokio::test]
async fn a_worker_s_death_becomes_one_sentence() {
    let long = Duration::from_secs(60);
    let crash = decode_with(&stand_in("kill -SEGV $$", long))
        .await
        .unwrap_err();
    assert_eq!(
        format!("I could not read it: {crash}."),
        "I could not read it: the file could not be read: the reader crashed on it (it crashed (a memory fault))."
    );
    let stack = "echo \"thread 'main' has overflowed its stack\" >&2; kill -ABRT $$";
    let err = decode_with(&stand_in(stack, long)).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "the file could not be read: the reader crashed on it (it nests too deeply (stack overflow))"
    );
    let oom = "echo 'memory allocation of 1073741824 bytes failed' >&2; kill -ABRT $$";
    let err = decode_with(&stand_in(oom, long)).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "reading it needed more than 512 MB of memory, so it was stopped"
    );
    let err = decode_with(&stand_in("exec /bin/sleep 600", Duration::from_secs(1)))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "reading it took longer than 1 s, so it was stopped"
    );
    let err = decode_with(&stand_in("cat >/dev/null; exec /bin/cat /dev/zero", long))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the file could not be read: the reader crashed on it (its answer was too long)"
    );
    let err = decode_with(&stand_in("cat >/dev/null; echo not json", long))
        .await
        .unwrap_err();
    assert!(matches!(err, MediaError::Crashed(_)), "{err}");
    // No worker: the file is not read in process instead.
    let missing = Decoder::new(
        Some(PathBuf::from("/nonexistent/herald")),
        vec!["decode".into()],
        Limits::default(),
        512,
        long,
    );
    let err = decode_with(&missing).await.unwrap_err();
    assert!(
        err.to_string()
            .starts_with("the isolated reader could not be started: "),
        "{err}"
    );
}

#[tokio::test]
async fn the_real_worker_reads_and_refuses_by_its_caps() {
    let d = Decoder::new(
        Some(herald_bin()),
        vec!["decode".into()],
        Limits::default(),
        512,
        Duration::from_secs(60),
    );
    let pdf = herald_test_support::pdf::text_pdf(&["Quarterly revenue".to_string()]);
    let out = d
        .decode(JobKind::Document, &pdf, Some("application/pdf"), None)
        .await
        .unwrap();
    assert!(
        matches!(&out, Outcome::Document { text, .. } if text.contains("Quarterly revenue")),
        "{out:?}"
    );
    let odt = hostile::text_odt(&["Agenda", "Budget &lt; 5k"]);
    let out = d
        .decode(JobKind::Document, &odt, None, Some("agenda.odt"))
        .await
        .unwrap();
    assert_eq!(
        out,
        Outcome::Document {
            format: herald::media::decode::WireFormat::OpenDocument,
            text: "Agenda\nBudget < 5k".into(),
            truncated: false,
            total_chars: 18,
        }
    );
    let png = hostile::png(3, 2);
    let out = d.decode(JobKind::Image, &png, None, None).await.unwrap();
    assert_eq!(
        out,
        Outcome::Image {
            width: 3,
            height: 2
        }
    );
    // A tight page cap is the worker's own refusal, named.
    let tight = Decoder::new(
        Some(herald_bin()),
        vec!["decode".into()],
        Limits {
            max_pages: 1,
            ..Limits::default()
        },
        512,
        Duration::from_secs(60),
    );
    let two = herald_test_support::pdf::text_pdf(&["one".to_string(), "two".to_string()]);
    let err = tight
        .decode(JobKind::Document, &two, Some("application/pdf"), None)
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "it has 2 pages, over the 1-page limit");
    // The address-space cap is set on the real worker: a text as large as the cap does not
    // fit beside the binary itself, and the death is named as a memory limit. The cap leaves
    // 64 MB above the binary's file size (more than it maps), so the worker can start: a debug
    // binary is larger than a release one's whole default cap of 512 MB leaves room for.
    let binary_mb = std::fs::metadata(herald_bin()).unwrap().len() >> 20;
    let cap_mb = binary_mb + 64;
    let small = Decoder::new(
        Some(herald_bin()),
        vec!["decode".into()],
        Limits::default(),
        cap_mb,
        Duration::from_secs(60),
    );
    let text = vec![b'a'; (cap_mb as usize) << 20];
    let err = small
        .decode(JobKind::Document, &text, Some("text/plain"), Some("a.txt"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("reading it needed more than {cap_mb} MB of memory, so it was stopped")
    );
}
