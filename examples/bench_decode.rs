//! What isolating the decoders costs (issue 52): a normal one-page PDF and a photo decoded in
//! process (`decode::worker::run`, what the worker itself runs) and through the worker
//! (`Decoder::decode`: start `herald decode`, send the job, read the answer), medians of
//! `BENCH_RUNS` (30) each after a warm-up. The difference is the latency a turn pays for the
//! isolation. Prints the table and writes `bench-results/decode.txt`.
//!
//! Run: `cargo run --release --example bench_decode` (the worker is the `herald` of the same
//! profile: build it first, `cargo build --release`).

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use herald::media::decode::worker::run;
use herald::media::decode::{Decoder, Job, JobKind, Limits, Outcome};
use herald_test_support::herald::herald_bin;
use herald_test_support::{hostile, pdf};

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e3
}

/// A 1 MB photo: a JPEG frame header (1920x1080) and bytes that do not compress.
fn photo() -> Vec<u8> {
    let mut b = vec![
        0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x11, 0x08, 0x04, 0x38, 0x07, 0x80, 0x03, 0x01, 0x22, 0x00,
        0x02, 0x11, 0x01, 0x03, 0x11, 0x01,
    ];
    let mut x = 0x9E37_79B9u32;
    while b.len() < 1 << 20 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b.push(x as u8);
    }
    b
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let bin = herald_bin();
    assert!(
        bin.is_file(),
        "build the herald binary first: {}",
        bin.display()
    );
    let limits = Limits::default();
    let decoder = Decoder::new(
        Some(bin.clone()),
        vec!["decode".into()],
        limits,
        512,
        Duration::from_secs(20),
    );
    let page = "Quarterly report. Revenue grew twelve percent; costs held flat.\n".repeat(30);
    let cases: Vec<(&str, JobKind, Vec<u8>, Option<&str>)> = vec![
        (
            "1-page PDF",
            JobKind::Document,
            pdf::text_pdf(&[page]),
            Some("application/pdf"),
        ),
        ("1 MB photo", JobKind::Image, photo(), Some("image/jpeg")),
        (
            "PNG 64x64",
            JobKind::Image,
            hostile::png(64, 64),
            Some("image/png"),
        ),
    ];
    let mut out = format!(
        "decode in process vs through `herald decode` ({}), {runs} runs (median)\n\
         {:<12} {:>10} {:>12} {:>10}\n",
        bin.display(),
        "file",
        "in process",
        "via worker",
        "added"
    );
    println!("{out}");
    for (name, kind, bytes, mime) in cases {
        let job = Job {
            kind,
            mime: mime.map(str::to_string),
            name: None,
            limits,
            len: bytes.len() as u64,
        };
        assert!(!matches!(run(&job, &bytes), Outcome::Refused(_)), "{name}");
        decoder.decode(kind, &bytes, mime, None).await.expect(name);
        let (mut inproc, mut worker) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            let t = Instant::now();
            std::hint::black_box(run(&job, &bytes));
            inproc.push(t.elapsed());
            let t = Instant::now();
            let o = decoder.decode(kind, &bytes, mime, None).await;
            worker.push(t.elapsed());
            assert!(o.is_ok(), "{name}: {o:?}");
        }
        let (a, b) = (median(inproc), median(worker));
        let line = format!("{name:<12} {a:>8.2}ms {b:>10.2}ms {:>8.2}ms", b - a);
        println!("{line}");
        let _ = writeln!(out, "{line}");
    }
    std::fs::create_dir_all("bench-results")?;
    std::fs::write("bench-results/decode.txt", &out)?;
    println!("wrote bench-results/decode.txt");
    Ok(())
}
