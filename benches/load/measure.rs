//! One measured run of the matrix and replicas modes: a fresh rig (Herald or the echo floor),
//! a short warm-up on other chats, then the closed loop, with the gateway's CPU time and heap
//! allocations read right before and right after it (before the grace wait, so idle time after
//! the last reply is not charged to the turns).
//!
//! Must not: read the driver's own process; every figure comes from the gateway's pids.

use std::time::Duration;

use herald_test_support::telegram_load::proc::ProcStats;
use herald_test_support::telegram_load::{percentile, Plan, Rig, RigOpts, Shape};
use serde::Serialize;

/// What one run measured; per-turn figures divide by the replies.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    /// `herald-sqlite`, `herald-postgres` or `floor`.
    pub gateway: String,
    pub chats: usize,
    pub messages_per_chat: usize,
    pub replies: usize,
    pub lost: usize,
    pub duplicated: usize,
    pub turns_per_s: f64,
    pub cpu_s: f64,
    pub cpu_ms_per_turn: f64,
    /// `None` when the binary counts no allocations (Herald without `count-alloc`).
    pub allocs_per_turn: Option<f64>,
    pub alloc_kib_per_turn: Option<f64>,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub rss_mib_after: f64,
    /// Per process (replicas), in start order: pid's CPU seconds during the run.
    pub cpu_s_per_process: Vec<f64>,
}

/// The rig after a measured run, for callers that read more (the replicas' turns).
pub struct Measured {
    pub run: Run,
    pub rig: Rig,
}

pub async fn measure(
    label: &str,
    opts: RigOpts,
    chats: usize,
    messages: usize,
    timeout: Duration,
) -> Measured {
    let rig = Rig::start_with(opts).await;
    let warm = Plan {
        chats: chats.min(10),
        first_chat: 900_000,
        shape: Shape::Closed {
            messages: 2,
            think: Duration::ZERO,
        },
        reply_timeout: timeout,
    };
    let warmed = rig.run(&warm, Duration::ZERO).await;
    assert_eq!(
        warmed.tally.lost,
        0,
        "warm-up lost messages; log:\n{}",
        rig.gateway.log_tail()
    );
    let plan = Plan {
        chats,
        first_chat: 10_000,
        shape: Shape::Closed {
            messages,
            think: Duration::ZERO,
        },
        reply_timeout: timeout,
    };
    let pids = rig.gateway.pids();
    let cpu =
        |pids: &[u32]| -> Vec<f64> { pids.iter().map(|p| ProcStats::read(*p).cpu_s).collect() };
    let (cpu0, alloc0) = (cpu(&pids), rig.gateway.allocations().await);
    let mut outcome = rig.run(&plan, Duration::ZERO).await;
    let (cpu1, alloc1) = (cpu(&pids), rig.gateway.allocations().await);
    let after = ProcStats::read(pids[0]);
    // A late duplicate still counts.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let late = rig.tracker.take();
    outcome.tally.duplicates += late.duplicates;

    let replies = outcome.replies();
    let per_turn = |x: f64| if replies > 0 { x / replies as f64 } else { 0.0 };
    let per_process: Vec<f64> = cpu0.iter().zip(&cpu1).map(|(a, b)| b - a).collect();
    let cpu_s: f64 = per_process.iter().sum();
    let allocs = alloc0.zip(alloc1).map(|(a, b)| {
        let sum = |v: &[(u64, u64)]| v.iter().fold((0u64, 0u64), |s, x| (s.0 + x.0, s.1 + x.1));
        let ((c0, b0), (c1, b1)) = (sum(&a), sum(&b));
        (c1.saturating_sub(c0) as f64, b1.saturating_sub(b0) as f64)
    });
    let lat = outcome.latencies_ms();
    let run = Run {
        gateway: label.to_string(),
        chats,
        messages_per_chat: messages,
        replies,
        lost: outcome.tally.lost,
        duplicated: outcome.tally.duplicates,
        turns_per_s: replies as f64 / outcome.span_s(),
        cpu_s,
        cpu_ms_per_turn: per_turn(cpu_s * 1000.0),
        allocs_per_turn: allocs.map(|(c, _)| per_turn(c)),
        alloc_kib_per_turn: allocs.map(|(_, b)| per_turn(b / 1024.0)),
        p50_ms: percentile(&lat, 0.50),
        p99_ms: percentile(&lat, 0.99),
        rss_mib_after: after.rss_mib,
        cpu_s_per_process: per_process,
    };
    Measured { run, rig }
}
