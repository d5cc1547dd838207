//! The `[handoff]` section: capsule writing, injection and the confidential lanes.
//!
//! Kept apart from the core sections so the feature's keys read as one block. Only settings
//! live here; what a capsule is and how it is built is `crate::handoff`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::Endpoint;
use crate::domain::cron::{parse_schedule, Schedule, ScheduleError};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HandoffConfig {
    /// The `handoff` word and `/wrapup` start a capsule; off: they are ordinary messages.
    pub enabled: bool,
    /// Hand the capsule to the next session's first turn. Off: capsules are still written
    /// (to audit the writer) but never injected.
    pub inject: bool,
    /// The writer model and its fallbacks, tried in order. Empty: the main `[llm]` chain.
    pub writer: Vec<Endpoint>,
    /// Every lane is confidential: 400-word breadcrumb, scrubbed, no Recovery, no fallback.
    pub confidential: bool,
    /// Lanes (e.g. `telegram:12345`) that are confidential when `confidential` is off.
    pub confidential_lanes: Vec<String>,
    /// Also write each capsule to `<export_dir>/handoff-<lane>.md` for file-based watchdogs.
    pub export_dir: Option<PathBuf>,
    /// A build holds its lane's slot at most this long (a crashed replica's claim expires).
    pub build_timeout_secs: u64,
    /// When the nightly closer runs: a five-field cron expression (or `every …`) read on the
    /// wall clock of `nightly_timezone`. Empty, the default: no scheduled pass, because each
    /// one spends writer-model tokens (`herald handoff nightly` still runs one by hand).
    pub nightly: String,
    /// IANA zone of `nightly` (e.g. `Europe/Berlin`).
    pub nightly_timezone: String,
    /// Most capsules one night's pass writes (every writer call counts, whatever its status).
    pub nightly_cap: u32,
    /// A conversation needs at least this many user/assistant messages in its open session.
    pub nightly_min_messages: u32,
    /// …its last message no older than this many hours…
    pub nightly_active_within_hours: u64,
    /// …and no newer than this many minutes.
    pub nightly_idle_minutes: u64,
}

impl Default for HandoffConfig {
    fn default() -> Self {
        HandoffConfig {
            enabled: true,
            inject: true,
            writer: Vec::new(),
            confidential: false,
            confidential_lanes: Vec::new(),
            export_dir: None,
            build_timeout_secs: 900,
            nightly: String::new(),
            nightly_timezone: "UTC".into(),
            nightly_cap: 20,
            nightly_min_messages: 6,
            nightly_active_within_hours: 72,
            nightly_idle_minutes: 60,
        }
    }
}

impl HandoffConfig {
    pub fn is_confidential(&self, lane: &str) -> bool {
        self.confidential || self.confidential_lanes.iter().any(|l| l == lane)
    }

    /// The parsed `nightly` schedule, `None` when it is off; an error names the key at fault.
    /// A one-shot timestamp is refused: the closer is a recurring job.
    pub fn nightly_schedule(&self) -> Result<Option<Schedule>, (&'static str, String)> {
        if self.nightly.trim().is_empty() {
            return Ok(None);
        }
        match parse_schedule(&self.nightly, Some(&self.nightly_timezone)) {
            Ok(Schedule::Once(_)) => Err((
                "handoff.nightly",
                "a one-shot time never repeats; use a cron expression such as \"0 3 * * *\"".into(),
            )),
            Ok(s) => Ok(Some(s)),
            Err(e @ ScheduleError::UnknownTimeZone(_)) => {
                Err(("handoff.nightly_timezone", e.to_string()))
            }
            Err(e) => Err(("handoff.nightly", e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nightly_schedule_table() {
        // (nightly, timezone, Ok(on?) or Err(key at fault))
        let cases: Vec<(&str, &str, Result<bool, &str>)> = vec![
            ("0 3 * * *", "UTC", Ok(true)),
            ("30 2 * * 1-5", "Europe/Berlin", Ok(true)),
            ("every 1d", "UTC", Ok(true)),
            ("", "UTC", Ok(false)),
            ("   ", "Mars/Olympus", Ok(false)),
            ("0 3 * *", "UTC", Err("handoff.nightly")),
            ("2026-12-01T03:00:00Z", "UTC", Err("handoff.nightly")),
            (
                "0 3 * * *",
                "Europe/Atlantis",
                Err("handoff.nightly_timezone"),
            ),
        ];
        for (nightly, tz, want) in cases {
            let c = HandoffConfig {
                nightly: nightly.into(),
                nightly_timezone: tz.into(),
                ..HandoffConfig::default()
            };
            let got = c
                .nightly_schedule()
                .map(|s| s.is_some())
                .map_err(|(k, _)| k);
            assert_eq!(got, want, "{nightly:?} in {tz}");
        }
    }

    #[test]
    fn nightly_is_opt_in() {
        // A fresh install must not spend model tokens every night unasked.
        assert!(HandoffConfig::default()
            .nightly_schedule()
            .unwrap()
            .is_none());
    }
}
