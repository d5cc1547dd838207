//! llm (placeholder; filled in by its issue).
