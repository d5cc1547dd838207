//! Group commit's unit: one lane's turn start or turn commit, owned so that a lane worker can
//! hand it to the committer task (`lanes/committer.rs`), which lands the steps of every lane
//! ready at that moment in one write transaction ([`super::TurnStore::turn_steps`]).
//!
//! Each step keeps its own lease check inside the shared transaction; a step the store
//! refuses (lease lost, wrong lane) writes nothing and the others go on.

use std::sync::Arc;

use super::context::ContextRow;
use super::types::{InboxAttempt, Lease, TurnCommit, TurnCommitted};
use super::{Cause, StoreError, StoreResult, TurnStore};
use crate::domain::SessionId;

/// The context state a commit step writes, computed from the ids its rows were given; owned
/// ([`super::ContextAfterCommit`] borrowed is the single-lane form).
pub type StepContext = Box<dyn Fn(&[i64]) -> Option<ContextRow> + Send + Sync>;

/// One lane's write, as the single-lane calls take it.
pub enum TurnStep {
    /// [`super::TurnStore::turn_begin_with`].
    Begin {
        lease: Lease,
        session_id: SessionId,
        inbox: Option<InboxAttempt>,
        sweep: bool,
    },
    /// [`super::TurnStore::turn_commit_with`].
    Commit {
        lease: Lease,
        commit: Arc<TurnCommit>,
        context: StepContext,
    },
}

/// What a step landed: the started turn's id, or the committed rows.
#[derive(Debug)]
pub enum TurnStepDone {
    Begun(i64),
    Committed(TurnCommitted),
}

impl TurnStep {
    /// The lane the step writes into (the lease's name), for logs.
    pub fn lane(&self) -> &str {
        &self.lease_and_session().0.name
    }

    /// The lease the step is checked against and the session it writes into.
    pub(super) fn lease_and_session(&self) -> (&Lease, &SessionId) {
        match self {
            TurnStep::Begin {
                lease, session_id, ..
            } => (lease, session_id),
            TurnStep::Commit { lease, commit, .. } => (lease, &commit.session_id),
        }
    }
}

/// A refusal the store made itself (lease lost, session not found or of another lane): it
/// wrote nothing, and a shared transaction goes on with the other steps. An error from the
/// database carries its driver error as its source and is no refusal.
pub(super) fn refused(e: &StoreError) -> bool {
    match e {
        StoreError::LeaseLost { .. } | StoreError::NotFound(_) => true,
        StoreError::Other(cause) => cause.source.is_none(),
        StoreError::Unavailable(_) => false,
    }
}

/// The failure of a shared transaction's commit, told to each of its steps: the same words
/// and kind (transient or not), since nothing of any of them is known to have landed.
pub(super) fn shared_failure(e: &StoreError, steps: usize) -> Vec<StoreResult<TurnStepDone>> {
    (0..steps)
        .map(|_| {
            Err(match e {
                StoreError::Unavailable(c) => StoreError::Unavailable(Cause::new(c.to_string())),
                other => StoreError::other(format!("group commit failed: {other}")),
            })
        })
        .collect()
}

/// Each step in its own transaction, through the single-lane calls: the path of a lone step,
/// and of a group whose shared transaction hit a database error before its commit (rolled
/// back, so nothing of the group landed).
pub(super) async fn one_by_one<S>(store: &S, steps: Vec<TurnStep>) -> Vec<StoreResult<TurnStepDone>>
where
    S: TurnStore + ?Sized,
{
    let mut done = Vec::with_capacity(steps.len());
    for step in steps {
        done.push(match step {
            TurnStep::Begin {
                lease,
                session_id,
                inbox,
                sweep,
            } => store
                .turn_begin_with(&lease, &session_id, inbox, sweep)
                .await
                .map(TurnStepDone::Begun),
            TurnStep::Commit {
                lease,
                commit,
                context,
            } => store
                .turn_commit_with(&lease, &commit, &*context)
                .await
                .map(TurnStepDone::Committed),
        });
    }
    done
}
