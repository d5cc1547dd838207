//! Where a call's question is asked. In a chat, in that chat. An API client has no buttons, so
//! a call in an API conversation is asked in its person's linked chat instead: the private
//! Telegram chat of a `telegram:<id>` identity in the person's `[[people]]` entry, answered only
//! by that identity. Without one the call is denied with a line saying so.

use super::Approvals;
use crate::domain::{MessageEvent, Platform};

/// A chat to ask in, and the identity whose answer counts (the requester).
pub(super) struct Place {
    pub platform: Platform,
    pub chat_id: String,
    pub thread_id: Option<String>,
    pub person: String,
}

impl Approvals {
    /// Where a call of `ev` (by the sender identity `person`) is asked, if anywhere.
    pub(super) fn place(&self, ev: &MessageEvent, person: &str) -> Option<Place> {
        if ev.platform != Platform::Api {
            return Some(Place {
                platform: ev.platform,
                chat_id: ev.chat_id.clone(),
                thread_id: ev.thread_id.clone(),
                person: person.to_string(),
            });
        }
        let linked = self
            .people
            .iter()
            .find(|p| p.ids.iter().any(|i| i == person))?;
        self.outbounds.get(Platform::Telegram)?;
        linked.ids.iter().find_map(|id| {
            let user = id.strip_prefix("telegram:").filter(|u| !u.is_empty())?;
            Some(Place {
                platform: Platform::Telegram,
                chat_id: user.to_string(),
                thread_id: None,
                person: id.clone(),
            })
        })
    }
}
