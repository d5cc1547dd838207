//! Chat commands every platform shares (`/new`, `/status`, `/stop`, `/start`, `/help`,
//! `/usage`, `/voice`, `/agent`).
//! Parsing only; the lane worker carries them out.

/// A recognized command. Anything else starting with `/` is ordinary text for the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Start,
    Help,
    New,
    Stop,
    Status,
    Usage,
    /// `/voice on`, `/voice off` (spoken replies in this conversation), `/voice` (which).
    Voice(Option<bool>),
    /// `/agent` (which agents, in a private chat) or `/agent NAME` (switch to it); the name is
    /// read from the text by the command itself.
    Agent,
}

/// Parses `/cmd` or `/cmd@BotName` (the suffix must name this bot when a name is known).
pub fn parse_command(text: &str, bot_username: Option<&str>) -> Option<Command> {
    let first = text.split_whitespace().next()?;
    let rest = first.strip_prefix('/')?;
    let (name, target) = match rest.split_once('@') {
        Some((n, t)) => (n, Some(t)),
        None => (rest, None),
    };
    if let (Some(t), Some(me)) = (target, bot_username) {
        if !t.eq_ignore_ascii_case(me) {
            return None;
        }
    }
    match name.to_ascii_lowercase().as_str() {
        "start" => Some(Command::Start),
        "help" => Some(Command::Help),
        "new" | "reset" => Some(Command::New),
        "stop" => Some(Command::Stop),
        "status" => Some(Command::Status),
        "usage" => Some(Command::Usage),
        "agent" => Some(Command::Agent),
        "voice" => Some(Command::Voice(
            match text
                .split_whitespace()
                .nth(1)
                .map(str::to_ascii_lowercase)
                .as_deref()
            {
                Some("on") => Some(true),
                Some("off") => Some(false),
                _ => None,
            },
        )),
        _ => None,
    }
}

pub const HELP_TEXT: &str = "Talk to me in plain words. Commands: /new starts a fresh session, \
/stop cancels the answer in progress, /status shows this conversation's state, /usage shows \
what you have spent, /voice on or /voice off switches spoken replies, /agent lists the agents \
you can talk to in a private chat and /agent NAME switches to one, /wrapup (or the single word \
handoff) writes a handoff note for the next session.";

/// A group member's `/stop` while another member's turn runs (see `approvals.admins`).
pub const STOP_REFUSED: &str = "Only the person whose turn this is, or an admin, can stop it.";

/// A group member's `/new` of a session others spoke in too.
pub const NEW_REFUSED: &str = "Others in this chat are part of this session, so only an admin can \
start a new one.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_table() {
        let cases: &[(&str, Option<&str>, Option<Command>)] = &[
            ("/new", None, Some(Command::New)),
            ("/NEW", None, Some(Command::New)),
            ("/new@HeraldBot", Some("heraldbot"), Some(Command::New)),
            ("/new@OtherBot", Some("HeraldBot"), None),
            ("/stop please", None, Some(Command::Stop)),
            ("  /status", None, Some(Command::Status)),
            ("/start", None, Some(Command::Start)),
            ("/usage", None, Some(Command::Usage)),
            ("/reset", None, Some(Command::New)),
            ("/voice on", None, Some(Command::Voice(Some(true)))),
            ("/voice OFF", None, Some(Command::Voice(Some(false)))),
            ("/voice", None, Some(Command::Voice(None))),
            ("/agent", None, Some(Command::Agent)),
            ("/agent coder", None, Some(Command::Agent)),
            ("/agents", None, None),
            ("/newer", None, None),
            ("new", None, None),
            ("/unknown", None, None),
            ("", None, None),
        ];
        for (text, bot, want) in cases {
            assert_eq!(parse_command(text, *bot), *want, "{text:?}");
        }
    }
}
