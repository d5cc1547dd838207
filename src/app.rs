//! Wiring and supervision (placeholder).
