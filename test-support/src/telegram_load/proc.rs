//! What the kernel says about the daemon process: resident memory now and at its peak
//! (`VmRSS`, `VmHWM` in /proc/<pid>/status), CPU seconds (utime + stime in /proc/<pid>/stat)
//! and the machine's load average, which the report carries because the machine is shared.
//!
//! Must not: measure the driver's own process; every figure is the daemon's pid.

/// USER_HZ: /proc reports CPU time in these ticks, 100 on every Linux build we run on.
const TICKS_PER_SEC: f64 = 100.0;

#[derive(Debug, Clone, Copy, Default)]
pub struct ProcStats {
    pub rss_mib: f64,
    pub peak_rss_mib: f64,
    pub cpu_s: f64,
}

impl ProcStats {
    pub fn read(pid: u32) -> ProcStats {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let kib = |field: &str| -> f64 {
            status
                .lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        ProcStats {
            rss_mib: kib("VmRSS:") / 1024.0,
            peak_rss_mib: kib("VmHWM:") / 1024.0,
            cpu_s: cpu_seconds(pid),
        }
    }
}

fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name (field 2) may contain spaces; the fields after its ')' are fixed.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): utime is field 14, stime field 15.
    let ticks = |i: usize| fields.get(i - 3).and_then(|v| v.parse::<f64>().ok());
    match (ticks(14), ticks(15)) {
        (Some(u), Some(s)) => (u + s) / TICKS_PER_SEC,
        _ => 0.0,
    }
}

/// The 1-, 5- and 15-minute load averages.
pub fn loadavg() -> [f64; 3] {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut it = text
        .split_whitespace()
        .map(|v| v.parse::<f64>().unwrap_or(0.0));
    [
        it.next().unwrap_or(0.0),
        it.next().unwrap_or(0.0),
        it.next().unwrap_or(0.0),
    ]
}
