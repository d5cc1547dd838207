//! What the people of a chat platform saw in a promise run, counted from the platform fake's
//! own records (independent of the store the census reads): each pushed message's replies,
//! and each extra copy placed against the kills. A platform without an idempotency key on its
//! send (Telegram, Discord) sends a chunk again when a kill falls between the platform
//! accepting it and our `mark_sent`; such a resend must straddle a kill, and nothing here may
//! hide one by deduplicating.

use std::collections::HashMap;
use std::hash::Hash;

use serde::Serialize;

use super::census::Kill;

/// How late a watcher may stamp a send that happened just before a kill.
const STAMP_SLACK_MS: i64 = 50;

#[derive(Debug, Default, Serialize)]
pub struct Receipts {
    pub updates: usize,
    /// Sends the fake accepted.
    pub sends: usize,
    pub answered_exactly_once: usize,
    pub unanswered: usize,
    /// Messages the people saw answered twice or more (each extra copy is a resend below).
    pub answered_more_than_once: usize,
    /// Extra copies whose first copy went out before a kill and which came after it: the
    /// documented window between the platform's acceptance and our `mark_sent`.
    pub resends_across_a_kill: usize,
    /// Extra copies no kill explains: a broken promise.
    pub resends_without_a_kill: usize,
    /// Sends that quote no pushed message (later chunks, stray messages).
    pub sends_not_replies: usize,
    pub details: Vec<String>,
}

impl Receipts {
    /// Every message answered, and any resend explained by a kill.
    pub fn promise_held(&self) -> bool {
        self.unanswered == 0
            && self.resends_without_a_kill == 0
            && self.answered_exactly_once + self.answered_more_than_once == self.updates
    }

    /// Counts `sends` (the message each quotes, if any, and the epoch-ms instant it was seen)
    /// against the `pushed` messages and the `kills`.
    pub fn count<K>(pushed: &[K], sends: &[(Option<K>, i64)], kills: &[Kill]) -> Receipts
    where
        K: Eq + Hash + Copy + std::fmt::Debug,
    {
        let mut r = Receipts {
            updates: pushed.len(),
            sends: sends.len(),
            ..Receipts::default()
        };
        let mut replies: HashMap<K, Vec<i64>> = HashMap::new();
        for (to, stamp) in sends {
            match to {
                Some(to) if pushed.contains(to) => replies.entry(*to).or_default().push(*stamp),
                _ => r.sends_not_replies += 1,
            }
        }
        for key in pushed {
            match replies.get(key).map(Vec::as_slice).unwrap_or_default() {
                [] => r.unanswered += 1,
                [_] => r.answered_exactly_once += 1,
                [first, rest @ ..] => {
                    r.answered_more_than_once += 1;
                    for &again in rest {
                        let straddles = kills
                            .iter()
                            .any(|k| *first <= k.at_ms + STAMP_SLACK_MS && again >= k.at_ms);
                        if straddles {
                            r.resends_across_a_kill += 1;
                        } else {
                            r.resends_without_a_kill += 1;
                            if r.details.len() < 20 {
                                r.details.push(format!(
                                    "{key:?} answered again at {again} (first at {first})"
                                ));
                            }
                        }
                    }
                }
            }
        }
        r
    }
}
