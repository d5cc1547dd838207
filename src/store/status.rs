//! The status columns of the inbox, outbox and turns tables, as enums.
//!
//! A status is TEXT in both schemas. Reading a value this binary does not know is an error,
//! never a guess: mapping an unknown inbox status to `pending` would run an event again, and an
//! unknown outbox status could send a reply twice. Each enum reads (`parse`, or `TryFrom<String>`
//! for `sqlx::FromRow` rows) and writes (`as_str`) the same lowercase words, and serializes as
//! them too, so the admin API shows what the table holds.

use serde::{Deserialize, Serialize};

use super::StoreError;

fn unknown(column: &str, value: &str) -> StoreError {
    StoreError::other(format!("unknown {column} status {value:?} in the store"))
}

/// Where an inbound event is: waiting for a turn, or closed one way or another. `Dead`: given
/// up after `inbox.max_attempts` starts (a poison message); only an operator's
/// `herald inbox retry` brings it back to `Pending`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InboxStatus {
    Pending,
    Done,
    Failed,
    Skipped,
    Dead,
}

impl InboxStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            InboxStatus::Pending => "pending",
            InboxStatus::Done => "done",
            InboxStatus::Failed => "failed",
            InboxStatus::Skipped => "skipped",
            InboxStatus::Dead => "dead",
        }
    }

    pub fn parse(s: &str) -> Result<InboxStatus, StoreError> {
        Ok(match s {
            "pending" => InboxStatus::Pending,
            "done" => InboxStatus::Done,
            "failed" => InboxStatus::Failed,
            "skipped" => InboxStatus::Skipped,
            "dead" => InboxStatus::Dead,
            _ => return Err(unknown("inbox", s)),
        })
    }
}

impl TryFrom<String> for InboxStatus {
    type Error = StoreError;
    fn try_from(s: String) -> Result<InboxStatus, StoreError> {
        InboxStatus::parse(&s)
    }
}

/// Where a reply chunk is: waiting (or backing off), claimed by a sender, sent, or given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutboxStatus {
    Pending,
    Sending,
    Sent,
    Failed,
}

impl OutboxStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            OutboxStatus::Pending => "pending",
            OutboxStatus::Sending => "sending",
            OutboxStatus::Sent => "sent",
            OutboxStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Result<OutboxStatus, StoreError> {
        Ok(match s {
            "pending" => OutboxStatus::Pending,
            "sending" => OutboxStatus::Sending,
            "sent" => OutboxStatus::Sent,
            "failed" => OutboxStatus::Failed,
            _ => return Err(unknown("outbox", s)),
        })
    }
}

impl TryFrom<String> for OutboxStatus {
    type Error = StoreError;
    fn try_from(s: String) -> Result<OutboxStatus, StoreError> {
        OutboxStatus::parse(&s)
    }
}

/// Where a turn is: running under its lease, finished with its inbox event's status, or
/// abandoned by a worker that lost its lease or crashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TurnStatus {
    Running,
    Pending,
    Done,
    Failed,
    Skipped,
    Abandoned,
}

impl TurnStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnStatus::Running => "running",
            TurnStatus::Pending => "pending",
            TurnStatus::Done => "done",
            TurnStatus::Failed => "failed",
            TurnStatus::Skipped => "skipped",
            TurnStatus::Abandoned => "abandoned",
        }
    }

    pub fn parse(s: &str) -> Result<TurnStatus, StoreError> {
        Ok(match s {
            "running" => TurnStatus::Running,
            "pending" => TurnStatus::Pending,
            "done" => TurnStatus::Done,
            "failed" => TurnStatus::Failed,
            "skipped" => TurnStatus::Skipped,
            "abandoned" => TurnStatus::Abandoned,
            _ => return Err(unknown("turn", s)),
        })
    }
}

impl TryFrom<String> for TurnStatus {
    type Error = StoreError;
    fn try_from(s: String) -> Result<TurnStatus, StoreError> {
        TurnStatus::parse(&s)
    }
}

impl From<InboxStatus> for TurnStatus {
    /// A finished turn records its event's status.
    fn from(s: InboxStatus) -> TurnStatus {
        match s {
            InboxStatus::Pending => TurnStatus::Pending,
            InboxStatus::Done => TurnStatus::Done,
            InboxStatus::Failed => TurnStatus::Failed,
            InboxStatus::Skipped => TurnStatus::Skipped,
            // A dead event never reaches a turn's commit: its turns were abandoned.
            InboxStatus::Dead => TurnStatus::Failed,
        }
    }
}

/// Rows compare with the words the tables hold (`row.status == "sent"`), as they did when the
/// column was a `String`.
impl PartialEq<&str> for OutboxStatus {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<&str> for TurnStatus {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_reads_back_its_word_and_unknown_words_are_errors() {
        for s in [
            InboxStatus::Pending,
            InboxStatus::Done,
            InboxStatus::Failed,
            InboxStatus::Skipped,
        ] {
            assert_eq!(InboxStatus::parse(s.as_str()).unwrap(), s);
            assert_eq!(TurnStatus::from(s).as_str(), s.as_str());
        }
        assert_eq!(InboxStatus::parse("dead").unwrap(), InboxStatus::Dead);
        assert_eq!(InboxStatus::Dead.as_str(), "dead");
        for s in [
            OutboxStatus::Pending,
            OutboxStatus::Sending,
            OutboxStatus::Sent,
            OutboxStatus::Failed,
        ] {
            assert_eq!(OutboxStatus::parse(s.as_str()).unwrap(), s);
        }
        for s in ["running", "abandoned", "done"] {
            assert_eq!(TurnStatus::parse(s).unwrap().as_str(), s);
        }
        assert!(InboxStatus::parse("queued").is_err());
        assert!(InboxStatus::parse("").is_err());
        assert!(OutboxStatus::parse("delivered").is_err());
        assert!(TurnStatus::try_from("zombie".to_string()).is_err());
    }
}
