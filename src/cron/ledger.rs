//! The fire ledger's rules, shared by the scheduler and `herald cron run`: how a fire becomes an
//! inbox event, and what a finished run means for its ledger row.
//!
//! A fire's inbox key is derived from (job, scheduled time), so a fire that is claimed again
//! after a crash writes the same inbox event, which the inbox ignores: whatever happens between
//! the claim and the run, a scheduled time produces at most one run. The run itself (the turn,
//! its lease, its retries, the delivery) belongs to the lane worker; this module only reads its
//! outcome back from the inbox, the turns and the outbox. It must not deliver anything.

use chrono::{DateTime, Utc};

use crate::domain::cron::ValidJob;
use crate::domain::{MessageEvent, Origin, Platform};
use crate::store::{
    CronFire, FireOutcome, FireStatus, InboxRow, InboxStatus, NewFire, Store, StoreError,
};

/// The inbox key of a fire. Scheduled fires: `fire:<job>:<scheduled ms>`; manual runs get a
/// key of their own so they never collide with a scheduled time.
pub fn fire_key(job: &str, scheduled_at_ms: i64, manual: bool) -> String {
    if manual {
        format!("fire:{job}:manual:{scheduled_at_ms}")
    } else {
        format!("fire:{job}:{scheduled_at_ms}")
    }
}

/// The internal event that runs one fire in the job's lane (`cron:<job>`) and delivers the
/// reply to the job's targets.
pub fn fire_event(job: &ValidJob, key: &str, scheduled_at: DateTime<Utc>) -> MessageEvent {
    let mut ev = MessageEvent::text(Platform::CRON, &job.name, "cron", &job.prompt);
    ev.sender_name = "scheduler".into();
    ev.platform_message_id = key.to_string();
    ev.timestamp = scheduled_at;
    ev.origin = Origin::Scheduled {
        deliver_to: job.targets.clone(),
    };
    ev
}

/// The ledger status of a fire whose inbox event is in `status`; `None` while it is pending.
/// A run that needed more than one attempt (a crash or a shutdown cut the first) is `retried`
/// whatever its reply, so the operator sees it; a failure stays `failed`.
pub fn status_for(status: InboxStatus, note: Option<&str>, attempts: i64) -> Option<FireStatus> {
    Some(match status {
        InboxStatus::Pending => return None,
        InboxStatus::Done if attempts > 1 => FireStatus::Retried,
        InboxStatus::Done if note == Some("silent") => FireStatus::Silent,
        InboxStatus::Done => FireStatus::Ok,
        InboxStatus::Failed | InboxStatus::Dead => FireStatus::Failed,
        // A spending cap refused the run before its first model call.
        InboxStatus::Skipped if note.is_some_and(|n| n.starts_with(crate::lanes::OVER_BUDGET)) => {
            FireStatus::Skipped
        }
        InboxStatus::Skipped => FireStatus::Missed,
    })
}

/// Reads the finished run of `fire` back from the store: status, attempts, duration (from the
/// turn) and the target lanes its brief was queued for. `None` while the run is pending.
pub async fn outcome(
    store: &dyn Store,
    fire: &CronFire,
    inbox: &InboxRow,
) -> Result<Option<FireOutcome>, StoreError> {
    // Attempts of the run, or claims of the fire when a scheduler died before queuing it.
    let attempts = inbox.attempts.max(fire.attempts);
    let Some(status) = status_for(inbox.status, inbox.note.as_deref(), attempts) else {
        return Ok(None);
    };
    let turn = store
        .turns(&inbox.event.lane(), 20)
        .await?
        .into_iter()
        .filter(|t| t.inbox_id == Some(inbox.id) && t.ended_at.is_some())
        .max_by_key(|t| t.id);
    let mut lanes: Vec<String> = store
        .outbox_for_inbox(inbox.id)
        .await?
        .into_iter()
        .map(|r| r.lane.to_string())
        .collect();
    lanes.sort();
    lanes.dedup();
    let mut note: Vec<String> = fire.note.iter().cloned().collect();
    if attempts > 1 {
        note.push(format!("attempt {attempts}"));
    }
    match status {
        FireStatus::Failed | FireStatus::Missed | FireStatus::Skipped => {
            note.push(inbox.note.clone().unwrap_or_else(|| "failed".into()));
        }
        _ if inbox.note.as_deref() == Some("silent") => {
            note.push("silent: nothing delivered".into())
        }
        _ if !lanes.is_empty() => note.push(format!("delivered to {}", lanes.join(", "))),
        _ => {}
    }
    Ok(Some(FireOutcome {
        status,
        attempts,
        started_at: turn.as_ref().map(|t| t.started_at),
        ended_at: turn
            .and_then(|t| t.ended_at)
            .unwrap_or_else(crate::store::now_ms),
        deliveries: lanes.len() as i64,
        note: (!note.is_empty()).then(|| note.join("; ")),
    }))
}

/// Claims a manual run (`herald cron run`) and writes its inbox event; the daemon's lane
/// rescan picks it up (at once if this process is the daemon and dispatches it). Returns
/// (fire id, inbox id).
pub async fn start_manual(
    store: &dyn Store,
    job: &ValidJob,
    holder: &str,
    now: DateTime<Utc>,
) -> Result<Option<(i64, i64)>, StoreError> {
    let at = now.timestamp_millis();
    let claim = NewFire {
        job: job.name.clone(),
        scheduled_at: at,
        manual: true,
        holder: holder.to_string(),
        claim_until: at + super::scheduler::CLAIM_TTL_MS,
        missed_count: 0,
        note: Some("manual".into()),
    };
    let Some(id) = store.cron_fire_claim(&claim).await? else {
        return Ok(None);
    };
    let ev = fire_event(job, &fire_key(&job.name, at, true), now);
    let inbox = store.inbox_insert(&ev).await?.id();
    store.cron_fire_set_inbox(id, inbox).await?;
    Ok(Some((id, inbox)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inbox_outcome_to_ledger_status() {
        use FireStatus::*;
        use InboxStatus as I;
        let cases = [
            (I::Pending, None, 1, None),
            (I::Done, None, 1, Some(Ok)),
            (I::Done, Some("silent"), 1, Some(Silent)),
            (I::Done, None, 2, Some(Retried)),
            (I::Done, Some("silent"), 2, Some(Retried)),
            (I::Failed, Some("turn timed out"), 1, Some(Failed)),
            (I::Failed, None, 2, Some(Failed)),
            (
                I::Skipped,
                Some("gave up after repeated failures"),
                4,
                Some(Missed),
            ),
        ];
        for (inbox, note, attempts, want) in cases {
            assert_eq!(
                status_for(inbox, note, attempts),
                want,
                "{inbox:?} {note:?} {attempts}"
            );
        }
    }

    #[test]
    fn fire_keys_are_deterministic_and_manual_runs_distinct() {
        assert_eq!(
            fire_key("brief", 1_700_000_000_000, false),
            "fire:brief:1700000000000"
        );
        assert_ne!(fire_key("brief", 5, false), fire_key("brief", 5, true));
    }

    #[test]
    fn fire_event_targets_the_jobs_lane_and_its_targets() {
        let job = crate::cron::JobSpec {
            name: "brief".into(),
            schedule: "every 1h".into(),
            prompt: "Write it.".into(),
            deliver: vec!["Telegram:-100:7".into(), "web:main".into()],
            timezone: None,
            catch_up: None,
            enabled: true,
            budget: None,
        }
        .validate(&crate::config::Config::default().deliverable())
        .unwrap();
        let ev = fire_event(&job, "fire:brief:1", DateTime::UNIX_EPOCH);
        assert_eq!(ev.lane().as_str(), "cron:brief");
        assert!(ev.is_internal());
        assert_eq!(ev.text, "Write it.");
        let targets: Vec<String> = ev.deliver_to().iter().map(|t| t.to_string()).collect();
        assert_eq!(targets, ["telegram:-100:7", "web:main"]);
    }
}
