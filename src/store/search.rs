//! Session search, discovery half: the newest matching message of each session, newest
//! session first, for both backends.
//!
//! Grouping every match by session in SQL costs time in proportion to how many rows match, so
//! a common word over a million messages took hundreds of milliseconds. Instead the backends
//! hand over their full-text matches newest first, one batch at a time (`id < cursor ORDER BY
//! id DESC LIMIT n`, which both indexes serve in order), this module keeps the first eligible
//! hit of each session and stops as soon as `limit` sessions are found, and only those rows get
//! a snippet. The first hit seen of a session is its newest, so the answer is the same as the
//! grouped query's. This module holds no SQL: the backends own their full-text dialects.

use std::collections::HashSet;
use std::future::Future;

use serde::Serialize;

use super::StoreResult;
use crate::domain::{Role, SessionId};

#[derive(Debug, Clone, Serialize)]
pub struct SearchHit {
    pub lane: String,
    pub session_id: SessionId,
    pub message_id: i64,
    pub role: Role,
    pub snippet: String,
    pub created_at: i64,
}

/// Which conversations a search may read. The agent's tool always passes one lane (its
/// caller's); only operator tools (the CLI) pass [`SearchScope::AllLanes`], so a call site
/// that reads across people says so in its own text.
#[derive(Debug, Clone, Copy)]
pub enum SearchScope<'a> {
    Lane(&'a crate::domain::LaneKey),
    /// One lane's sessions of one agent only (`Session.agent`): what an agent's tool reads.
    Agent(&'a crate::domain::LaneKey, &'a str),
    AllLanes,
}

impl SearchScope<'_> {
    /// The lane key text to filter on, if any.
    pub fn lane(&self) -> Option<&str> {
        match self {
            SearchScope::Lane(l) | SearchScope::Agent(l, _) => Some(l.as_str()),
            SearchScope::AllLanes => None,
        }
    }

    /// The agent to filter on, if any.
    pub fn agent(&self) -> Option<&str> {
        match self {
            SearchScope::Agent(_, a) => Some(a),
            _ => None,
        }
    }
}

/// First batch of matches asked for, per wanted session: most queries end in one batch.
const FIRST_BATCH_PER_HIT: i64 = 8;
const MIN_BATCH: i64 = 64;
/// Batches grow fourfold up to this, so a query whose hits all sit in one chatty session
/// costs a few round trips, not thousands.
const MAX_BATCH: i64 = 16_384;
/// Sessions one search returns at most (SQLite binds one snippet id per hit).
pub(super) const MAX_HITS: i64 = 1_000;

/// One full-text match as a backend's batch query returns it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(super) struct Candidate {
    pub id: i64,
    pub session_id: SessionId,
    pub lane: String,
    pub role: String,
    pub active: i64,
    pub compacted: i64,
    pub created_at: i64,
    /// The agent of the message's session (`None`: no session row).
    pub agent: Option<String>,
}

impl Candidate {
    /// Compacted rows stay findable; retracted ones (neither live nor compacted) never are;
    /// another lane's (or another agent's) rows are not there at all for a scoped search.
    fn eligible(&self, scope: SearchScope<'_>, roles: &[Role]) -> bool {
        let retracted = self.active == 0 && self.compacted == 0;
        !retracted
            && scope.lane().is_none_or(|l| l == self.lane)
            && scope
                .agent()
                .is_none_or(|a| Some(a) == self.agent.as_deref())
            && (roles.is_empty() || roles.iter().any(|r| r.as_str() == self.role))
    }
}

/// Walks the matches newest first through `batch(cursor, n)` — the at most `n` newest matches
/// with an id below `cursor`, in any order — and returns the first eligible hit of each
/// session, at most `limit` of them, newest first.
pub(super) async fn newest_per_session<F, Fut>(
    scope: SearchScope<'_>,
    roles: &[Role],
    limit: i64,
    mut batch: F,
) -> StoreResult<Vec<Candidate>>
where
    F: FnMut(i64, i64) -> Fut,
    Fut: Future<Output = StoreResult<Vec<Candidate>>>,
{
    let mut out: Vec<Candidate> = Vec::new();
    let limit = limit.min(MAX_HITS);
    if limit <= 0 {
        return Ok(out);
    }
    let mut sessions = HashSet::new();
    let mut cursor = i64::MAX;
    let mut size = (limit.saturating_mul(FIRST_BATCH_PER_HIT)).clamp(MIN_BATCH, MAX_BATCH);
    loop {
        let mut rows = batch(cursor, size).await?;
        let exhausted = (rows.len() as i64) < size;
        rows.sort_unstable_by_key(|c| std::cmp::Reverse(c.id));
        for c in rows {
            cursor = cursor.min(c.id);
            if c.eligible(scope, roles) && !sessions.contains(&c.session_id) {
                sessions.insert(c.session_id.clone());
                out.push(c);
                if out.len() as i64 >= limit {
                    return Ok(out);
                }
            }
        }
        if exhausted {
            return Ok(out);
        }
        size = (size * 4).min(MAX_BATCH);
    }
}

/// The hits in `found`'s order, each with the snippet `snippet_of` gives for its id.
pub(super) fn hits(found: Vec<Candidate>, snippet_of: impl Fn(i64) -> String) -> Vec<SearchHit> {
    found
        .into_iter()
        .map(|c| SearchHit {
            snippet: snippet_of(c.id),
            lane: c.lane,
            role: Role::parse(&c.role).unwrap_or(Role::User),
            session_id: c.session_id,
            message_id: c.id,
            created_at: c.created_at,
        })
        .collect()
}

/// Roles as the text stored in `messages.role`.
pub(super) fn role_names(roles: &[Role]) -> Vec<String> {
    roles.iter().map(|r| r.as_str().to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: i64, session: &str, role: Role, active: i64, compacted: i64) -> Candidate {
        Candidate {
            id,
            session_id: session.into(),
            lane: format!("web:{session}"),
            role: role.as_str().into(),
            active,
            compacted,
            created_at: id,
            agent: None,
        }
    }

    /// A fake index of matches (ids 1..=n) served in batches the way the backends serve them.
    async fn walk(all: &[Candidate], roles: &[Role], limit: i64) -> (Vec<i64>, usize) {
        walk_in(all, None, roles, limit).await
    }

    async fn walk_in(
        all: &[Candidate],
        lane: Option<&str>,
        roles: &[Role],
        limit: i64,
    ) -> (Vec<i64>, usize) {
        let mut calls = 0;
        let key = lane.map(crate::domain::LaneKey::new);
        let scope = key
            .as_ref()
            .map_or(SearchScope::AllLanes, SearchScope::Lane);
        let found = newest_per_session(scope, roles, limit, |cursor, n| {
            calls += 1;
            let mut page: Vec<Candidate> = all.iter().filter(|x| x.id < cursor).cloned().collect();
            page.sort_by_key(|x| std::cmp::Reverse(x.id));
            page.truncate(n as usize);
            page.reverse(); // any order: the walk sorts each batch itself
            async move { Ok(page) }
        })
        .await
        .unwrap();
        (found.iter().map(|x| x.id).collect(), calls)
    }

    #[tokio::test]
    async fn keeps_the_newest_eligible_hit_of_each_session() {
        // s1 chats a lot; its newest row is retracted, its newest assistant row is 999.
        let mut all: Vec<Candidate> = (1..=1000)
            .map(|i| c(i, "s1", Role::Assistant, 1, 0))
            .collect();
        all[999] = c(1000, "s1", Role::User, 0, 0);
        all[4] = c(5, "s2", Role::User, 0, 1); // compacted: findable
        all[2] = c(3, "s3", Role::User, 1, 0);
        all[0] = c(1, "s4", Role::Tool, 1, 0);
        let table: [(&[Role], i64, &[i64]); 6] = [
            (&[], 10, &[999, 5, 3, 1]),
            (&[], 2, &[999, 5]),
            (&[Role::User], 10, &[5, 3]),
            (&[Role::Tool, Role::User], 10, &[5, 3, 1]),
            (&[Role::System], 10, &[]),
            (&[], 0, &[]),
        ];
        for (roles, limit, want) in table {
            let (got, calls) = walk(&all, roles, limit).await;
            assert_eq!(got, want, "roles {roles:?} limit {limit}");
            assert!(calls <= 4, "{calls} batches for 1,000 matches");
        }
    }

    #[tokio::test]
    async fn a_scoped_walk_sees_only_its_lane() {
        // Lane web:s1 is chatty and newest; the scoped walk must skip past all of it.
        let mut all: Vec<Candidate> = (1..=2000).map(|i| c(i, "s1", Role::User, 1, 0)).collect();
        all[9] = c(10, "s2", Role::User, 1, 0);
        all[4] = c(5, "s3", Role::User, 1, 0);
        let (got, _) = walk_in(&all, Some("web:s2"), &[], 10).await;
        assert_eq!(got, vec![10]);
        let (got, _) = walk_in(&all, Some("web:nobody"), &[], 10).await;
        assert!(got.is_empty());
        let (got, _) = walk_in(&all, None, &[], 10).await;
        assert_eq!(got, vec![2000, 10, 5]);
    }
}
