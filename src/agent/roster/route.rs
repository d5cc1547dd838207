//! `[[bindings]]` matching: which agent a conversation goes to. The most specific binding
//! that matches wins (a person beats a thread, a thread a chat, a chat a chat type, a chat
//! type a platform), then the one written first; nothing matching leaves the default agent.

use crate::config::{person_key, Binding, Person};
use crate::domain::{ChatType, LaneKey, MessageEvent};

/// The `kv` key of a lane's `/agent` choice.
pub fn choice_key(lane: &LaneKey) -> String {
    format!("agent:{}", lane.as_str())
}

/// The agent name the bindings give `ev`, if any binding matches.
pub fn route<'a>(bindings: &'a [Binding], people: &[Person], ev: &MessageEvent) -> Option<&'a str> {
    let mut best: Option<&Binding> = None;
    for b in bindings.iter().filter(|b| matches(b, people, ev)) {
        if best.is_none_or(|x| b.specificity() > x.specificity()) {
            best = Some(b);
        }
    }
    best.map(|b| b.agent.as_str())
}

/// Whether every key `b` sets matches `ev`.
pub fn matches(b: &Binding, people: &[Person], ev: &MessageEvent) -> bool {
    let platform = ev.platform.as_str();
    let private = ev.chat_type == ChatType::Dm;
    b.platform.as_deref().is_none_or(|p| p == platform)
        && b.chat.as_deref().is_none_or(|c| c == ev.chat_id)
        && b.thread
            .as_deref()
            .is_none_or(|t| Some(t) == ev.thread_id.as_deref())
        && b.chat_type
            .as_deref()
            .is_none_or(|t| (t == "private") == private)
        && b.person
            .as_ref()
            .is_none_or(|p| person_matches(std::slice::from_ref(p), people, ev))
}

/// Whether the sender of `ev` is one of `names` (`[[people]]` names or `platform:id`).
pub fn person_matches(names: &[String], people: &[Person], ev: &MessageEvent) -> bool {
    let platform = ev.platform.as_str();
    let identity = format!("{platform}:{}", ev.sender_id);
    let key = person_key(people, platform, &ev.sender_id);
    names
        .iter()
        .any(|n| *n == identity || key.as_deref() == Some(n.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{MessageKind, Origin, Platform};

    fn binding(agent: &str, f: impl FnOnce(&mut Binding)) -> Binding {
        let mut b = Binding {
            agent: agent.into(),
            ..Binding::default()
        };
        f(&mut b);
        b
    }

    fn event(platform: Platform, chat: &str, dm: bool, sender: &str) -> MessageEvent {
        let mut ev = MessageEvent::new(
            platform,
            chat,
            sender,
            "hi",
            Origin::person(MessageKind::Text),
            "m1".into(),
            chrono::Utc::now(),
        );
        ev.chat_type = if dm { ChatType::Dm } else { ChatType::Group };
        ev
    }

    fn alice() -> Vec<Person> {
        vec![Person {
            name: "alice".into(),
            ids: vec!["telegram:1".into(), "discord:9".into()],
        }]
    }

    #[test]
    fn the_most_specific_binding_wins_then_the_first() {
        let bs = vec![
            binding("family", |b| b.platform = Some("telegram".into())),
            binding("coder", |b| b.person = Some("alice".into())),
            binding("group", |b| {
                b.platform = Some("telegram".into());
                b.chat_type = Some("group".into());
            }),
            binding("second", |b| b.person = Some("telegram:1".into())),
        ];
        let people = alice();
        // alice anywhere: by person, over the platform binding; the first person binding wins
        assert_eq!(
            route(
                &bs,
                &people,
                &event(Platform::named("telegram"), "5", false, "1")
            ),
            Some("coder")
        );
        assert_eq!(
            route(
                &bs,
                &people,
                &event(Platform::named("discord"), "7", true, "9")
            ),
            Some("coder")
        );
        // someone else: a group on telegram is more specific than telegram
        assert_eq!(
            route(
                &bs,
                &people,
                &event(Platform::named("telegram"), "5", false, "2")
            ),
            Some("group")
        );
        assert_eq!(
            route(
                &bs,
                &people,
                &event(Platform::named("telegram"), "2", true, "2")
            ),
            Some("family")
        );
        assert_eq!(
            route(&bs, &people, &event(Platform::WEB, "x", true, "x")),
            None
        );
    }

    #[test]
    fn chat_and_thread_bindings_match_only_their_chat() {
        let bs = vec![
            binding("dev", |b| b.chat = Some("42".into())),
            binding("ops", |b| {
                b.chat = Some("42".into());
                b.thread = Some("t1".into());
            }),
        ];
        let mut ev = event(Platform::named("discord"), "42", false, "3");
        assert_eq!(route(&bs, &[], &ev), Some("dev"));
        ev.thread_id = Some("t1".into());
        assert_eq!(route(&bs, &[], &ev), Some("ops"));
        assert_eq!(
            route(
                &bs,
                &[],
                &event(Platform::named("discord"), "43", false, "3")
            ),
            None
        );
    }
}
