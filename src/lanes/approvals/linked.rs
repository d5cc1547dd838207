//! Where a call's question is asked. In a chat, in that chat. An API client has no buttons, so
//! a call in an API conversation is asked in its person's linked chat instead: the private
//! chat of an identity in the person's `[[people]]` entry on a platform with buttons whose
//! private chats are addressed by the person's id (Telegram's `telegram:<id>`), answered only
//! by that identity. Without one the call is denied with a line saying so.

use super::Approvals;
use crate::config::{spec, Admit};
use crate::domain::{MessageEvent, Person, Platform};

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
        if spec(ev.platform).is_none_or(|s| s.admit != Admit::Keyed) {
            return Some(Place {
                platform: ev.platform,
                chat_id: ev.chat_id.clone(),
                thread_id: ev.thread_id.clone(),
                person: person.to_string(),
            });
        }
        let live = self.live();
        let linked = live
            .people
            .iter()
            .find(|p| p.ids.iter().any(|i| i == person))?;
        linked.ids.iter().find_map(|id| {
            let Person { platform, id: user } = Person::parse(id)?;
            let facts = spec(platform)?;
            let reachable = facts.dm_by_person_id
                && facts.caps.buttons
                && matches!(facts.admit, Admit::Allowlist { .. })
                && self.outbounds.get(platform).is_some();
            reachable.then(|| Place {
                platform,
                chat_id: user,
                thread_id: None,
                person: id.clone(),
            })
        })
    }
}
