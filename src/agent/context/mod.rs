//! The context engine of a lane turn: estimate the next prompt, compact before the turn when it
//! would pass the threshold, judge each compaction by the next billed reading, and show large
//! tool results as previews.
//!
//! The estimate is re-anchored on the provider's billed prompt tokens after every answered
//! request: the anchor is stored on the session row with a fingerprint of the last message that
//! request carried, and the next turn adds estimates only for what came after that message (an
//! edit to it, or a compaction, invalidates the anchor). All state lives on the session row, so
//! a restart resumes the breaker where it was. The engine writes only through the lane's lease;
//! it never calls a model and never decides what a projection says (that is `compaction`).

mod anchor;
pub mod breaker;
pub mod in_turn;
mod overflow;
pub mod plan;
pub mod spill;
pub mod window;

use std::sync::OnceLock;
use std::time::Instant;

use sha2::{Digest, Sha256};

use crate::agent::compaction::estimate_tokens;
use crate::agent::tools::Tools;
use crate::config::Config;
use crate::domain::{Role, SessionId, ToolCall};
use crate::store::{
    ContextRow, Lease, NewMessage, Session, Store, StoreError, StoreResult, StoredMessage,
};

pub use anchor::Anchoring;
use breaker::{Gate, Tick};

/// What a turn knows of its session before it starts: the live rows as stored and the context
/// state on the session row.
#[derive(Debug, Clone)]
pub struct Known {
    pub live: Vec<StoredMessage>,
    pub row: ContextRow,
}

/// The outcome of [`ContextEngine::prepare_with`]: the history as the model sees it, and the
/// session as stored once the preparation (and any compaction) is done.
#[derive(Debug)]
pub struct Prepared {
    pub view: Vec<StoredMessage>,
    pub known: Known,
}

/// Fingerprint value meaning "a compaction ran; the next billed reading judges it".
pub const PENDING: &str = "pending";
/// Framing tokens charged per message (role markers).
const MESSAGE_OVERHEAD: usize = 4;

/// The monotonic clock the breaker measures a block with (see [`breaker`]).
pub trait Clock: Send + Sync {
    fn tick(&self) -> Tick;
}

/// `Instant` since this process first asked, tagged with an id drawn once per process.
pub struct SystemClock;

impl Clock for SystemClock {
    fn tick(&self) -> Tick {
        static ORIGIN: OnceLock<(String, Instant)> = OnceLock::new();
        let (process, origin) =
            ORIGIN.get_or_init(|| (uuid::Uuid::new_v4().simple().to_string(), Instant::now()));
        Tick {
            process: process.clone(),
            ms: i64::try_from(origin.elapsed().as_millis()).unwrap_or(i64::MAX),
        }
    }
}

pub struct ContextEngine<'a> {
    store: &'a dyn Store,
    clock: &'a dyn Clock,
    pub window: usize,
    pub threshold: f64,
    pub spill_chars: usize,
    pub tail_tokens: usize,
    /// Told the session and the rows about to be compacted, just before a compaction is
    /// written (the memory provider's pre-compaction notice). Must not block.
    pub on_compact: Option<&'a CompactionNotice<'a>>,
}

/// See [`ContextEngine::on_compact`].
pub type CompactionNotice<'a> = dyn Fn(&str, &[StoredMessage]) + Send + Sync + 'a;

impl<'a> ContextEngine<'a> {
    /// The engine for the configured model (the window is asked from the provider once).
    pub async fn new(store: &'a dyn Store, config: &Config) -> ContextEngine<'a> {
        let window = window::context_window(&config.llm).await;
        Self::with_window(store, config, window, &SystemClock)
    }

    pub fn with_window(
        store: &'a dyn Store,
        config: &Config,
        window: usize,
        clock: &'a dyn Clock,
    ) -> ContextEngine<'a> {
        ContextEngine {
            store,
            clock,
            window,
            threshold: config.context.threshold.clamp(0.05, 0.99),
            spill_chars: config.context.spill_chars,
            tail_tokens: config.context.tail_tokens,
            on_compact: None,
        }
    }

    pub fn threshold_tokens(&self) -> u64 {
        (self.window as f64 * self.threshold) as u64
    }

    /// Before a turn: compacts the session when the projected prompt (with `user_text` added)
    /// passes the threshold and the breaker allows it, then returns the live history as the
    /// model will see it. Only a lost lease or an unreadable transcript fails the turn; a
    /// compaction that cannot be written is logged and the turn goes on uncompacted.
    pub async fn prepare(
        &self,
        lease: &Lease,
        session: &Session,
        user_text: &str,
        tools: &Tools,
    ) -> StoreResult<Vec<StoredMessage>> {
        Ok(self
            .prepare_with(lease, session, user_text, tools, None)
            .await?
            .view)
    }

    /// What the worker already knows of the session, or its live rows and context state read
    /// from the store.
    pub(crate) async fn known_or_read(
        &self,
        session: &Session,
        known: Option<Known>,
    ) -> StoreResult<Known> {
        Ok(match known {
            Some(k) => k,
            None => Known {
                live: self.store.messages(&session.id, true).await?,
                row: self
                    .store
                    .context_get(&session.id)
                    .await?
                    .unwrap_or_default(),
            },
        })
    }

    /// [`prepare`](Self::prepare) for a caller that may already know the session's live rows
    /// and context state (a lane worker that has held the lease since it last read them), and
    /// that keeps what this returns for the next turn.
    pub async fn prepare_with(
        &self,
        lease: &Lease,
        session: &Session,
        user_text: &str,
        tools: &Tools,
        known: Option<Known>,
    ) -> StoreResult<Prepared> {
        let Known { live: raw, row } = self.known_or_read(session, known).await?;
        let view = self.view(raw.clone());
        let projected = self.projected(session, tools, &view, user_text, &row);
        let wants = projected >= self.threshold_tokens();
        let (gate, mut next) = breaker::gate(&row, wants, &self.clock.tick());
        let outcome = match gate {
            Gate::NotNeeded => None,
            Gate::Blocked => Some("blocked"),
            Gate::Allow => Some("compacted"),
            Gate::Probation => Some("probation"),
        };
        if let Some(o) = outcome {
            tracing::info!(session = %session.id, projected, threshold = self.threshold_tokens(),
                strikes = row.compaction_strikes, gate = o, "context over the threshold");
        }
        let unchanged = |raw, row| Prepared {
            view,
            known: Known { live: raw, row },
        };
        if !matches!(gate, Gate::Allow | Gate::Probation) {
            let row = if next != row && self.write_state(lease, &session.id, &next).await? {
                next
            } else {
                row
            };
            if gate == Gate::Blocked {
                metrics::counter!("herald_compactions_total", "result" => "blocked").increment(1);
            }
            return Ok(unchanged(raw, row));
        }
        let Some(p) = plan::plan(&raw, self.window, self.tail_tokens) else {
            tracing::info!(session = %session.id, "nothing between head and tail to compact");
            metrics::counter!("herald_compactions_total", "result" => "empty").increment(1);
            let row = if next != row && self.write_state(lease, &session.id, &next).await? {
                next
            } else {
                row
            };
            return Ok(unchanged(raw, row));
        };
        next.prompt_tokens_anchor = None;
        next.anchor_fingerprint = Some(PENDING.into());
        self.notify(&session.id, &raw, &p.middle_ids);
        let started = std::time::Instant::now();
        match self
            .store
            .compact_with_state(lease, &session.id, &p.flip, &p.insert, &next)
            .await
        {
            Ok(_) => {
                metrics::counter!("herald_compactions_total", "result" => outcome.unwrap_or("compacted"))
                    .increment(1);
                tracing::info!(session = %session.id, middle = p.middle_ids.len(),
                    tail = p.tail_len, projection_chars = p.projection.chars().count(),
                    took_us = started.elapsed().as_micros() as u64, "compacted");
                let raw = self.store.messages(&session.id, true).await?;
                Ok(Prepared {
                    view: self.view(raw.clone()),
                    known: Known {
                        live: raw,
                        row: next,
                    },
                })
            }
            Err(e @ StoreError::LeaseLost { .. }) => Err(e),
            Err(e) => {
                tracing::warn!(session = %session.id, error = %e, "compaction not written; continuing uncompacted");
                Ok(unchanged(raw, row))
            }
        }
    }

    /// After a committed turn: judges a pending compaction by the turn's first billed reading
    /// and re-anchors on its last one. `messages` and `ids` are the committed rows (user message
    /// first, final answer last); `readings` the billed prompt of each answered request, in
    /// order. Providers that bill nothing (readings of 0) leave the state alone.
    pub async fn after_turn(
        &self,
        lease: &Lease,
        session_id: &SessionId,
        messages: &[NewMessage],
        ids: &[i64],
        readings: &[u64],
    ) {
        let stored = async {
            let row = self
                .store
                .context_get(session_id)
                .await?
                .unwrap_or_default();
            match self.anchor_after(row, session_id, messages, ids, readings) {
                Some(next) => self.store.context_set(lease, session_id, &next).await,
                None => Ok(()),
            }
        };
        if let Err(e) = stored.await {
            tracing::warn!(session = %session_id, error = %e, "usage anchor not stored");
        }
    }

    /// The state [`after_turn`](Self::after_turn) stores ([`Anchoring::anchor_after`]).
    pub fn anchor_after(
        &self,
        row: ContextRow,
        session_id: &SessionId,
        messages: &[NewMessage],
        ids: &[i64],
        readings: &[u64],
    ) -> Option<ContextRow> {
        self.anchoring()
            .anchor_after(row, session_id, messages, ids, readings)
    }

    /// What the usage anchor is computed with, owned (a commit landing in another lane's
    /// group takes it along).
    pub fn anchoring(&self) -> Anchoring {
        Anchoring {
            threshold_tokens: self.threshold_tokens(),
            spill_chars: self.spill_chars,
        }
    }

    /// The live history as the model sees it (large tool results as previews).
    pub fn view(&self, mut live: Vec<StoredMessage>) -> Vec<StoredMessage> {
        spill::spill_view(&mut live, self.spill_chars);
        live
    }

    /// Tokens the next request would bill: the anchor plus estimates of what followed its
    /// boundary message, or, without a valid anchor, an estimate of everything.
    pub fn projected(
        &self,
        session: &Session,
        tools: &Tools,
        view: &[StoredMessage],
        user_text: &str,
        row: &ContextRow,
    ) -> u64 {
        let user = estimate_tokens(user_text) + MESSAGE_OVERHEAD;
        if let (Some(anchor), Some(fp)) = (row.prompt_tokens_anchor, &row.anchor_fingerprint) {
            // A fingerprint names its message's id: hash only the message with that id, not
            // every message of a growing history before it.
            let id = fingerprint_id(fp);
            let found = view
                .iter()
                .position(|m| Some(m.id) == id && stored_fingerprint(m) == *fp);
            if let Some(pos) = found {
                let after: usize = view[pos + 1..].iter().map(wire_tokens).sum();
                return anchor.max(0) as u64 + (after + user) as u64;
            }
        }
        let specs = serde_json::to_string(&tools.specs()).unwrap_or_default();
        let all: usize = view.iter().map(wire_tokens).sum();
        (estimate_tokens(&session.system_prompt) + estimate_tokens(&specs) + all + user) as u64
    }

    /// Hands the rows about to be compacted to [`on_compact`](Self::on_compact), if set.
    fn notify(&self, session_id: &SessionId, raw: &[StoredMessage], middle_ids: &[i64]) {
        if let Some(f) = self.on_compact {
            let rows: Vec<StoredMessage> = raw
                .iter()
                .filter(|m| middle_ids.contains(&m.id))
                .cloned()
                .collect();
            f(session_id, &rows);
        }
    }

    async fn write_state(
        &self,
        lease: &Lease,
        session_id: &SessionId,
        row: &ContextRow,
    ) -> StoreResult<bool> {
        match self.store.context_set(lease, session_id, row).await {
            Err(e @ StoreError::LeaseLost { .. }) => Err(e),
            Err(e) => {
                tracing::warn!(session = %session_id, error = %e, "breaker state not stored");
                Ok(false)
            }
            Ok(()) => Ok(true),
        }
    }
}

/// Estimated tokens of one message as sent.
pub fn wire_tokens(m: &StoredMessage) -> usize {
    let calls: usize = m
        .tool_calls
        .iter()
        .map(|c| estimate_tokens(&c.name) + estimate_tokens(&c.arguments))
        .sum();
    estimate_tokens(m.wire_content()) + calls + MESSAGE_OVERHEAD
}

/// Identifies the priced boundary message by id and the bytes sent for it.
pub fn fingerprint(
    id: i64,
    role: Role,
    wire: &str,
    tool_call_id: Option<&str>,
    tool_calls: &[ToolCall],
) -> String {
    let mut h = Sha256::new();
    h.update(role.as_str());
    h.update([0]);
    h.update(wire);
    h.update([0]);
    h.update(tool_call_id.unwrap_or_default());
    h.update([0]);
    h.update(serde_json::to_string(tool_calls).unwrap_or_default());
    format!("m{id}:{}", &hex::encode(h.finalize())[..16])
}

/// The message id a [`fingerprint`] was made for (`m{id}:…`).
fn fingerprint_id(fp: &str) -> Option<i64> {
    fp.strip_prefix('m')?.split_once(':')?.0.parse().ok()
}

fn stored_fingerprint(m: &StoredMessage) -> String {
    fingerprint(
        m.id,
        m.role,
        m.wire_content(),
        m.tool_call_id.as_deref(),
        &m.tool_calls,
    )
}

#[cfg(test)]
mod tests;
