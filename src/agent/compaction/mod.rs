//! Deterministic context compaction (placeholder; issue 9).
