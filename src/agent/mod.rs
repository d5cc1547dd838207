//! The agent side of a turn: prompt assembly, the tool-calling loop, and context compaction.
//! Nothing here writes to the store except the context engine, which compacts a transcript
//! through the lane's lease before a turn; the lane worker lands what a turn produced.

pub mod compaction;
pub mod context;
pub mod delegate;
mod dispatch;
pub mod mcp;
pub mod memory;
pub mod prompt;
pub mod roster;
pub mod skill_manage;
pub mod skills;
pub mod steer;
pub mod tools;
pub mod turn;
pub mod turn_files;
