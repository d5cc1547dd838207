//! `lanes.mid_turn`: what a person's message does when it arrives while their conversation's
//! turn is still running. Its own file because it is a choice about how the agent listens,
//! not about workers or leases.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MidTurn {
    /// The message joins the running turn at its next safe point, as a user message after the
    /// text shown so far; one answer covers both. A group member's message says who wrote it.
    #[default]
    Steer,
    /// The message waits for the next turn.
    Queue,
    /// The running turn stops (like `/stop`) and a new one starts with everything pending from
    /// the same person.
    Interrupt,
}

impl MidTurn {
    pub fn as_str(self) -> &'static str {
        match self {
            MidTurn::Steer => "steer",
            MidTurn::Queue => "queue",
            MidTurn::Interrupt => "interrupt",
        }
    }
}
