//! A job made in a conversation runs with its maker's standing: at each fire the scheduler
//! asks again whether that person may still use the agent (the allowlist or an approved
//! pairing). A person removed from the allowlist, or whose pairing was revoked, must not keep
//! an agent working for them through a job made earlier: the fire is skipped and the job
//! paused, with the reason kept for `herald cron list` and said once in the log.
//!
//! Must not: decide for jobs that have no maker on record (config and CLI jobs are the
//! operator's), nor for people the allowlist does not decide by id (a web chat is trusted by
//! its listener and token, a Discord role list by roles that are only known on a message).

use crate::domain::{MessageEvent, Platform};
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
    let (platform, sender) = person.split_once(':')?;
    let platform = Platform::parse(platform)?;
    if !matches!(platform, Platform::Telegram | Platform::Discord)
        || auth.decides_by_roles(platform)
    {
        return None;
    }
    let chat = lane.as_str().split(':').nth(1).unwrap_or(sender);
    let probe = MessageEvent::text(platform, chat, sender, "");
    if auth.is_allowed_or_paired(&probe, store).await {
        return None;
    }
    Some(format!(
        "its owner {person} is no longer allowed to use the agent (allowlist or pairing)"
    ))
}
