//! config (placeholder; filled in by its issue).
