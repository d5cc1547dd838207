//! An outbox row's idempotency key, typed, built in this one place.
//!
//! A key names the reply a row belongs to and the row's place in it. The text
//! (`{reply}:{chunk}`) is the unique `idem_key` of the row, and must stay byte for byte what
//! earlier releases wrote (rows already queued carry it); the reply is also stored as a column
//! of its own (`reply_key`), so the sender finds a reply's other chunks by that column and
//! never takes a key's text apart.

use std::fmt;

use crate::domain::LaneKey;

/// Which reply an outbox row belongs to: every chunk of one reply shares it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReplyKey(String);

impl ReplyKey {
    /// The answer of `kind` (`turn`, `command`, …) to inbox row `inbox_id` of `lane`.
    pub fn answer(lane: &LaneKey, inbox_id: i64, kind: &str) -> ReplyKey {
        ReplyKey(format!("{lane}:{inbox_id}:{kind}"))
    }

    /// A brief delivered to `target`, answering inbox row `inbox_id` of lane `from`.
    pub fn brief(target: &LaneKey, from: &LaneKey, inbox_id: i64) -> ReplyKey {
        ReplyKey(format!("{target}:{from}:{inbox_id}:brief"))
    }

    /// A message the agent sent with `send_message` (the `call`th tool call of the turn
    /// answering inbox row `inbox_id` of lane `from`).
    pub fn sent(from: &LaneKey, inbox_id: i64, call: usize) -> ReplyKey {
        ReplyKey(format!("send:{from}:{inbox_id}:{call}"))
    }

    /// The one notice that stands in for the rest of this reply when a chunk of it failed
    /// for good.
    pub fn notice(&self) -> ReplyKey {
        ReplyKey(format!("{}:{NOTICE}", self.0))
    }

    /// A notice built by [`ReplyKey::notice`]: when it fails, no notice follows it.
    pub fn is_notice(&self) -> bool {
        self.0
            .strip_suffix(NOTICE)
            .is_some_and(|rest| rest.ends_with(':'))
    }

    /// The reply as the store keeps it in the `reply_key` column.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A reply read back from the `reply_key` column, as it was written.
    pub(crate) fn stored(s: String) -> ReplyKey {
        ReplyKey(s)
    }
}

const NOTICE: &str = "notice";

impl fmt::Display for ReplyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An outbox row's key: a chunk of a reply, a file sent after a reply's text, or a row that
/// is a whole message on its own (a notice a control event carries its own key for, a
/// pairing message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutboxKey {
    Chunk {
        reply: ReplyKey,
        chunk: i64,
    },
    /// The `index`th file of a reply (`{reply}:file:{index}`), after its text chunks.
    File {
        reply: ReplyKey,
        index: i64,
    },
    Single(String),
}

impl OutboxKey {
    pub fn chunk(reply: ReplyKey, chunk: usize) -> OutboxKey {
        OutboxKey::Chunk {
            reply,
            chunk: chunk as i64,
        }
    }

    /// The `index`th file of `reply`.
    pub fn file(reply: ReplyKey, index: usize) -> OutboxKey {
        OutboxKey::File {
            reply,
            index: index as i64,
        }
    }

    /// The row's idempotency key (the `idem_key` column).
    pub fn idem_key(&self) -> String {
        match self {
            OutboxKey::Chunk { reply, chunk } => format!("{reply}:{chunk}"),
            OutboxKey::File { reply, index } => format!("{reply}:file:{index}"),
            OutboxKey::Single(key) => key.clone(),
        }
    }

    /// The reply whose chunks this row is one of; none for a row on its own.
    pub fn reply(&self) -> Option<&ReplyKey> {
        match self {
            OutboxKey::Chunk { reply, .. } | OutboxKey::File { reply, .. } => Some(reply),
            OutboxKey::Single(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_keys_follow_the_reply_and_never_meet_a_chunk() {
        let reply = ReplyKey::answer(&LaneKey::parse("telegram:5"), 9, "turn");
        let file = OutboxKey::file(reply.clone(), 0);
        assert_eq!(file.idem_key(), "telegram:5:9:turn:file:0");
        assert_eq!(file.reply(), Some(&reply));
        assert_ne!(file.idem_key(), OutboxKey::chunk(reply, 0).idem_key());
    }
}
