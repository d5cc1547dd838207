//! The agent side of a turn: prompt assembly, the tool-calling loop, and context compaction.
//! Nothing here writes to the store; the lane worker lands what a turn produced.

pub mod compaction;
pub mod prompt;
pub mod tools;
pub mod turn;
