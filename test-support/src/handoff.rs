//! What the model must see of a handoff capsule, checked the same way whichever path wrote it
//! (a `/wrapup` in the chat in `e2e_handoff`, the nightly closer in `e2e_handoff_nightly`):
//! the writer's request, and the next session's first two requests receiving the capsule once.
//!
//! Must not: start anything or talk to the daemon; these read recorded model requests only.

use super::fake_llm::Recorded;

/// The label that opens an injected capsule in the user's message.
pub const LABEL: &str = "[Handoff note from an earlier session of this conversation]";

/// How often `needle` appears in the request's user messages (the fake model echoes the user
/// text in its replies, so assistant messages are left out).
pub fn in_user_messages(req: &Recorded, needle: &str) -> usize {
    req.messages()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .map(|c| c.matches(needle).count())
        .sum()
}

/// The capsule writer's request: the writer's own system prompt, and the dialogue (which holds
/// `dialogue`) as its input.
pub fn assert_writer_request(writer: &Recorded, dialogue: &str) {
    assert!(
        writer.system().starts_with("You write a handoff capsule"),
        "{}",
        writer.system()
    );
    assert!(
        writer.last_user().contains(dialogue),
        "the writer did not read {dialogue:?}"
    );
}

/// The next session's first request (`first`, for the user's `first_text`) carries the capsule
/// once, after the user's own words and holding `capsule_line`, never in the system prompt; the
/// second request (for `second_text`) still has it once, in that first message, its own text
/// bare, and the same system prompt byte for byte (the provider's prompt cache keeps working).
pub fn assert_capsule_received_once(
    first: &Recorded,
    first_text: &str,
    capsule_line: &str,
    second: &Recorded,
    second_text: &str,
) {
    let user = first.last_user();
    assert!(user.starts_with(&format!("{first_text}\n\n")), "{user}");
    assert_eq!(in_user_messages(first, LABEL), 1, "{user}");
    assert!(user.contains(capsule_line), "{user}");
    assert!(
        !first.system().contains("Working on"),
        "the capsule is not in the system prompt"
    );
    assert_eq!(second.last_user(), second_text);
    assert_eq!(
        in_user_messages(second, LABEL),
        1,
        "the capsule stays once, in the first message"
    );
    assert_eq!(second.system().as_bytes(), first.system().as_bytes());
}
