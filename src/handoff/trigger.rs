//! Decides whether a chat message asks for a handoff capsule.
//!
//! The rule is strict on purpose: a sentence that merely mentions a handoff is a normal message,
//! and in a shared chat a loose match would spend the owner's model calls on whoever happens to
//! say the word. `/handoff <platform>` belongs to a different feature (moving a live CLI session)
//! and must never start a capsule. This module only reads text: authorization, media and
//! internal events are the dispatch hook's business.

const HANDOFF_WORDS: [&str; 3] = ["handoff", "hand off", "hand-off"];
const WRAPUP: &str = "/wrapup";

/// True when the whole message is the bare word: `handoff`, `hand off` or `hand-off`, in any
/// case, with surrounding whitespace, full stops and exclamation marks ignored.
pub fn is_handoff_word(text: &str) -> bool {
    let word = text
        .trim()
        .trim_matches(|c: char| c == '.' || c == '!')
        .to_lowercase();
    HANDOFF_WORDS.contains(&word.as_str())
}

/// True when the whole message is `/wrapup`, optionally addressed as `/wrapup@BotName`.
///
/// When `bot_username` is known, an addressed command must name this bot (case-insensitively):
/// in a group with several bots, `/wrapup@OtherBot` is someone else's command. When the name is
/// unknown (web chat, before `getMe`), any well-formed address is accepted. Arguments are not:
/// `/wrapup now` is a sentence, not the command.
pub fn is_wrapup_command(text: &str, bot_username: Option<&str>) -> bool {
    let text = text.trim();
    let Some(prefix) = text.get(..WRAPUP.len()) else {
        return false;
    };
    if !prefix.eq_ignore_ascii_case(WRAPUP) {
        return false;
    }
    let rest = &text[WRAPUP.len()..];
    if rest.is_empty() {
        return true;
    }
    let Some(addressed) = rest.strip_prefix('@') else {
        return false;
    };
    if addressed.is_empty()
        || !addressed
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return false;
    }
    match bot_username {
        Some(me) => addressed.eq_ignore_ascii_case(me.trim().trim_start_matches('@')),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handoff_word_table() {
        let cases: &[(&str, bool)] = &[
            ("handoff", true),
            ("Handoff.", true),
            ("HAND-OFF!", true),
            ("  hand off  ", true),
            ("hand off", true),
            ("handoff!!!", true),
            ("...handoff...", true),
            ("!handoff.", true),
            ("\n\thandoff\n", true),
            ("Hand Off!", true),
            ("handoff. ", true),
            ("handoff now please", false),
            ("can you do a handoff for me?", false),
            ("/handoff telegram", false),
            ("/handoff", false),
            ("handoff?", false),
            ("handoffs", false),
            ("hand  off", false),
            ("hand_off", false),
            ("handoff, please", false),
            ("handoff ✅", false),
            ("", false),
            ("   ", false),
            ("...", false),
            ("off", false),
            ("\"handoff\"", false),
        ];
        for (text, want) in cases {
            assert_eq!(is_handoff_word(text), *want, "is_handoff_word({text:?})");
        }
    }

    #[test]
    fn wrapup_command_table() {
        let cases: &[(&str, Option<&str>, bool)] = &[
            ("/wrapup", None, true),
            ("/wrapup", Some("HeraldBot"), true),
            ("  /wrapup \n", Some("HeraldBot"), true),
            ("/WrapUp", None, true),
            ("/wrapup@HeraldBot", Some("HeraldBot"), true),
            ("/wrapup@heraldbot", Some("HeraldBot"), true),
            ("/wrapup@HeraldBot", Some("@HeraldBot"), true),
            ("/wrapup@OtherBot", Some("HeraldBot"), false),
            ("/wrapup@HeraldBot2", Some("HeraldBot"), false),
            ("/wrapup@AnyBot", None, true),
            ("/wrapup@", None, false),
            ("/wrapup@", Some("HeraldBot"), false),
            ("/wrapup@Herald Bot", None, false),
            ("/wrapupx", None, false),
            ("/wrapup now", None, false),
            ("/wrapup@HeraldBot now", Some("HeraldBot"), false),
            ("wrapup", None, false),
            ("/wrap", None, false),
            ("/handoff", None, false),
            ("please /wrapup", None, false),
            ("/wrapé", None, false),
            ("", None, false),
        ];
        for (text, bot, want) in cases {
            assert_eq!(
                is_wrapup_command(text, *bot),
                *want,
                "is_wrapup_command({text:?}, {bot:?})"
            );
        }
    }
}
