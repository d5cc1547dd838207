//! telemetry (placeholder; filled in by its issue).
