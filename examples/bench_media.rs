//! Media readers benchmark: time and peak memory of turning a document into the text the model
//! reads (`media::read_document`).
//!
//! - a 20 MB UTF-8 text document, at the default budget (40,000 chars) and read whole;
//! - a 20 MB Windows-1252 text document (decoded to UTF-8 before the cut);
//! - a multi-page PDF of a few MB (written by test-support's lopdf writer, text that does not
//!   compress away), at the default budget.
//!
//! Peak memory is counted by a global allocator: the most bytes live at once during the read,
//! above what was live before it (the input itself is not counted). Prints a table and writes
//! `bench-results/media.txt`.
//!
//! Run: `cargo run --release --example bench_media` (`BENCH_RUNS=3` by default).

use std::alloc::{GlobalAlloc, Layout, System};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use herald::config::MediaConfig;
use herald::media::read_document;
use herald_test_support::pdf;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Median time over `runs` and the largest peak of live bytes above the start, of `f`.
fn measure(runs: usize, mut f: impl FnMut() -> usize) -> (Duration, usize, usize) {
    let mut times = Vec::with_capacity(runs);
    let mut peak = 0;
    let mut out = 0;
    for _ in 0..runs {
        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        let t = Instant::now();
        out = std::hint::black_box(f());
        times.push(t.elapsed());
        peak = peak.max(PEAK.load(Ordering::Relaxed) - base);
    }
    times.sort();
    (times[times.len() / 2], peak, out)
}

/// Words from a fixed linear congruential sequence: text that reads as prose to a compressor.
fn prose(bytes: usize, seed: u64, accents: bool) -> String {
    const WORDS: &[&str] = &[
        "quarterly",
        "figures",
        "region",
        "rose",
        "the",
        "of",
        "and",
        "shipment",
        "delayed",
        "invoice",
        "customer",
        "north",
        "warehouse",
        "forecast",
        "margin",
        "supplier",
        "July",
    ];
    const ACCENTED: &[&str] = &["café", "Grüße", "naïve", "über", "façade", "crème"];
    let mut s = String::with_capacity(bytes + 64);
    let mut x = seed;
    let mut col = 0;
    while s.len() < bytes {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let r = (x >> 33) as usize;
        let w = if accents && r.is_multiple_of(11) {
            ACCENTED[r % ACCENTED.len()]
        } else {
            WORDS[r % WORDS.len()]
        };
        s.push_str(w);
        if r.is_multiple_of(7) {
            let _ = write!(s, " {}", r % 100_000);
        }
        col += w.len() + 1;
        if col > 70 {
            s.push('\n');
            col = 0;
        } else {
            s.push(' ');
        }
    }
    s
}

fn row(out: &mut String, name: &str, input: usize, (t, peak, chars): (Duration, usize, usize)) {
    let line = format!(
        "{name:<34} input {:>7.2} MB   time {:>9.2} ms   peak {:>7.2} MB   out {:>9} bytes",
        input as f64 / 1e6,
        t.as_secs_f64() * 1e3,
        peak as f64 / 1e6,
        chars
    );
    println!("{line}");
    out.push_str(&line);
    out.push('\n');
}

fn main() -> std::io::Result<()> {
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let budget = MediaConfig::default().document_chars;
    let mut out = format!("media readers, {runs} runs (median time, max peak)\n");

    let text = prose(20 * 1024 * 1024, 7, true).into_bytes();
    let read = |bytes: &[u8], name: &str, max: usize| {
        let doc = read_document(bytes, None, Some(name), max)
            .unwrap()
            .unwrap();
        doc.text.len()
    };
    row(
        &mut out,
        "text 20 MB, budget 40k chars",
        text.len(),
        measure(runs, || read(&text, "big.txt", budget)),
    );
    row(
        &mut out,
        "text 20 MB, read whole",
        text.len(),
        measure(runs, || read(&text, "big.txt", usize::MAX)),
    );

    let latin: Vec<u8> = prose(20 * 1024 * 1024, 9, false)
        .bytes()
        .map(|b| if b == b'q' { 0xe9 } else { b })
        .collect();
    row(
        &mut out,
        "windows-1252 20 MB, budget 40k",
        latin.len(),
        measure(runs, || read(&latin, "old.txt", budget)),
    );

    let pages: Vec<String> = (0..1200).map(|p| prose(3500, p + 1, false)).collect();
    let bytes = pdf::text_pdf(&pages);
    let name = format!("pdf {} pages, budget 40k chars", pages.len());
    row(
        &mut out,
        &name,
        bytes.len(),
        measure(runs, || read(&bytes, "report.pdf", budget)),
    );

    std::fs::create_dir_all("bench-results")?;
    std::fs::write("bench-results/media.txt", &out)?;
    println!("wrote bench-results/media.txt");
    Ok(())
}
