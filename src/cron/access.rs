//! A job made in a conversation runs with its maker's standing: at each fire the scheduler
//! asks again whether that person may still use the agent (the allowlist or an approved
//! pairing). A person removed from the allowlist, or whose pairing was revoked, must not keep
//! an agent working for them through a job made earlier: the fire is skipped and the job
//! paused, with the reason kept for `herald cron list` and said once in the log.
//!
//! Must not: decide for jobs that have no maker on record (config and CLI jobs are the
//! operator's), nor for people the allowlist does not decide by id (a web chat is trusted by
//! its listener and token, a Discord role list by roles that are only known on a message).

use crate::config::registry::by_allowlist;
use crate::domain::{MessageEvent, Person};
use crate::hooks::Authorizer;
use crate::store::{CronJobRow, Store};

/// Why `row`'s maker may not have it run any more; `None` while they may (or when it is not
/// this check's to decide).
pub async fn owner_lost_access(
    auth: &Authorizer,
    store: &dyn Store,
    row: &CronJobRow,
) -> Option<String> {
    let (lane, person) = (row.owner.as_ref()?, row.owner_person.as_deref()?);
    let Person { platform, id } = Person::parse(person)?;
    if !by_allowlist(platform) || auth.decides_by_roles(platform) {
        return None;
    }
    // The allowlist decides by sender id alone; the chat only names the probe's lane.
    let chat = lane
        .as_str()
        .strip_prefix(platform.as_str())
        .and_then(|rest| rest.strip_prefix(':'))
        .unwrap_or(&id);
    let probe = MessageEvent::text(platform, chat, &id, "");
    if auth.is_allowed_or_paired(&probe, store).await {
        return None;
    }
    Some(format!(
        "its owner {person} is no longer allowed to use the agent (allowlist or pairing)"
    ))
}
