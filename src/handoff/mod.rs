//! handoff (placeholder; filled in by its issue).
