//! The census: after a run, read the store's tables directly and count every way the promise
//! could have broken. It reads with its own SQL on purpose — a second opinion, independent of
//! the `Store` implementation under test — and it never writes.
//!
//! Counted: inbound messages without exactly one sent reply, outbox rows sharing an idem key or
//! answering the same message twice, messages answered by more than one committed turn, two
//! committed turns of one lane overlapping in time, a turn left `running` by a process that was
//! not killed, a takeover that started before the killed holder was dead, and transcripts that
//! are not the client's messages and their replies in order.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

use super::load::{Sent, UNRESOLVED};

enum Db {
    Sqlite(sqlx::SqlitePool),
    Pg(sqlx::PgPool),
}

impl Db {
    async fn connect(url: &str) -> Db {
        if url.starts_with("sqlite:") {
            Db::Sqlite(sqlx::SqlitePool::connect(url).await.expect("open sqlite"))
        } else {
            Db::Pg(sqlx::PgPool::connect(url).await.expect("open postgres"))
        }
    }

    async fn all<T>(&self, sql: &'static str) -> Vec<T>
    where
        T: for<'r> sqlx::FromRow<'r, SqliteRow> + for<'r> sqlx::FromRow<'r, PgRow> + Send + Unpin,
    {
        match self {
            Db::Sqlite(p) => sqlx::query_as(sql).fetch_all(p).await,
            Db::Pg(p) => sqlx::query_as(sql).fetch_all(p).await,
        }
        .unwrap_or_else(|e| panic!("census query {sql:?}: {e}"))
    }

    async fn close(self) {
        match self {
            Db::Sqlite(p) => p.close().await,
            Db::Pg(p) => p.close().await,
        }
    }
}

/// A process that was killed: its replica id and the epoch-ms time of the kill.
#[derive(Debug, Clone)]
pub struct Kill {
    pub replica: String,
    pub at_ms: i64,
}

#[derive(Debug, Default, Serialize)]
pub struct Census {
    pub client_messages: usize,
    pub client_unanswered: usize,
    /// The client's answer differs from what the outbox holds, or a done turn did not answer
    /// `reply to: <text>`.
    pub client_wrong_reply: usize,
    pub client_retries: u64,
    pub inbox_rows: usize,
    pub inbox_by_status: BTreeMap<String, usize>,
    /// Client messages with no inbox row (lost on the way in).
    pub inbox_missing: usize,
    pub max_inbox_attempts: i64,
    pub answered_exactly_once: usize,
    pub unanswered: usize,
    pub answered_more_than_once: usize,
    pub outbox_rows: usize,
    pub outbox_not_sent: usize,
    pub duplicate_idem_keys: usize,
    pub committed_turns: usize,
    /// `running` rows left by killed processes (expected: one per kill that hit a turn).
    pub abandoned_turns: usize,
    /// Turns whose commit the store refused, closed `abandoned` by their own worker's retry.
    pub abandoned_after_store_error: usize,
    /// `running` rows of a process that was never killed (a turn that never finished).
    pub abandoned_by_survivor: usize,
    /// Inbound messages with more than one committed turn.
    pub messages_with_two_turns: usize,
    /// Pairs of committed turns of one lane whose [started_at, ended_at] overlap.
    pub concurrent_turns: usize,
    /// Committed turns that started in a lane while a killed holder's turn there was still
    /// running (before its kill).
    pub takeover_before_death: usize,
    pub lanes: usize,
    /// Committed turns per replica id (which processes did the work).
    pub turns_by_replica: BTreeMap<String, usize>,
    /// Lanes whose transcript is not exactly the client's messages and replies, in order.
    pub transcript_violations: usize,
    /// The first few violations, spelled out.
    pub details: Vec<String>,
}

impl Census {
    /// True when nothing was lost, duplicated or run concurrently.
    pub fn promise_held(&self) -> bool {
        self.client_unanswered == 0
            && self.client_wrong_reply == 0
            && self.inbox_missing == 0
            && self.unanswered == 0
            && self.answered_more_than_once == 0
            && self.outbox_not_sent == 0
            && self.duplicate_idem_keys == 0
            && self.abandoned_by_survivor == 0
            && self.messages_with_two_turns == 0
            && self.concurrent_turns == 0
            && self.takeover_before_death == 0
            && self.transcript_violations == 0
            && self.answered_exactly_once == self.client_messages
    }

    pub fn assert_promise(&self) {
        assert!(
            self.promise_held(),
            "the promise broke:\n{}",
            serde_json::to_string_pretty(self).unwrap_or_default()
        );
    }

    fn note(&mut self, s: String) {
        if self.details.len() < 20 {
            self.details.push(s);
        }
    }
}

#[derive(sqlx::FromRow)]
struct InboxRow {
    id: i64,
    platform: String,
    platform_message_id: String,
    status: String,
    attempts: i64,
}

#[derive(sqlx::FromRow)]
struct OutboxRow {
    idem_key: String,
    inbox_id: Option<i64>,
    chunk_index: i64,
    status: String,
    text: String,
}

#[derive(sqlx::FromRow, Clone)]
struct TurnRow {
    id: i64,
    lane: String,
    inbox_id: Option<i64>,
    holder: String,
    status: String,
    started_at: i64,
    ended_at: Option<i64>,
}

#[derive(sqlx::FromRow)]
struct MessageRow {
    lane: String,
    role: String,
    content: String,
}

/// Counts the promise over the whole store. `sent` is the client's record; `kills` the
/// processes killed during the run (their abandoned turns are expected).
pub async fn take(store_url: &str, platform: &str, sent: &[Sent], kills: &[Kill]) -> Census {
    let db = Db::connect(store_url).await;
    let mut inbox: Vec<InboxRow> = db
        .all("SELECT id, platform, platform_message_id, status, attempts FROM inbox ORDER BY id")
        .await;
    inbox.retain(|r| r.platform == platform);
    let outbox: Vec<OutboxRow> = db
        .all("SELECT idem_key, inbox_id, chunk_index, status, text FROM outbox ORDER BY id")
        .await;
    let turns: Vec<TurnRow> = db
        .all(
            "SELECT id, lane, inbox_id, holder, status, started_at, ended_at FROM turns \
             ORDER BY id",
        )
        .await;
    let messages: Vec<MessageRow> = db
        .all("SELECT lane, role, content FROM messages WHERE active = 1 ORDER BY id")
        .await;
    db.close().await;

    let sent = &resolve(sent, &inbox);
    let mut c = Census {
        client_messages: sent.len(),
        inbox_rows: inbox.len(),
        outbox_rows: outbox.len(),
        ..Census::default()
    };
    check_inbox_outbox(&mut c, sent, &inbox, &outbox);
    check_turns(&mut c, &turns, kills);
    check_transcripts(&mut c, sent, &messages);
    c
}

/// Fills in the inbox id and status of answers whose channel could not see them, from the row
/// with the same platform id; an answer with no such row stays unresolved (and is counted as
/// missing from the inbox).
fn resolve(sent: &[Sent], inbox: &[InboxRow]) -> Vec<Sent> {
    let by_platform_id: HashMap<&str, &InboxRow> = inbox
        .iter()
        .map(|r| (r.platform_message_id.as_str(), r))
        .collect();
    sent.iter()
        .map(|s| {
            let mut s = s.clone();
            if s.inbox_id == UNRESOLVED {
                if let Some(row) = by_platform_id.get(s.client_id.as_str()) {
                    s.inbox_id = row.id;
                    s.status = row.status.clone();
                }
            }
            s
        })
        .collect()
}

fn check_inbox_outbox(c: &mut Census, sent: &[Sent], inbox: &[InboxRow], outbox: &[OutboxRow]) {
    let by_client: HashMap<&str, &InboxRow> = inbox
        .iter()
        .map(|r| (r.platform_message_id.as_str(), r))
        .collect();
    let mut replies: HashMap<i64, Vec<&OutboxRow>> = HashMap::new();
    let mut keys: HashMap<&str, usize> = HashMap::new();
    for o in outbox {
        *keys.entry(o.idem_key.as_str()).or_default() += 1;
        if o.status != "sent" {
            c.outbox_not_sent += 1;
            c.note(format!("outbox {} is {}", o.idem_key, o.status));
        }
        if let Some(id) = o.inbox_id {
            replies.entry(id).or_default().push(o);
        }
    }
    c.duplicate_idem_keys = keys.values().filter(|&&n| n > 1).count();
    for r in inbox {
        *c.inbox_by_status.entry(r.status.clone()).or_default() += 1;
        c.max_inbox_attempts = c.max_inbox_attempts.max(r.attempts);
        let first_chunks: Vec<&&OutboxRow> = replies
            .get(&r.id)
            .map(|v| v.iter().filter(|o| o.chunk_index == 0).collect())
            .unwrap_or_default();
        let sent_first = first_chunks.iter().filter(|o| o.status == "sent").count();
        match (first_chunks.len(), sent_first) {
            (1, 1) => c.answered_exactly_once += 1,
            (n, _) if n > 1 => {
                c.answered_more_than_once += 1;
                c.note(format!("inbox {} has {n} replies", r.id));
            }
            _ => {
                c.unanswered += 1;
                c.note(format!("inbox {} ({}) has no sent reply", r.id, r.status));
            }
        }
    }
    for s in sent {
        c.client_retries += u64::from(s.attempts.saturating_sub(1));
        if s.inbox_id < 0 {
            c.client_unanswered += 1;
            c.note(format!("{} never answered: {}", s.client_id, s.reply));
            continue;
        }
        let Some(row) = by_client.get(s.client_id.as_str()) else {
            c.inbox_missing += 1;
            c.note(format!("{} has no inbox row", s.client_id));
            continue;
        };
        let stored: Vec<&str> = replies
            .get(&row.id)
            .map(|v| v.iter().map(|o| o.text.as_str()).collect())
            .unwrap_or_default();
        let expected_done = format!("reply to: {}", s.text);
        let wrong = row.id != s.inbox_id
            || stored.join("\n") != s.reply
            || (s.status == "done" && s.reply != expected_done)
            || s.reply.is_empty();
        if wrong {
            c.client_wrong_reply += 1;
            c.note(format!(
                "{}: client got {:?} ({})",
                s.client_id, s.reply, s.status
            ));
        }
    }
}

fn replica_of(holder: &str) -> &str {
    holder.split('/').next().unwrap_or(holder)
}

fn check_turns(c: &mut Census, turns: &[TurnRow], kills: &[Kill]) {
    let killed: HashMap<&str, i64> = kills
        .iter()
        .map(|k| (k.replica.as_str(), k.at_ms))
        .collect();
    let mut by_lane: BTreeMap<&str, Vec<&TurnRow>> = BTreeMap::new();
    let mut per_inbox: HashMap<i64, usize> = HashMap::new();
    for t in turns {
        by_lane.entry(t.lane.as_str()).or_default().push(t);
        if t.status == "abandoned" {
            c.abandoned_after_store_error += 1;
        } else if t.ended_at.is_some() {
            c.committed_turns += 1;
            *c.turns_by_replica
                .entry(replica_of(&t.holder).to_string())
                .or_default() += 1;
            if let Some(id) = t.inbox_id {
                *per_inbox.entry(id).or_default() += 1;
            }
        } else if killed.contains_key(replica_of(&t.holder)) {
            c.abandoned_turns += 1;
        } else {
            c.abandoned_by_survivor += 1;
            c.note(format!(
                "turn {} ({}) never finished in a live process",
                t.id, t.holder
            ));
        }
    }
    c.messages_with_two_turns = per_inbox.values().filter(|&&n| n > 1).count();
    c.lanes = by_lane.len();
    for (lane, ts) in by_lane {
        let mut committed: Vec<&&TurnRow> = ts
            .iter()
            .filter(|t| t.ended_at.is_some() && t.status != "abandoned")
            .collect();
        committed.sort_by_key(|t| t.started_at);
        let mut busy_until = i64::MIN;
        for t in &committed {
            if t.started_at < busy_until {
                c.concurrent_turns += 1;
                c.note(format!("{lane}: turn {} started inside another turn", t.id));
            }
            busy_until = busy_until.max(t.ended_at.unwrap_or(i64::MAX));
        }
        for dead in ts.iter().filter(|t| t.ended_at.is_none()) {
            let Some(&death) = killed.get(replica_of(&dead.holder)) else {
                continue;
            };
            let early = committed
                .iter()
                .filter(|t| t.started_at > dead.started_at && t.started_at < death)
                .count();
            if early > 0 {
                c.takeover_before_death += early;
                c.note(format!(
                    "{lane}: {early} turn(s) began while turn {} still lived",
                    dead.id
                ));
            }
        }
    }
}

fn check_transcripts(c: &mut Census, sent: &[Sent], messages: &[MessageRow]) {
    let mut expected: BTreeMap<&str, Vec<(&str, &str)>> = BTreeMap::new();
    for s in sent.iter().filter(|s| s.inbox_id >= 0) {
        let e = expected.entry(s.lane.as_str()).or_default();
        match s.status.as_str() {
            "done" => {
                e.push(("user", &s.text));
                e.push(("assistant", &s.reply));
            }
            // A failed turn keeps the user's message; the error line is not a model reply.
            "failed" => e.push(("user", &s.text)),
            _ => {}
        }
    }
    let mut actual: BTreeMap<&str, Vec<(&str, &str)>> = BTreeMap::new();
    for m in messages {
        actual
            .entry(m.lane.as_str())
            .or_default()
            .push((&m.role, &m.content));
    }
    for (lane, want) in &expected {
        let got = actual.get(lane).cloned().unwrap_or_default();
        if &got != want {
            c.transcript_violations += 1;
            let at = got.iter().zip(want.iter()).position(|(a, b)| a != b);
            c.note(format!(
                "{lane}: transcript differs at {at:?} (got {} rows, want {})",
                got.len(),
                want.len()
            ));
        }
    }
}

/// Waits until no inbound message of `platform` is pending and no reply is unsent (the last
/// process finishing what the killed ones left), or the timeout passes. True when drained.
pub async fn drain(store_url: &str, platform: &str, timeout: std::time::Duration) -> bool {
    let db = Db::connect(store_url).await;
    let deadline = std::time::Instant::now() + timeout;
    let drained = loop {
        let inbox: Vec<(String, String)> = db.all("SELECT platform, status FROM inbox").await;
        let outbox: Vec<(String,)> = db.all("SELECT status FROM outbox").await;
        let pending = inbox.iter().any(|(p, s)| p == platform && s == "pending");
        if !pending && outbox.iter().all(|(s,)| s == "sent") {
            break true;
        }
        if std::time::Instant::now() > deadline {
            break false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    db.close().await;
    drained
}
