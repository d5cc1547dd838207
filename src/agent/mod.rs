//! The agent side of a turn: prompt assembly, the tool-calling loop, and context compaction.

pub mod compaction;
