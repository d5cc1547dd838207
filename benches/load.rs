//! The load benchmark: the release `herald` binary as a child process, Telegram in polling mode
//! (or `--webhook`), the fake Bot API server and an instant fake model in this process, and
//! chats in a closed loop (`--chats N --messages M`) or an open loop (`--rate R --duration S`).
//! `--seed-lanes N` first runs N more chats with one message each, so memory is measured with
//! that many lanes seen. SQLite in a temp dir, or a fresh Postgres schema when `DATABASE_URL`
//! is set. `--think-ms T` has each person wait T after a reply before writing again, and
//! `--pacing` turns Telegram pacing on, to measure what pacing costs a conversation. Run with
//! `HERALD_STREAMING__CHATS=private` to stream: `latency_ms` then times the first sight of the
//! answer (the preview) and `final_text_ms` its final, formatted form (the outbox's edit).
//!
//! Run: `cargo build --release --bin herald && cargo bench --bench load -- --chats 100
//! --messages 20`. Prints a summary and writes `bench-results/load-<store>-<mode>.json` with a
//! latency histogram and a throughput plot (SVG) beside it. docs/BENCHMARKS.md has the method.
//!
//! `--matrix` measures CPU and allocations per turn against the echo floor
//! (`examples/echo_floor.rs`) for 1, 10 and 100 chats; `--replicas 1,2,3` runs Herald replicas
//! on one Postgres schema and counts the turns each ran. Both want the counting allocator:
//! `cargo build --release --features count-alloc --bin herald --example echo_floor && cargo
//! bench --features count-alloc --bench load -- --matrix`.

#[path = "load/matrix.rs"]
mod matrix;
#[path = "load/measure.rs"]
mod measure;
#[path = "load/plot.rs"]
mod plot;
#[path = "load/replicas.rs"]
mod replicas;
use herald_test_support::telegram_load;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::{json, Value};
use telegram_load::proc::{loadavg, ProcStats};
use telegram_load::{percentile, Outcome, Plan, Rig, Shape};

#[derive(Parser, Debug)]
#[command(about = "Telegram load benchmark against the real herald binary")]
struct Args {
    /// Concurrent chats (closed loop), or chats the open loop's messages rotate over.
    #[arg(long, default_value_t = 100)]
    chats: usize,
    /// Messages per chat in the closed loop.
    #[arg(long, default_value_t = 20)]
    messages: usize,
    /// Open loop: messages per second across all chats.
    #[arg(long)]
    rate: Option<f64>,
    /// Open loop: seconds of sending.
    #[arg(long, default_value_t = 20.0)]
    duration: f64,
    /// Open loop: equal gaps instead of Poisson arrivals.
    #[arg(long)]
    uniform: bool,
    /// Closed loop: milliseconds a chat's person "thinks" after each reply before writing again.
    #[arg(long, default_value_t = 0)]
    think_ms: u64,
    /// Telegram pacing on (`telegram.pacing = true`, as in production); off by default.
    #[arg(long)]
    pacing: bool,
    /// Telegram webhook mode: the driver POSTs updates to the daemon.
    #[arg(long)]
    webhook: bool,
    /// Chats (lanes) to create with one message each before the measured run.
    #[arg(long, default_value_t = 0)]
    seed_lanes: usize,
    /// Seconds after which a message without a reply counts as lost.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// The herald binary (default: target/release/herald beside this bench).
    #[arg(long)]
    bin: Option<PathBuf>,
    /// Where the JSON and SVG files go.
    #[arg(long)]
    out_dir: Option<PathBuf>,
    /// Writes the daemon's pid here once it is ready (to attach `perf record -p`).
    #[arg(long)]
    pid_file: Option<PathBuf>,
    /// Runs the per-turn cost matrix against the echo floor (issue #34): `--matrix-chats`
    /// × {herald-sqlite, floor, herald-postgres when DATABASE_URL is set}; writes
    /// `load-matrix.json`.
    #[arg(long)]
    matrix: bool,
    /// The matrix's chat counts.
    #[arg(long, value_delimiter = ',', default_value = "1,10,100")]
    matrix_chats: Vec<usize>,
    /// The matrix's turns per run (each chat sends turns / chats messages).
    #[arg(long, default_value_t = 2000)]
    turns: usize,
    /// The matrix's messages per chat instead of turns / chats (equal session lengths).
    #[arg(long)]
    matrix_messages: Option<usize>,
    /// The matrix's rounds; the summary takes the median of each cell.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Herald replicas on one Postgres schema, e.g. `1,2,3` (one run each, `--chats` ×
    /// `--messages`); writes `load-replicas.json`.
    #[arg(long, value_delimiter = ',')]
    replicas: Option<Vec<usize>>,
    /// Replicas mode: pins replica i to core i % cores.
    #[arg(long)]
    taskset: bool,
    /// The fake model answers after this many milliseconds.
    #[arg(long, default_value_t = 0)]
    model_ms: u64,
    /// The fake model writes each answer in this many pieces over `--model-ms` (a model that
    /// streams; with streaming on, the preview grows as they arrive). 0: the whole answer.
    #[arg(long, default_value_t = 0)]
    model_pieces: usize,
    /// The echo floor binary (default: target/release/examples/echo_floor).
    #[arg(long)]
    floor_bin: Option<PathBuf>,
    /// Passed by `cargo bench`. Without it (`cargo test --all-targets` runs bench targets
    /// too) the benchmark does nothing: a load run is not a test.
    #[arg(long, hide = true)]
    bench: bool,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = Args::parse();
    if !args.bench {
        println!("the load benchmark runs under `cargo bench --bench load`; nothing to do");
        return;
    }
    let dir = args
        .out_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("bench-results"));
    if args.matrix {
        let m = matrix::MatrixArgs {
            chats: args.matrix_chats.clone(),
            turns: args.turns,
            messages: args.matrix_messages,
            rounds: args.rounds.max(1),
            model_ms: args.model_ms,
            timeout: Duration::from_secs(args.timeout),
            herald_bin: args.bin.clone(),
            floor_bin: args.floor_bin.clone(),
        };
        return matrix::run(&m, &dir).await;
    }
    if let Some(counts) = &args.replicas {
        let r = replicas::ReplicaArgs {
            counts: counts.clone(),
            chats: args.chats,
            messages: args.messages,
            taskset: args.taskset,
            model_ms: args.model_ms,
            timeout: Duration::from_secs(args.timeout),
            herald_bin: args.bin.clone(),
        };
        return replicas::run(&r, &dir).await;
    }
    let load_start = loadavg();
    let pacing: &[(&str, &str)] = match args.pacing {
        true => &[("HERALD_TELEGRAM__PACING", "true")],
        false => &[],
    };
    let rig = telegram_load::Rig::start_with(telegram_load::RigOpts {
        webhook: args.webhook,
        bin: args.bin.clone(),
        env: pacing
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        model_delay: Duration::from_millis(args.model_ms),
        model_pieces: args.model_pieces,
        ..Default::default()
    })
    .await;
    let pid = rig.pid();
    if let Some(path) = &args.pid_file {
        std::fs::write(path, pid.to_string()).expect("write pid file");
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle_before = ProcStats::read(pid);
    eprintln!(
        "herald pid {pid} ready in {:.1} ms, idle RSS {:.1} MiB",
        rig.ready_ms, idle_before.rss_mib
    );
    let timeout = Duration::from_secs(args.timeout);
    let grace = Duration::from_secs(1);

    let seed = if args.seed_lanes > 0 {
        let plan = Plan {
            chats: args.seed_lanes,
            first_chat: 1_000_000,
            shape: Shape::Closed {
                messages: 1,
                think: Duration::ZERO,
            },
            reply_timeout: timeout,
        };
        let t = Instant::now();
        let outcome = rig.run(&plan, grace).await;
        let secs = t.elapsed().as_secs_f64() - grace.as_secs_f64();
        let after = ProcStats::read(pid);
        eprintln!(
            "seeded {} lanes in {secs:.1} s ({} lost), RSS {:.1} MiB",
            args.seed_lanes, outcome.tally.lost, after.rss_mib
        );
        Some(json!({
            "lanes": args.seed_lanes,
            "how": "real traffic: one message per new chat, all chats at once, through the same Telegram path",
            "seconds": secs,
            "replies": outcome.replies(),
            "lost": outcome.tally.lost,
            "duplicated": outcome.tally.duplicates,
            "rss_mib_after": after.rss_mib,
        }))
    } else {
        None
    };

    let shape = match args.rate {
        Some(rate) => Shape::Open {
            rate,
            duration: Duration::from_secs_f64(args.duration),
            poisson: !args.uniform,
        },
        None => Shape::Closed {
            messages: args.messages,
            think: Duration::from_millis(args.think_ms),
        },
    };
    let plan = Plan {
        chats: args.chats,
        first_chat: 10_000,
        shape,
        reply_timeout: timeout,
    };
    let before = ProcStats::read(pid);
    let outcome = rig.run(&plan, grace).await;
    let after = ProcStats::read(pid);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let idle_after = ProcStats::read(pid);
    let load_end = loadavg();

    let store = rig.backend.name();
    let report = report(
        &args,
        &rig,
        &outcome,
        seed,
        store,
        [idle_before, before, after, idle_after],
        [load_start, load_end],
    );
    let name = file_stem(&args, store);
    std::fs::create_dir_all(&dir).expect("results dir");
    let pretty = serde_json::to_string_pretty(&report).expect("json");
    println!("{pretty}");
    std::fs::write(dir.join(format!("{name}.json")), pretty + "\n").expect("write json");
    let title = format!(
        "herald, {}",
        name.trim_start_matches("load-").replace('-', " ")
    );
    let lat = outcome.latencies_ms();
    if let Err(e) = plot::latency_histogram(&dir.join(format!("{name}-latency.svg")), &title, &lat)
    {
        eprintln!("latency plot not drawn: {e}");
    }
    if let Err(e) = plot::throughput(
        &dir.join(format!("{name}-throughput.svg")),
        &title,
        &outcome.tally.samples,
    ) {
        eprintln!("throughput plot not drawn: {e}");
    }
    eprintln!("wrote {}", dir.join(format!("{name}.json")).display());
    rig.finish().await;
}

/// `streaming.chats` as the daemon gets it from this process's environment, if set there.
fn streaming() -> Option<String> {
    std::env::var("HERALD_STREAMING__CHATS").ok()
}

/// `load-<store>-<loop and size>[-webhook][-seed<N>]`.
fn file_stem(args: &Args, store: &str) -> String {
    let mut name = match args.rate {
        Some(rate) => format!(
            "load-{store}-open-r{rate}-{}",
            if args.uniform { "uniform" } else { "poisson" }
        ),
        None => format!("load-{store}-closed-c{}x{}", args.chats, args.messages),
    };
    if args.think_ms > 0 {
        name.push_str(&format!("-think{}", args.think_ms));
    }
    if args.pacing {
        name.push_str("-paced");
    }
    if args.model_ms > 0 {
        name.push_str(&format!(
            "-model{}x{}",
            args.model_ms,
            args.model_pieces.max(1)
        ));
    }
    if let Some(chats) = streaming() {
        name.push_str(&format!("-stream-{chats}"));
    }
    if args.webhook {
        name.push_str("-webhook");
    }
    if args.seed_lanes > 0 {
        name.push_str(&format!("-seed{}", args.seed_lanes));
    }
    name
}

/// The JSON report; `stats` are the daemon's /proc figures idle before, right before the
/// measured run, right after it, and idle 3 s after.
fn report(
    args: &Args,
    rig: &Rig,
    outcome: &Outcome,
    seed: Option<Value>,
    store: &str,
    stats: [ProcStats; 4],
    load: [[f64; 3]; 2],
) -> Value {
    let [idle_before, before, after, idle_after] = stats;
    let lat = outcome.latencies_ms();
    let replies = outcome.replies();
    let turns_per_s = replies as f64 / outcome.span_s();
    let cpu_s = after.cpu_s - before.cpu_s;
    let p99 = percentile(&lat, 0.99);
    let closed = args.rate.is_none();
    let seeded = args.seed_lanes + args.chats;
    let mut targets = vec![
        target(
            if store == "postgres" {
                "turns/s ≥ 500 (Postgres)"
            } else {
                "turns/s ≥ 1000 (SQLite)"
            },
            turns_per_s,
            if store == "postgres" { 500.0 } else { 1000.0 },
            true,
        ),
        target(
            "idle RSS < 30 MB (MiB, before traffic)",
            idle_before.rss_mib,
            30.0,
            false,
        ),
        target("spawn to /readyz < 200 ms", rig.ready_ms, 200.0, false),
    ];
    if closed && args.chats == 100 {
        targets.push(target(
            "p99 < 25 ms at 100 concurrent chats",
            p99,
            25.0,
            false,
        ));
    }
    if args.seed_lanes >= 10_000 {
        targets.push(target(
            "peak RSS < 200 MB with 10,000 lanes seen (MiB)",
            after.peak_rss_mib,
            200.0,
            false,
        ));
    }
    json!({
        "benchmark": "telegram load",
        "store": store,
        "transport": rig.transport.name(),
        "loop": if closed { "closed" } else { "open" },
        "chats": args.chats,
        "messages_per_chat": if closed { json!(args.messages) } else { Value::Null },
        "rate_per_s": args.rate,
        "duration_s": if closed { Value::Null } else { json!(args.duration) },
        "arrivals": if closed { Value::Null } else { json!(if args.uniform { "uniform" } else { "poisson" }) },
        "telegram_pacing": if args.pacing { "on (telegram.pacing = true, as in production)" } else { "off (telegram.pacing = false): Telegram's published limits would cap any run at 30 msg/s" },
        "think_ms": args.think_ms,
        "model_ms": args.model_ms,
        "model_pieces": args.model_pieces,
        "streaming_chats": streaming().unwrap_or_else(|| "daemon default".into()),
        "latency_from": if rig.transport.name() == "webhook" {
            "driver starts the webhook POST (open loop: the instant the message was due) → fake records sendMessage"
        } else {
            "update queued in the fake's getUpdates (open loop: the instant the message was due) → fake records sendMessage"
        },
        "binary": rig.gateway.bin().display().to_string(),
        "machine": { "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
                     "loadavg_start": load[0], "loadavg_end": load[1] },
        "ready_ms": rig.ready_ms,
        "telegram_ready_ms": rig.telegram_ready_ms,
        "seed": seed,
        "lanes_seen": seeded,
        "messages": replies + outcome.tally.lost,
        "replies": replies,
        "lost": outcome.tally.lost,
        "duplicated": outcome.tally.duplicates,
        "unexpected_replies": outcome.tally.unexpected,
        "send_errors": outcome.send_errors,
        "elapsed_s": outcome.span_s(),
        "turns_per_s": turns_per_s,
        "latency_ms": {
            "p50": percentile(&lat, 0.50), "p90": percentile(&lat, 0.90), "p99": p99,
            "max": lat.last().copied().unwrap_or(0.0),
            "mean": if lat.is_empty() { 0.0 } else { lat.iter().sum::<f64>() / lat.len() as f64 },
        },
        "final_text_ms": final_text(outcome),
        "daemon": {
            "cpu_s": cpu_s,
            "cpu_ms_per_turn": if replies > 0 { cpu_s * 1000.0 / replies as f64 } else { 0.0 },
            "rss_mib_idle_before": idle_before.rss_mib,
            "rss_mib_before_run": before.rss_mib,
            "rss_mib_after_run": after.rss_mib,
            "rss_mib_idle_after": idle_after.rss_mib,
            "peak_rss_mib": after.peak_rss_mib,
        },
        "targets": targets,
    })
}

/// Latency to each answer's final form: for a streamed answer the outbox's final edit (the
/// preview before it counts in `latency_ms`), otherwise the reply itself.
fn final_text(outcome: &Outcome) -> Value {
    let f = outcome.finals_ms();
    json!({
        "answers": f.len(),
        "p50": percentile(&f, 0.50), "p90": percentile(&f, 0.90), "p99": percentile(&f, 0.99),
        "max": f.last().copied().unwrap_or(0.0),
    })
}

fn target(what: &str, measured: f64, limit: f64, at_least: bool) -> Value {
    let met = if at_least {
        measured >= limit
    } else {
        measured < limit
    };
    json!({ "target": what, "measured": (measured * 10.0).round() / 10.0, "met": met })
}
