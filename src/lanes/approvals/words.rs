//! Approvals where a platform has no buttons (Matrix, Signal, email): the question goes out as
//! text asking for a `yes` or `no`, and the person answers with a reply in words or a reaction
//! (✅ / ❌). The adapter hands such a message here before it reaches the inbox; when it
//! answers an open question of that chat it becomes a [`Press`] under the same rules as a
//! button (only the approval's own chat, only an allowed sender, only the requester), and is
//! not a message for the agent.
//!
//! Must not: take a word for an answer when no question is open in that chat, or guess between
//! two open questions when the reply names neither.

use super::{Approvals, Press, PressOutcome};
use crate::domain::Platform;
use crate::store::ApprovalRow;

/// The line added under a question on a platform without buttons.
pub const ASK_IN_WORDS: &str = "Reply yes to approve or no to deny.";

/// The question's text as it goes out where there are no buttons.
pub fn question_in_words(text: &str) -> String {
    format!("{text}\n\n{ASK_IN_WORDS}")
}

/// A reply in words or a reaction that answers a yes/no question: `Some(true)` approves,
/// `Some(false)` denies, `None` is anything else (an ordinary message).
pub fn answer_in_words(text: &str) -> Option<bool> {
    let word = text
        .trim()
        .trim_end_matches(['.', '!'])
        .trim()
        .to_lowercase();
    match word.as_str() {
        "yes" | "y" | "approve" | "approved" | "ok" | "✅" | "👍" | "✔️" | "✔" => {
            Some(true)
        }
        "no" | "n" | "deny" | "denied" | "❌" | "👎" | "✖️" | "✖" => Some(false),
        _ => None,
    }
}

/// One message that may answer a question: where it was said, by whom, and what it replies
/// or reacts to (the platform's message id of the question, when the platform tells).
#[derive(Debug, Clone)]
pub struct WordReply<'a> {
    pub platform: Platform,
    pub chat_id: &'a str,
    pub thread_id: Option<&'a str>,
    pub sender_id: &'a str,
    /// The reply's text, or the reaction's key.
    pub text: &'a str,
    /// The message replied or reacted to.
    pub in_reply_to: Option<&'a str>,
}

impl Approvals {
    /// Answers the open question this reply is for, as a press; `None` when the message is not
    /// an answer (not yes/no, or no open question of this chat it could be for), and it goes
    /// to the agent as any message does.
    pub async fn answer_in_words(&self, reply: &WordReply<'_>) -> Option<PressOutcome> {
        let approve = answer_in_words(reply.text)?;
        let open = match self.store.approvals_pending(None).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read open approvals; the reply goes to the agent");
                return None;
            }
        };
        let row = question_for(&open, reply)?;
        let press = Press {
            approval_id: row.id.clone(),
            approve,
            platform: reply.platform,
            chat_id: reply.chat_id.to_string(),
            sender_id: reply.sender_id.to_string(),
            sender_roles: Vec::new(),
        };
        Some(self.press(&press).await)
    }
}

/// The question a reply answers: the one whose message it replies to, else the only open one
/// of its chat (and thread).
fn question_for<'r>(open: &'r [ApprovalRow], reply: &WordReply<'_>) -> Option<&'r ApprovalRow> {
    let here: Vec<&ApprovalRow> = open
        .iter()
        .filter(|r| r.platform == reply.platform.as_str() && r.chat_id == reply.chat_id)
        .collect();
    if let Some(target) = reply.in_reply_to {
        if let Some(row) = here
            .iter()
            .find(|r| r.prompt_message_id.as_deref() == Some(target))
        {
            return Some(row);
        }
    }
    let in_thread: Vec<&&ApprovalRow> = here
        .iter()
        .filter(|r| r.thread_id.as_deref() == reply.thread_id)
        .collect();
    match in_thread.as_slice() {
        [only] => Some(only),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ApprovalStatus;

    fn row(id: &str, chat: &str, thread: Option<&str>, prompt: Option<&str>) -> ApprovalRow {
        ApprovalRow {
            id: id.into(),
            lane: crate::domain::LaneKey::new(&format!("matrix:{chat}")),
            inbox_id: 1,
            call_index: 0,
            tool: "shell".into(),
            arguments: "{}".into(),
            person: "matrix:@a:hs".into(),
            platform: "matrix".into(),
            chat_id: chat.into(),
            thread_id: thread.map(str::to_string),
            status: ApprovalStatus::Pending,
            decided_by: None,
            deadline: 0,
            prompt_message_id: prompt.map(str::to_string),
            result: None,
            created_at: 0,
        }
    }

    fn reply<'a>(chat: &'a str, to: Option<&'a str>) -> WordReply<'a> {
        WordReply {
            platform: Platform::named("matrix"),
            chat_id: chat,
            thread_id: None,
            sender_id: "@a:hs",
            text: "yes",
            in_reply_to: to,
        }
    }

    #[test]
    fn words_and_reactions_read_as_answers() {
        for yes in ["yes", "Yes.", " YES! ", "y", "ok", "✅", "👍", "approve"] {
            assert_eq!(answer_in_words(yes), Some(true), "{yes:?}");
        }
        for no in ["no", "No", "n", "deny", "❌", "👎"] {
            assert_eq!(answer_in_words(no), Some(false), "{no:?}");
        }
        for other in [
            "yes please do the other thing",
            "",
            "maybe",
            "nope not that",
        ] {
            assert_eq!(answer_in_words(other), None, "{other:?}");
        }
    }

    #[test]
    fn a_reply_to_the_question_picks_it_among_several() {
        let open = [
            row("a1", "!r:hs", None, Some("$q1")),
            row("a2", "!r:hs", None, Some("$q2")),
        ];
        assert_eq!(
            question_for(&open, &reply("!r:hs", Some("$q2")))
                .unwrap()
                .id,
            "a2"
        );
        // Two open and the reply names neither: no guess.
        assert!(question_for(&open, &reply("!r:hs", None)).is_none());
        assert!(question_for(&open, &reply("!r:hs", Some("$other"))).is_none());
    }

    #[test]
    fn the_only_open_question_of_the_chat_is_answered_and_no_other_chat() {
        let open = [
            row("a1", "!r:hs", None, None),
            row("b1", "!s:hs", None, None),
        ];
        assert_eq!(question_for(&open, &reply("!r:hs", None)).unwrap().id, "a1");
        assert!(question_for(&open, &reply("!t:hs", None)).is_none());
        let threaded = [row("a1", "!r:hs", Some("$root"), None)];
        assert!(question_for(&threaded, &reply("!r:hs", None)).is_none());
    }
}
