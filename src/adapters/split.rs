//! Platform-aware message splitting (placeholder).
