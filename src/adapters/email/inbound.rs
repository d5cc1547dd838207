//! [`Mail`] → `MessageEvent`, and the rule for which mail reaches the core at all. No I/O: the
//! reader (`reader.rs`) keeps the files and writes the inbox.
//!
//! A conversation is a mail thread: the lane is `email:<sender address>:<thread root
//! Message-ID>` (the root is the first of References, else In-Reply-To, else the message's
//! own id), so a reply continues its session and a new subject starts a new one. A thread
//! Herald itself opened for a lane without a thread (a cron brief to `email:alice@example.org`)
//! carries a root id marked as such (`ids.rs`), and replies to it land in that lane again.
//!
//! Never ingested: automatic mail (auto-replies, bounces, bulk), mail from our own address,
//! and, under `require_auth`, mail whose From the receiving server did not vouch for.
//! Strangers do reach the core: its auth hook refuses them (or offers pairing).

use chrono::{DateTime, Utc};

use super::auth::vouches_for;
use super::ids::opens_bare_lane;
use super::parse::Mail;
use super::quoted::new_words;
use super::EMAIL;
use crate::domain::{ChatType, MessageEvent, MessageKind, Origin};

pub struct Rules<'a> {
    /// Our own address, lower-cased.
    pub me: &'a str,
    /// The domain of our Message-IDs.
    pub domain: &'a str,
    pub require_auth: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Ingest(Box<MessageEvent>),
    /// Not for the core; the reason goes to the log.
    Ignore(&'static str),
}

/// Decides what one message means for the core. `fallback_id` names a message without a
/// Message-ID (its mailbox, UIDVALIDITY and UID), `now` dates one without a Date.
pub fn decide(mail: &Mail, rules: &Rules<'_>, fallback_id: &str, now: DateTime<Utc>) -> Decision {
    let Some(from) = mail.from.as_deref() else {
        return Decision::Ignore("no From address");
    };
    if from == rules.me {
        return Decision::Ignore("mail from our own address");
    }
    if let Some(why) = mail.automatic {
        return Decision::Ignore(why);
    }
    if rules.require_auth && !vouches_for(mail.auth_results.as_deref(), from) {
        return Decision::Ignore("From not vouched for by Authentication-Results");
    }
    let id = mail
        .message_id
        .clone()
        .unwrap_or_else(|| fallback_id.to_string());
    let root = mail.thread_root().unwrap_or(&id).to_string();
    let thread = (!opens_bare_lane(&root, rules.domain)).then_some(root);
    let words = new_words(&mail.body);
    let starts_thread = mail.in_reply_to.is_none() && mail.references.is_empty();
    let text = match (starts_thread && !mail.subject.is_empty(), words.is_empty()) {
        (true, true) => format!("Subject: {}", mail.subject),
        (true, false) => format!("Subject: {}\n\n{words}", mail.subject),
        (false, _) => words,
    };
    let kind = if text.trim_start().starts_with('/') {
        MessageKind::Command
    } else if text.trim().is_empty() && !mail.files.is_empty() {
        MessageKind::Media
    } else {
        MessageKind::Text
    };
    let mut ev = MessageEvent::new(
        EMAIL,
        from,
        from,
        &text,
        Origin::person(kind),
        id,
        mail.date.unwrap_or(now),
    );
    ev.chat_type = ChatType::Dm;
    ev.thread_id = thread;
    ev.sender_name = mail.from_name.clone().unwrap_or_else(|| from.to_string());
    ev.reply_to = mail.in_reply_to.clone();
    // The model reads the new words; the stored event keeps the whole body.
    ev.full_text = (ev.text != mail.body).then(|| mail.body.clone());
    // A sender's domain stands for the group `@domain` allowlist entries name.
    if let Some((_, domain)) = from.rsplit_once('@') {
        ev.sender_roles = vec![format!("@{domain}")];
    }
    Decision::Ingest(Box::new(ev))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::email::ids::message_id;

    const AUTH: &str = "mx.test; dkim=pass header.d=example.org";

    fn rules() -> Rules<'static> {
        Rules {
            me: "herald@example.net",
            domain: "example.net",
            require_auth: true,
        }
    }

    fn mail() -> Mail {
        Mail {
            message_id: Some("m1@example.org".into()),
            from: Some("alice@example.org".into()),
            subject: "Plans".into(),
            body: "What about Friday?\n\n-- \nAlice".into(),
            auth_results: Some(AUTH.into()),
            ..Mail::default()
        }
    }

    fn ingest(m: &Mail) -> MessageEvent {
        match decide(m, &rules(), "uid", Utc::now()) {
            Decision::Ingest(ev) => *ev,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_new_mail_starts_its_own_thread_and_a_reply_continues_it() {
        let ev = ingest(&mail());
        assert_eq!(ev.text, "Subject: Plans\n\nWhat about Friday?");
        assert_eq!(
            ev.lane().as_str(),
            crate::domain::LaneKey::new("email:alice@example.org:m1@example.org").as_str()
        );
        assert_eq!(ev.platform_message_id, "m1@example.org");
        assert_eq!(ev.sender_roles, ["@example.org"]);
        let mut reply = mail();
        reply.message_id = Some("m3@example.org".into());
        reply.in_reply_to = Some("herald.1.t@example.net".into());
        reply.references = vec!["m1@example.org".into(), "herald.1.t@example.net".into()];
        reply.body = "Yes.\n\nOn Monday Herald wrote:\n> ok?".into();
        let r = ingest(&reply);
        assert_eq!(r.text, "Yes.");
        assert_eq!(r.full_text.as_deref(), Some(reply.body.as_str()));
        assert_eq!(r.lane(), ev.lane());
    }

    #[test]
    fn a_reply_to_a_thread_herald_opened_for_a_bare_address_lands_there() {
        let mut reply = mail();
        let ours = message_id(
            "email:alice@example.org:cron:x:1:brief:0",
            "example.net",
            true,
        );
        reply.in_reply_to = Some(ours.clone());
        reply.references = vec![ours];
        let ev = ingest(&reply);
        assert_eq!(ev.thread_id, None);
        assert_eq!(
            ev.lane().as_str(),
            crate::domain::LaneKey::new("email:alice@example.org").as_str()
        );
    }

    #[test]
    fn forged_automatic_and_own_mail_is_ignored() {
        let mut forged = mail();
        forged.auth_results = Some("mx.test; dkim=fail header.d=example.org".into());
        let mut auto = mail();
        auto.automatic = Some("auto-submitted");
        let mut own = mail();
        own.from = Some("herald@example.net".into());
        for (m, why) in [
            (forged, "From not vouched for by Authentication-Results"),
            (auto, "auto-submitted"),
            (own, "mail from our own address"),
        ] {
            assert_eq!(decide(&m, &rules(), "u", Utc::now()), Decision::Ignore(why));
        }
        let mut lax = rules();
        lax.require_auth = false;
        let mut unsigned = mail();
        unsigned.auth_results = None;
        assert!(matches!(
            decide(&unsigned, &lax, "u", Utc::now()),
            Decision::Ingest(_)
        ));
    }
}
