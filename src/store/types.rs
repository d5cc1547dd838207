//! Row types that cross the store boundary. Serializable because the admin API shows them.

use serde::{Deserialize, Serialize};

pub use super::outbox_key::{OutboxKey, ReplyKey};
pub use super::status::{InboxStatus, OutboxStatus, TurnStatus};
pub use crate::domain::SessionId;
use crate::domain::{Attachment, LaneKey, MessageEvent, Platform, Role, ToolCall};

/// Proof of holding a named lease (a lane's turn lease, or a singleton role such as the
/// Telegram poller). The fencing token grows on every takeover: a write carrying an old token
/// is refused inside its transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub name: String,
    pub holder: String,
    pub token: i64,
}

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct LeaseInfo {
    pub name: String,
    pub holder: String,
    pub token: i64,
    pub expires_at: i64,
    pub acquired_at: i64,
}

impl LeaseInfo {
    /// The replica whose worker holds the lease: a holder is `<replica id>/<worker>` (a role
    /// or liveness lease's holder is the replica id itself).
    pub fn replica(&self) -> &str {
        self.holder
            .rsplit_once('/')
            .map_or(&*self.holder, |(r, _)| r)
    }
}

/// A schema migration shipped in the binary (`herald migrate` reports them one by one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationInfo {
    pub version: i64,
    pub description: String,
}

/// Result of writing an event to the inbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InboxInsert {
    Inserted(i64),
    /// The platform redelivered an update we already have: nothing was written.
    Duplicate(i64),
}

impl InboxInsert {
    pub fn id(self) -> i64 {
        match self {
            InboxInsert::Inserted(id) | InboxInsert::Duplicate(id) => id,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct InboxRow {
    pub id: i64,
    pub lane: LaneKey,
    pub event: MessageEvent,
    pub status: InboxStatus,
    pub attempts: i64,
    pub note: Option<String>,
    pub session_id: Option<SessionId>,
    pub reply_message_id: Option<i64>,
    pub received_at: i64,
}

/// An inbound event given up after its last allowed attempt (status `dead`), with when.
#[derive(Debug, Clone, Serialize)]
pub struct DeadLetter {
    pub row: InboxRow,
    pub dead_at: i64,
}

impl DeadLetter {
    /// The start of the message's text on one line, at most `chars` characters (an ellipsis
    /// marks a cut), for listings.
    pub fn preview(&self, chars: usize) -> String {
        let text = self
            .row
            .event
            .text
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        match text.char_indices().nth(chars) {
            Some((cut, _)) => format!("{}…", &text[..cut]),
            None => text,
        }
    }

    /// Why it was given up, as the worker recorded it.
    pub fn reason(&self) -> &str {
        self.row.note.as_deref().unwrap_or("")
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
pub struct Session {
    pub id: SessionId,
    #[sqlx(try_from = "String")]
    pub lane: LaneKey,
    pub parent_id: Option<SessionId>,
    pub started_at: i64,
    pub ended_at: Option<i64>,
    pub end_reason: Option<String>,
    pub system_prompt: String,
    pub model: String,
    pub compaction_strikes: i64,
    pub fallback_streak: i64,
    pub cooldown_until: Option<i64>,
    /// The agent that serves this session (`crate::agent::roster`; `default` for `[agent]`).
    pub agent: String,
}

impl Session {
    /// An open session of `lane` with no parent and no history of strikes or fallbacks.
    pub fn new(
        id: impl Into<SessionId>,
        lane: LaneKey,
        started_at: i64,
        system_prompt: impl Into<String>,
        model: impl Into<String>,
    ) -> Session {
        Session {
            id: id.into(),
            lane,
            parent_id: None,
            started_at,
            ended_at: None,
            end_reason: None,
            system_prompt: system_prompt.into(),
            model: model.into(),
            compaction_strikes: 0,
            fallback_streak: 0,
            cooldown_until: None,
            agent: crate::config::DEFAULT_AGENT.to_string(),
        }
    }
}

/// A message about to be appended to a transcript.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMessage {
    pub role: Role,
    pub content: String,
    /// The exact bytes sent to the provider when they differ from `content`.
    pub api_content: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub tool_call_id: Option<String>,
    pub tool_name: Option<String>,
    pub platform_message_id: Option<String>,
    /// Files the message carried, by reference (a person's photo, a tool's image).
    pub media: Vec<Attachment>,
}

impl NewMessage {
    pub fn new(role: Role, content: impl Into<String>) -> NewMessage {
        NewMessage {
            role,
            content: content.into(),
            api_content: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
            platform_message_id: None,
            media: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct StoredMessage {
    pub id: i64,
    pub session_id: SessionId,
    pub role: Role,
    pub content: String,
    pub api_content: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub tool_call_id: Option<String>,
    pub tool_name: Option<String>,
    pub active: bool,
    pub compacted: bool,
    /// The platform's id of the message a person sent, on the user row that records it; `None`
    /// on every row Herald wrote itself (replies, tool traffic, compaction carriers, delivery
    /// mirrors, media acknowledgements).
    pub platform_message_id: Option<String>,
    /// Files the row carries, by reference.
    pub media: Vec<Attachment>,
    pub created_at: i64,
}

impl StoredMessage {
    /// A request a person wrote: a user row that carries the platform id of their message.
    /// This is what "the first turn" and "the latest user request" mean everywhere; a
    /// synthetic user row (a brief's mirror, a compaction carrier) never passes for one.
    pub fn is_person_request(&self) -> bool {
        self.role == Role::User && self.platform_message_id.is_some()
    }

    /// The live row a commit made of `m` under `id` (what a read would return, but for
    /// `created_at`, which is the caller's clock).
    pub fn committed(
        id: i64,
        session_id: &SessionId,
        m: &NewMessage,
        created_at: i64,
    ) -> StoredMessage {
        StoredMessage {
            id,
            session_id: session_id.clone(),
            role: m.role,
            content: m.content.clone(),
            api_content: m.api_content.clone(),
            tool_calls: m.tool_calls.clone(),
            tool_call_id: m.tool_call_id.clone(),
            tool_name: m.tool_name.clone(),
            active: true,
            compacted: false,
            platform_message_id: m.platform_message_id.clone(),
            media: m.media.clone(),
            created_at,
        }
    }

    /// What replay sends to the provider: `api_content` verbatim when present.
    pub fn wire_content(&self) -> &str {
        self.api_content.as_deref().unwrap_or(&self.content)
    }
}

/// One reply chunk to deliver.
#[derive(Debug, Clone, PartialEq)]
pub struct NewOutbox {
    pub key: OutboxKey,
    pub lane: LaneKey,
    pub platform: Platform,
    pub chat_id: String,
    pub thread_id: Option<String>,
    pub reply_to: Option<String>,
    pub inbox_id: Option<i64>,
    pub chunk_index: i64,
    pub text: String,
    /// A file this row sends (then `text` is its caption, usually empty), by reference.
    pub media: Option<Attachment>,
}

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct OutboxRow {
    pub id: i64,
    pub idem_key: String,
    /// The reply this row is a chunk of (see [`OutboxKey`]); none for a row on its own.
    #[serde(skip)]
    pub reply_key: Option<String>,
    #[sqlx(try_from = "String")]
    pub lane: LaneKey,
    #[sqlx(try_from = "String")]
    pub platform: Platform,
    pub chat_id: String,
    pub thread_id: Option<String>,
    pub reply_to: Option<String>,
    pub inbox_id: Option<i64>,
    pub chunk_index: i64,
    pub text: String,
    #[sqlx(try_from = "String")]
    pub status: OutboxStatus,
    pub attempts: i64,
    pub platform_message_id: Option<String>,
    pub last_error: Option<String>,
    pub created_at: i64,
    pub sent_at: Option<i64>,
    /// The file the row sends, as stored (JSON of an [`Attachment`]); see [`OutboxRow::file`].
    #[serde(skip)]
    pub media: Option<String>,
}

/// Why an outbox row's file reference gave no file.
#[derive(Debug, thiserror::Error)]
pub enum FileRefError {
    #[error("the stored file reference does not read: {0}")]
    Unreadable(#[source] serde_json::Error),
}

impl OutboxRow {
    /// The file this row sends, if it is a file row. `Err` when the stored reference does not
    /// read (the sender reports it in the chat rather than guess).
    pub fn file(&self) -> Result<Option<Attachment>, FileRefError> {
        match &self.media {
            None => Ok(None),
            Some(json) => serde_json::from_str(json)
                .map(Some)
                .map_err(FileRefError::Unreadable),
        }
    }

    /// The reply this row is a chunk of, as it was stored with the row.
    pub fn reply(&self) -> Option<ReplyKey> {
        self.reply_key.clone().map(ReplyKey::stored)
    }
}

/// The context state a turn's commit writes, computed from the ids of the rows it inserted.
pub type ContextAfterCommit<'a> =
    dyn Fn(&[i64]) -> Option<super::context::ContextRow> + Send + Sync + 'a;

/// The inbox event a turn answers, and which start of it this is (1 for the first). The
/// worker counted the start when it took the row (`InboxStore::inbox_take`); the turn's start
/// raises the stored count to at least `attempt` and so never counts a start twice (it matters
/// only to a caller that did not take the row).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InboxAttempt {
    pub id: i64,
    pub attempt: i64,
}

impl InboxAttempt {
    pub fn first(id: i64) -> InboxAttempt {
        InboxAttempt { id, attempt: 1 }
    }
}

/// Everything a finished turn writes, landed in one transaction under the lease check.
#[derive(Debug, Clone)]
pub struct TurnCommit {
    pub turn_id: i64,
    pub session_id: SessionId,
    pub messages: Vec<NewMessage>,
    pub outbox: Vec<NewOutbox>,
    pub inbox_id: Option<i64>,
    /// Later inbox rows the turn took in mid-turn (corrections): marked like `inbox_id`, with
    /// the same reply, in the same transaction.
    pub steered: Vec<i64>,
    pub inbox_status: InboxStatus,
    pub note: Option<String>,
    /// Ends the session in the same transaction, with this end reason (cron fires: one
    /// session per fire).
    pub close_session: Option<String>,
    /// Follow-up events written to the inbox in the same transaction (deduplicated like any
    /// inbound event): delivery mirrors into target lanes, session rotations.
    pub enqueue: Vec<MessageEvent>,
    /// What the turn's model calls billed, and what that cost (`None`: unknown or unpriced).
    pub billed: super::Billed,
    pub cost: Option<i64>,
}

impl TurnCommit {
    /// A commit with only the required parts; the optional ones empty.
    pub fn new(
        turn_id: i64,
        session_id: &SessionId,
        inbox_id: Option<i64>,
        status: InboxStatus,
    ) -> TurnCommit {
        TurnCommit {
            turn_id,
            session_id: session_id.clone(),
            messages: Vec::new(),
            outbox: Vec::new(),
            inbox_id,
            steered: Vec::new(),
            inbox_status: status,
            note: None,
            close_session: None,
            enqueue: Vec::new(),
            billed: super::Billed::default(),
            cost: None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct TurnCommitted {
    pub message_ids: Vec<i64>,
    /// The context state the commit wrote (what its [`ContextAfterCommit`] returned).
    pub context: Option<super::context::ContextRow>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct OutboxCounts {
    pub pending: i64,
    pub sending: i64,
    pub sent: i64,
    pub failed: i64,
}

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct LaneOverview {
    #[sqlx(try_from = "String")]
    pub lane: LaneKey,
    pub pending: i64,
    pub last_activity: i64,
    pub lease_holder: Option<String>,
    pub lease_expires_at: Option<i64>,
    pub session_id: Option<SessionId>,
}

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct TurnRow {
    pub id: i64,
    #[sqlx(try_from = "String")]
    pub lane: LaneKey,
    pub session_id: SessionId,
    pub inbox_id: Option<i64>,
    pub holder: String,
    pub token: i64,
    #[sqlx(try_from = "String")]
    pub status: TurnStatus,
    pub started_at: i64,
    pub ended_at: Option<i64>,
    /// What the turn's model calls billed.
    #[sqlx(flatten)]
    pub billed: super::Billed,
    /// Their cost in billionths of the budget's currency (`None`: unknown or unpriced).
    pub cost: Option<i64>,
}
