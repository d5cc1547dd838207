//! How a handoff capsule build ended. It lives in the domain because the store keeps it as a
//! typed column of the capsule rows, and the handoff builder, the API and the CLI report it.

use serde::{Deserialize, Serialize};

/// How a capsule build ended. `Degraded` means a file was written but holds the filtered
/// transcript, not a summary; it is reported as such in logs, metrics and the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BuildStatus {
    Ok,
    Degraded,
    TooShort,
    AlreadyRunning,
    WriteFailed,
    ScrubFailed,
}

impl BuildStatus {
    pub const ALL: [BuildStatus; 6] = [
        BuildStatus::Ok,
        BuildStatus::Degraded,
        BuildStatus::TooShort,
        BuildStatus::AlreadyRunning,
        BuildStatus::WriteFailed,
        BuildStatus::ScrubFailed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            BuildStatus::Ok => "ok",
            BuildStatus::Degraded => "degraded",
            BuildStatus::TooShort => "too_short",
            BuildStatus::AlreadyRunning => "already_running",
            BuildStatus::WriteFailed => "write_failed",
            BuildStatus::ScrubFailed => "scrub_failed",
        }
    }

    pub fn parse(s: &str) -> Option<BuildStatus> {
        BuildStatus::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// True when a capsule was stored (a real one or the degraded transcript).
    pub fn wrote_capsule(self) -> bool {
        matches!(self, BuildStatus::Ok | BuildStatus::Degraded)
    }
}

impl std::fmt::Display for BuildStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
