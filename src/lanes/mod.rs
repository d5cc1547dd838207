//! Lanes: one worker per active conversation, one turn at a time per lane, lanes in parallel.
//!
//! The inbox in the store is the queue; the router only carries wake-ups, so a full channel or
//! a crash can delay work but never lose it. A worker holds the lane's turn lease for as long
//! as it runs, and every transcript write it makes is checked against that lease.

mod activity;
mod agent_cmd;
mod approvals;
pub mod budget_events;
mod clock;
pub mod commands;
pub mod committer;
mod control;
#[doc(hidden)]
pub mod fault;
mod heartbeat;
mod ingest;
mod placement;
mod preview;
mod process;
mod reply;
mod router;
mod send_message;
mod session;
mod signals;
mod status;
mod steer;
mod stream_hub;
mod turn;
mod usage;
mod voice;
mod worker;

use std::sync::Arc;

use tokio::sync::{broadcast, Notify};

use crate::agent::tools::ToolCatalog;
use crate::config::Config;
use crate::delivery::Outbounds;
use crate::hooks::{HookChain, PreLlmChain};
use crate::store::Store;

pub use agent_cmd::CarryOver;
pub use approvals::{
    answer_in_words, question_in_words, Approvals, Press, PressOutcome, WordReply, ASK_IN_WORDS,
};
pub use ingest::{Ingest, Wakes};
pub use router::{LaneRouter, LaneView};
pub use send_message::SendMessage;
pub use stream_hub::{StreamEvent, StreamHub, StreamKind};
pub use turn::OVER_BUDGET;

/// Everything a lane worker needs, built once in `app`.
pub struct Deps {
    pub config: Arc<Config>,
    pub store: Arc<dyn Store>,
    /// The agents and their routing, read once at the start of each turn (`crate::agent::roster`);
    /// a reload swaps in a new generation.
    pub agents: Arc<crate::agent::roster::LiveAgents>,
    /// Snapshotted into one turn's tool list before each turn, never during one.
    pub tools: ToolCatalog,
    pub pre_dispatch: HookChain,
    pub pre_llm: PreLlmChain,
    pub outbounds: Outbounds,
    /// This replica's name; lease holders are `<replica>/<worker>`.
    pub replica_id: String,
    /// Poked after a commit that queued outbox rows.
    pub outbox_wake: Arc<Notify>,
    /// Inbox ids whose processing finished (answered, failed or skipped).
    pub finished: broadcast::Sender<i64>,
    /// Asks people before tool calls that need their word, and takes their answers.
    pub approvals: Approvals,
    /// Who may use the agent, and who is an admin (`/new` in a group).
    pub auth: crate::hooks::Authorizer,
    /// The memory provider (`[memory.provider]`), told about compactions; it is also in
    /// `pre_llm`.
    pub recall: Option<Arc<crate::hooks::MemoryRecall>>,
    /// Bytes of fetched files and of files tools produced (`<data_dir>/media`).
    pub media_cache: crate::media::MediaCache,
    /// Reads what people attach (fetch, transcribe, extract).
    pub media: Arc<crate::media::MediaReader>,
    /// Prices and caps every model call of a turn.
    pub budget: Arc<crate::budget::Budget>,
    /// Lands turn starts and commits, several lanes' in one transaction (group commit).
    pub committer: Arc<committer::Committer>,
    /// Writes the capsule of a session `/agent` leaves (the handoff builder; `None`: no capsule).
    pub carry_over: Option<Arc<dyn CarryOver>>,
}
