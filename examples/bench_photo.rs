//! What a photo adds to a turn: the media step (`MediaReader::read`: `getFile`, the download
//! from the fake Telegram file server on 127.0.0.1, the hash, the cache write) and the encoding
//! of the image part into the request (`Blob::data_url`, base64), for a model that sees.
//!
//! Cold: a file never fetched before (a new file id per run). Warm: the same photo again, from
//! `<data_dir>/media`. Prints medians and writes `bench-results/photo.txt`.
//!
//! Run: `cargo run --release --example bench_photo` (`BENCH_RUNS=15` by default).

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use herald::config::{Config, Secret};
use herald::domain::{Attachment, MediaKind, MediaSource};
use herald::llm::Part;
use herald::media::{MediaCache, MediaReader};
use herald_test_support::fake_telegram::FakeTelegram;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn photo(bytes: usize, seed: u8) -> Vec<u8> {
    // A JPEG's magic and frame header (1280x960: the decode worker reads the size from it),
    // then bytes that do not compress: the size is what crosses the wire.
    let mut b = vec![
        0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x11, 0x08, 0x03, 0xC0, 0x05, 0x00, 0x03, 0x01, 0x22, 0x00,
        0x02, 0x11, 0x01, 0x03, 0x11, 0x01,
    ];
    let mut x = u32::from(seed) | 1;
    while b.len() < bytes {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b.push(x as u8);
    }
    b
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    let tg = FakeTelegram::start("123:bench").await;
    let data = tempfile::tempdir()?;
    let mut config = Config::default();
    config.telegram.token = Some(Secret::new(tg.token()));
    config.telegram.api_url = tg.url().parse().expect("the fake's URL");
    config.llm.vision = true;
    config.media.max_bytes = 20 * 1024 * 1024;
    let cache = MediaCache::under(data.path(), 24);
    let reader = MediaReader::from_config(&config, cache);

    let mut out = format!(
        "photo turn media step, {runs} runs (median), fake Telegram on 127.0.0.1\n\
         {:<10} {:>12} {:>12} {:>14}\n",
        "size", "cold read", "warm read", "encode part"
    );
    for kb in [100usize, 1024, 5 * 1024] {
        let (mut cold, mut warm, mut encode) = (Vec::new(), Vec::new(), Vec::new());
        for run in 0..runs {
            let id = format!("p{kb}-{run}");
            let bytes = photo(kb * 1024, run as u8);
            tg.add_file(&id, &bytes);
            let mut a = Attachment::new(MediaKind::Photo, MediaSource::Telegram(id));
            a.size = Some(bytes.len() as u64);
            let t = Instant::now();
            let reading = reader.read(std::slice::from_ref(&a)).await;
            cold.push(t.elapsed());
            let t = Instant::now();
            let again = reader.read(std::slice::from_ref(&a)).await;
            warm.push(t.elapsed());
            let Some(Part::Image(blob)) = again.parts.first() else {
                panic!("no image part: {:?}", reading.text);
            };
            let t = Instant::now();
            let url = blob.data_url();
            encode.push(t.elapsed());
            assert!(url.len() > bytes.len());
        }
        let line = format!(
            "{:<10} {:>10.2}ms {:>10.2}ms {:>12.2}ms",
            format!("{kb} KB"),
            median(cold).as_secs_f64() * 1e3,
            median(warm).as_secs_f64() * 1e3,
            median(encode).as_secs_f64() * 1e3,
        );
        println!("{line}");
        let _ = writeln!(out, "{line}");
    }
    std::fs::create_dir_all("bench-results")?;
    std::fs::write("bench-results/photo.txt", &out)?;
    println!("wrote bench-results/photo.txt");
    tg.shutdown().await;
    Ok(())
}
