//! `media::Fetcher` against the fake Telegram (getFile + the file route) and the fake
//! Discord CDN: bytes with their hash, the cache in front of the network, the size cap by
//! announcement and while streaming, the timeout, HTTP errors, and the bot token kept out of
//! every error and log line; and the guarded client under it (`herald::net`): internal
//! addresses refused unless allowed, each redirect hop checked again, at most five.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use herald::config::{Config, Secret};
use herald::domain::{Attachment, MediaKind, MediaSource};
use herald::media::{sha256_hex, Fetcher, MediaCache, MediaError};
use herald::net::{Blocked, Guard, HostRule, NetError, Policy, Refusal};
use herald_test_support::fake_discord::FakeDiscord;
use herald_test_support::fake_telegram::{FakeTelegram, FileFault};
use herald_test_support::recorder::Recorder;

const TOKEN: &str = "424242:SECRET-bot-token";

fn config(api_url: &str, token: Option<&str>, max_bytes: u64, timeout_secs: u64) -> Config {
    let mut c = Config::default();
    c.telegram.api_url = api_url.parse().unwrap();
    c.telegram.token = token.map(Secret::new);
    c.media.max_bytes = max_bytes;
    c.media.fetch_timeout_secs = timeout_secs;
    c
}

fn fetcher(c: &Config, dir: &tempfile::TempDir) -> Fetcher {
    Fetcher::from_config(c, MediaCache::under(dir.path(), 24))
}

fn telegram_file(kind: MediaKind, id: &str, size: Option<u64>, mime: Option<&str>) -> Attachment {
    let mut a = Attachment::new(kind, MediaSource::Telegram(id.into()));
    a.size = size;
    a.mime = mime.map(str::to_string);
    a
}

/// `n` bytes that are not all alike.
fn bytes(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 31 % 251) as u8).collect()
}

/// Every line logged at debug and above while the guard lives (this thread only).
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn capture() -> (Logs, tracing::subscriber::DefaultGuard) {
        let logs = Logs::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        (logs, tracing::subscriber::set_default(subscriber))
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

#[tokio::test]
async fn a_telegram_photo_is_fetched_once_then_served_from_the_cache() {
    let fake = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let f = fetcher(&config(&fake.url(), Some(TOKEN), 1 << 20, 10), &dir);
    let photo = bytes(70_000);
    let info = fake.add_file("AgAD-photo", &photo);
    let a = telegram_file(
        MediaKind::Photo,
        "AgAD-photo",
        Some(info.file_size),
        Some("image/jpeg"),
    );

    let got = f.fetch(&a).await.expect("fetched");
    assert_eq!(&got.bytes[..], &photo[..]);
    assert_eq!(got.sha256, sha256_hex(&photo));
    assert_eq!(got.mime.as_deref(), Some("image/jpeg"));

    let again = f.fetch(&a).await.expect("fetched again");
    assert_eq!(again.sha256, got.sha256);
    assert_eq!(&again.bytes[..], &photo[..]);
    assert_eq!(
        fake.downloads("AgAD-photo"),
        1,
        "the second came from the cache"
    );
    assert_eq!(fake.calls("getFile").len(), 1);

    // Another replica (another cache) fetches by reference again.
    let other_dir = tempfile::tempdir().unwrap();
    let other = fetcher(&config(&fake.url(), Some(TOKEN), 1 << 20, 10), &other_dir);
    assert_eq!(other.fetch(&a).await.unwrap().sha256, got.sha256);
    assert_eq!(fake.downloads("AgAD-photo"), 2);
}

#[tokio::test]
async fn files_over_the_cap_fail_before_or_while_downloading() {
    let fake = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let max = 20_000;
    let f = fetcher(&config(&fake.url(), Some(TOKEN), max, 10), &dir);

    // Announced by the platform: no request at all.
    fake.add_file("big", &bytes(50_000));
    let announced = telegram_file(MediaKind::Document, "big", Some(50_000), None);
    let err = f.fetch(&announced).await.unwrap_err();
    assert_eq!(err, MediaError::TooLarge { size: 50_000, max });
    assert_eq!(fake.calls("getFile").len(), 0);
    assert_eq!(fake.downloads("big"), 0);

    // Unannounced, but getFile tells: no download.
    let unannounced = telegram_file(MediaKind::Document, "big", None, None);
    let err = f.fetch(&unannounced).await.unwrap_err();
    assert_eq!(err, MediaError::TooLarge { size: 50_000, max });
    assert_eq!(fake.downloads("big"), 0);

    // Understated everywhere and streamed without a length: cut while reading.
    fake.add_file("liar", &bytes(200_000));
    fake.set_file_fault("liar", FileFault::Understated(900));
    let liar = telegram_file(MediaKind::Document, "liar", Some(900), None);
    match f.fetch(&liar).await.unwrap_err() {
        MediaError::TooLarge { size, max: m } => {
            assert_eq!(m, max);
            assert!(size > max, "stopped past the cap: {size}");
            assert!(size < 200_000, "stopped before the end: {size}");
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert_eq!(fake.downloads("liar"), 1);
    // Nothing was cached: the next try downloads again (and fails again).
    assert!(f.fetch(&liar).await.is_err());
    assert_eq!(fake.downloads("liar"), 2);
}

#[tokio::test]
async fn a_slow_download_times_out_and_a_missing_one_is_an_http_error() {
    let fake = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let f = fetcher(&config(&fake.url(), Some(TOKEN), 1 << 20, 1), &dir);
    fake.add_file("slow", &bytes(1000));
    fake.set_file_fault("slow", FileFault::Slow(Duration::from_secs(30)));
    let started = Instant::now();
    let err = f
        .fetch(&telegram_file(MediaKind::Voice, "slow", None, None))
        .await
        .unwrap_err();
    assert_eq!(err, MediaError::Timeout);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "{took:?}"
    );

    fake.add_file("gone", &bytes(10));
    fake.set_file_fault("gone", FileFault::Missing);
    let err = f
        .fetch(&telegram_file(MediaKind::Photo, "gone", None, None))
        .await
        .unwrap_err();
    assert_eq!(err, MediaError::Fetch("HTTP 404".into()));
    assert_eq!(err.to_string(), "the download failed: HTTP 404");

    let err = f
        .fetch(&telegram_file(
            MediaKind::Photo,
            "never-registered",
            None,
            None,
        ))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        MediaError::Fetch("Telegram: Bad Request: invalid file_id".into())
    );
}

/// Every failure a Telegram fetch can meet, with the token in the URLs it used: not one error
/// text and not one log line carries the token.
#[tokio::test]
async fn the_bot_token_reaches_no_error_and_no_log_line() {
    let (logs, _guard) = Logs::capture();
    let fake = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let f = fetcher(&config(&fake.url(), Some(TOKEN), 5000, 1), &dir);
    fake.add_file("slow", &bytes(10));
    fake.set_file_fault("slow", FileFault::Slow(Duration::from_secs(30)));
    fake.add_file("gone", &bytes(10));
    fake.set_file_fault("gone", FileFault::Missing);
    fake.add_file("liar", &bytes(50_000));
    fake.set_file_fault("liar", FileFault::Understated(10));
    // A server that is not there: the connection error names no URL.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let nowhere = fetcher(&config(&closed, Some(TOKEN), 5000, 5), &dir);

    let mut errors = Vec::new();
    for id in ["slow", "gone", "liar", "unknown"] {
        let a = telegram_file(MediaKind::Document, id, None, None);
        errors.push(f.fetch(&a).await.unwrap_err());
    }
    let a = telegram_file(MediaKind::Document, "x", None, None);
    errors.push(nowhere.fetch(&a).await.unwrap_err());
    assert!(
        matches!(errors.last(), Some(MediaError::Fetch(_))),
        "{errors:?}"
    );
    for e in &errors {
        for text in [e.to_string(), format!("{e:?}")] {
            assert!(!text.contains("SECRET"), "token in an error: {text}");
        }
    }
    assert!(!format!("{f:?}").contains("SECRET"));
    // The capture works (a callsite first hit under it). Whether the fetcher's own line is
    // captured depends on tracing's per-callsite interest cache, which tests running in other
    // threads of this process also fill: when it is, it must not carry the token.
    tracing::info!("media_fetch capture check");
    let logged = logs.text();
    assert!(logged.contains("media_fetch capture check"), "{logged}");
    assert!(!logged.contains("SECRET"), "token in the log: {logged}");
}

#[tokio::test]
async fn discord_cdn_files_are_fetched_by_url_and_cached() {
    let discord = FakeDiscord::start("discord-token").await;
    let dir = tempfile::tempdir().unwrap();
    // The fake CDN is the fake's REST host: the configured Discord API, reached although local.
    let mut c = config("http://127.0.0.1:9", None, 1 << 20, 10);
    c.discord.api_url = discord.api_url().parse().unwrap();
    let f = fetcher(&c, &dir);
    let png = bytes(4096);
    let file = discord.add_cdn_file("cat.png", "image/png", &png);
    let mut a = Attachment::new(MediaKind::Photo, MediaSource::Url(file.url.clone()));
    a.size = Some(file.size);

    // No MIME type announced: the response's Content-Type.
    let got = f.fetch(&a).await.expect("fetched");
    assert_eq!(&got.bytes[..], &png[..]);
    assert_eq!(got.sha256, sha256_hex(&png));
    assert_eq!(got.mime.as_deref(), Some("image/png"));
    f.fetch(&a).await.expect("cached");
    assert_eq!(discord.cdn_downloads(file.id), 1);

    discord.set_cdn_fault(file.id, FileFault::Missing);
    let mut moved = a.clone();
    moved.source = MediaSource::Url(format!("{}&again", file.url));
    assert_eq!(
        f.fetch(&moved).await.unwrap_err(),
        MediaError::Fetch("HTTP 404".into())
    );
}

#[tokio::test]
async fn sources_that_are_not_fetched_here_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let cache = MediaCache::under(dir.path(), 24);
    let f = Fetcher::from_config(&config("http://127.0.0.1:9", None, 1000, 5), cache.clone());
    let cases = [
        (
            MediaSource::Telegram("AgAD".into()),
            MediaError::NoSource("telegram"),
        ),
        (
            MediaSource::DiscordSticker("7493".into()),
            MediaError::NoSource("Discord stickers"),
        ),
        (
            MediaSource::Cached(sha256_hex(b"gone")),
            MediaError::Fetch("no longer available".into()),
        ),
        (
            MediaSource::Url("file:///etc/passwd".into()),
            MediaError::Refused("file addresses are not fetched".into()),
        ),
    ];
    for (source, want) in cases {
        let a = Attachment::new(MediaKind::Document, source.clone());
        assert_eq!(f.fetch(&a).await.unwrap_err(), want, "{source:?}");
    }
    // Bytes Herald holds itself are read by their hash.
    let sha = cache.put(b"tool image").await.unwrap();
    let mut held = Attachment::new(MediaKind::Photo, MediaSource::Cached(sha.clone()));
    held.mime = Some("image/png".into());
    let got = f.fetch(&held).await.unwrap();
    assert_eq!((&got.bytes[..], got.sha256), (&b"tool image"[..], sha));
}

/// A file URL on an internal address — written as an IP, a name that resolves to one, an
/// IPv4-mapped IPv6 address — is refused before any byte goes there, unless the operator
/// listed the host in `media.allow_private_hosts`.
#[tokio::test]
async fn urls_on_internal_addresses_are_refused_unless_allowed() {
    let inside = Recorder::start().await;
    let dir = tempfile::tempdir().unwrap();
    let c = config("http://127.0.0.1:9", None, 1 << 20, 10);
    let f = fetcher(&c, &dir);
    let port = inside.port();
    let loopback = MediaError::Refused(
        "its address is a loopback address, which Herald does not reach".into(),
    );
    let cases = [
        (
            format!("http://127.0.0.1:{port}/attachments/1/a.png"),
            &loopback,
        ),
        (
            format!("http://localhost:{port}/attachments/1/b.png"),
            &loopback,
        ),
        (format!("http://[::ffff:127.0.0.1]:{port}/c.png"), &loopback),
        (format!("http://2130706433:{port}/d.png"), &loopback),
        (
            "http://169.254.169.254/latest/meta-data/".to_string(),
            &MediaError::Refused(
                "its address is a cloud metadata address, which Herald does not reach".into(),
            ),
        ),
        (
            "http://[fd00:ec2::254]/latest/meta-data/".to_string(),
            &MediaError::Refused(
                "its address is a cloud metadata address, which Herald does not reach".into(),
            ),
        ),
    ];
    for (url, want) in &cases {
        let a = Attachment::new(MediaKind::Photo, MediaSource::Url(url.clone()));
        assert_eq!(&f.fetch(&a).await.unwrap_err(), *want, "{url}");
    }
    assert!(inside.seen().is_empty(), "{:?}", inside.seen());

    let mut allowed = c.clone();
    allowed.media.allow_private_hosts = vec![format!("127.0.0.1:{port}"), "localhost".into()];
    let other_dir = tempfile::tempdir().unwrap();
    let f = fetcher(&allowed, &other_dir);
    for url in [
        format!("http://127.0.0.1:{port}/attachments/1/a.png"),
        format!("http://localhost:{port}/attachments/1/b.png"),
    ] {
        let a = Attachment::new(MediaKind::Photo, MediaSource::Url(url.clone()));
        assert_eq!(&f.fetch(&a).await.expect(&url).bytes[..], b"ok");
    }
    assert_eq!(inside.seen().len(), 2);
}

fn policy(redirect_hosts: &[&str]) -> Policy {
    Policy {
        max_bytes: 1 << 20,
        timeout: Duration::from_secs(10),
        redirect_hosts: redirect_hosts
            .iter()
            .map(|h| HostRule::parse(h).unwrap())
            .collect(),
        follow_anywhere: false,
        bearer: None,
    }
}

/// A redirect to a host the caller allows is still checked where it lands: an allowed file
/// host that resolves to loopback is refused, and nothing reaches it. A server that keeps
/// redirecting is left after five redirects.
#[tokio::test]
async fn every_redirect_hop_is_checked_again_and_there_are_at_most_five() {
    let fake = FakeTelegram::start(TOKEN).await;
    let inside = Recorder::start().await;
    let fake_host = HostRule::of_url(&fake.url().parse().unwrap()).unwrap();
    let guard = Guard::new(vec![fake_host], Duration::from_secs(5));

    let info = fake.add_file("hop", b"x");
    let file_url = format!("{}/file/bot{TOKEN}/{}", fake.url(), info.file_path);
    fake.set_file_fault(
        "hop",
        FileFault::Redirect(format!("http://localhost:{}/files/x", inside.port())),
    );
    let err = guard
        .fetch(&file_url, &policy(&["localhost"]))
        .await
        .unwrap_err();
    assert_eq!(err, NetError::Refused(Refusal::Address(Blocked::Loopback)));
    assert!(inside.seen().is_empty(), "{:?}", inside.seen());
    // Without the allowance it is the redirect rule that stops it.
    let err = guard.fetch(&file_url, &policy(&[])).await.unwrap_err();
    assert_eq!(err, NetError::Refused(Refusal::OtherHost));

    let info = fake.add_file("loop", b"x");
    let loop_path = format!("/file/bot{TOKEN}/{}", info.file_path);
    fake.set_file_fault("loop", FileFault::Redirect(loop_path.clone()));
    let err = guard
        .fetch(&format!("{}{loop_path}", fake.url()), &policy(&[]))
        .await
        .unwrap_err();
    assert_eq!(err, NetError::Refused(Refusal::TooManyRedirects));
    assert_eq!(
        fake.downloads("loop"),
        6,
        "the first request and five redirects"
    );
    for e in [err.to_string(), format!("{err:?}")] {
        assert!(!e.contains("SECRET"), "{e}");
    }
}
