//! The streaming benchmark: what a Telegram user waits for, streamed vs not, at 1 and 50
//! concurrent chats. The real core (`App::start`) polls the fake Bot API through teloxide with
//! production pacing (the throttle, `streaming.edit_interval_ms = 1000`); the fake model writes
//! each answer (499 characters) in 25 pieces 50 ms apart, like a model at ~400 chars/s.
//!
//! For each chat: **first words** — from the update being queued to the first message in the
//! chat (streamed: the plain preview; not streamed: the answer); **final** — to the moment the
//! chat shows the exact final text (streamed: the outbox's final edit; not streamed: the send);
//! **edits** per answer. Prints a table and writes `bench-results/stream.json`.
//!
//! Run: `cargo bench --bench stream` (or `--profile dev` for a quicker build: the figures are
//! dominated by the model's pace and the platform pacing, not by CPU).

use std::time::{Duration, Instant};

use herald::adapters::telegram::format::markdown_to_html;
use herald::app::App;
use herald_test_support::fake_llm::Step;
use herald_test_support::fake_telegram::message_json;
use herald_test_support::telegram::{fakes, tg_config};
use serde_json::{json, Value};

fn answer() -> String {
    (0..100)
        .map(|i| format!("w{i:03}"))
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(600)
        .collect()
}

struct Run {
    streamed: bool,
    chats: usize,
    first_ms: Vec<f64>,
    final_ms: Vec<f64>,
    edits: Vec<usize>,
}

fn pct(v: &[f64], p: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() - 1) as f64 * p).round() as usize]
}

async fn run(streamed: bool, chats: usize) -> Run {
    let (tg, llm, data) = fakes().await;
    let text = answer();
    llm.set_sticky(Some(Step::stream(&text, 20, Duration::from_millis(50))));
    let mut c = tg_config(&tg, &llm, &data);
    c.telegram.allow_all_users = true;
    c.streaming.enabled = Some(streamed);
    let app = App::start(c).await.expect("app starts");
    let want = markdown_to_html(&text);
    let ids: Vec<i64> = (0..chats as i64).map(|i| 5000 + i).collect();
    let mut pushed = Vec::new();
    for &chat in &ids {
        pushed.push(Instant::now());
        tg.push_message(|id| message_json(id, chat, chat, "write me something"));
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let done = ids
            .iter()
            .all(|&c| tg.chat_view(c).first().is_some_and(|m| m.text == want));
        if done {
            break;
        }
        assert!(Instant::now() < deadline, "answers did not arrive in time");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Let late edits land before reading.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent = tg.sent_with_times();
    let edits = tg.edits();
    let mut out = Run {
        streamed,
        chats,
        first_ms: Vec::new(),
        final_ms: Vec::new(),
        edits: Vec::new(),
    };
    for (i, &chat) in ids.iter().enumerate() {
        let (msg, first_at) = sent
            .iter()
            .find(|(m, _)| m.chat_id == chat)
            .expect("a message in every chat");
        let mine: Vec<_> = edits
            .iter()
            .filter(|e| e.chat_id == chat && e.message_id == msg.message_id)
            .collect();
        let final_at = mine.last().map(|e| e.at).unwrap_or(*first_at);
        out.first_ms
            .push((*first_at - pushed[i]).as_secs_f64() * 1000.0);
        out.final_ms
            .push((final_at - pushed[i]).as_secs_f64() * 1000.0);
        out.edits.push(mine.len());
    }
    app.shutdown().await;
    out
}

#[tokio::main]
async fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs bench targets without it,
    // and a benchmark run is not a test.
    if !std::env::args().any(|a| a == "--bench") {
        println!("the streaming benchmark runs under `cargo bench --bench stream`; nothing to do");
        return;
    }
    let mut runs = Vec::new();
    for chats in [1, 50] {
        for streamed in [false, true] {
            runs.push(run(streamed, chats).await);
        }
    }
    println!(
        "{:<10} {:>6} {:>14} {:>14} {:>14} {:>14} {:>12}",
        "mode",
        "chats",
        "first p50 ms",
        "first p95 ms",
        "final p50 ms",
        "final p95 ms",
        "edits/answer"
    );
    let mut json_runs: Vec<Value> = Vec::new();
    for r in &runs {
        let mode = if r.streamed { "streamed" } else { "plain" };
        let edits = r.edits.iter().sum::<usize>() as f64 / r.edits.len() as f64;
        println!(
            "{:<10} {:>6} {:>14.0} {:>14.0} {:>14.0} {:>14.0} {:>12.1}",
            mode,
            r.chats,
            pct(&r.first_ms, 0.5),
            pct(&r.first_ms, 0.95),
            pct(&r.final_ms, 0.5),
            pct(&r.final_ms, 0.95),
            edits
        );
        json_runs.push(json!({
            "mode": mode, "chats": r.chats,
            "first_words_ms": {"p50": pct(&r.first_ms, 0.5), "p95": pct(&r.first_ms, 0.95)},
            "final_text_ms": {"p50": pct(&r.final_ms, 0.5), "p95": pct(&r.final_ms, 0.95)},
            "edits_per_answer": edits,
        }));
    }
    let _ = std::fs::create_dir_all("bench-results");
    let report = json!({
        "bench": "stream",
        "answer_chars": answer().chars().count(),
        "model": "25 pieces of 20 characters, 50 ms apart",
        "edit_interval_ms": 1000,
        "runs": json_runs,
    });
    std::fs::write(
        "bench-results/stream.json",
        serde_json::to_string_pretty(&report).unwrap(),
    )
    .expect("write bench-results/stream.json");
    println!("wrote bench-results/stream.json");
}
