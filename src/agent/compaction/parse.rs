//! Reading an earlier projection back into [`Facts`], so the next compaction merges its lines
//! (each keeps its `[#N]`) instead of summarizing a summary.
//!
//! Accepts exactly the formats `sections.rs` renders and skips anything else: a line this parser
//! does not recognize is dropped, never copied, so a hand-edited or hostile "previous" text
//! cannot smuggle a heading or an uncited line into the next projection.

use std::borrow::Cow;

use super::extract::{FileAction, Outcome};
use super::sections::{
    CommandEntry, ErrorEntry, Facts, FileEntry, GoalLine, NameEntry, COMMANDS, ERRORS, ERROR_NAMES,
    FILES, GOAL, HEADINGS, SESSION_LOG,
};

/// Parses `previous` (a bare projection or one wrapped by `carrier`).
pub fn parse_previous(previous: &str) -> Facts<'_> {
    let mut facts = Facts::default();
    let mut section: Option<&str> = None;
    for line in previous.lines() {
        if let Some(h) = HEADINGS.iter().find(|h| **h == line) {
            section = Some(h);
            continue;
        }
        if line.starts_with(super::project::CARRIER_FOOTER) {
            break;
        }
        let Some(section) = section else { continue };
        if let Some(n) = omitted_count(line) {
            let slot = match section {
                GOAL => &mut facts.omitted.goal,
                ERRORS => &mut facts.omitted.errors,
                FILES => &mut facts.omitted.files,
                COMMANDS => &mut facts.omitted.commands,
                ERROR_NAMES => &mut facts.omitted.names,
                _ => &mut facts.omitted.log,
            };
            *slot = slot.saturating_add(n);
            continue;
        }
        if section == SESSION_LOG {
            if cited(line).is_some() {
                facts.log.push(line.to_string());
            }
            continue;
        }
        let Some((id, body)) = line.strip_prefix("- ").and_then(cited) else {
            continue;
        };
        match section {
            GOAL => parse_goal(id, body, &mut facts),
            ERRORS => facts.errors.extend(parse_error(id, body)),
            FILES => facts.files.extend(parse_file(id, body)),
            COMMANDS => facts.commands.extend(parse_command(id, body)),
            ERROR_NAMES if !body.is_empty() && !body.contains(' ') => {
                facts.names.push(NameEntry {
                    first_id: id,
                    name: body,
                });
            }
            _ => {}
        }
    }
    facts
}

/// `[#N] rest` → (N, rest).
pub fn cited(line: &str) -> Option<(i64, &str)> {
    let rest = line.strip_prefix("[#")?;
    let close = rest.find(']')?;
    let id = rest[..close].parse().ok()?;
    let body = &rest[close + 1..];
    Some((id, body.strip_prefix(' ').unwrap_or(body)))
}

fn omitted_count(line: &str) -> Option<usize> {
    let rest = line.strip_prefix("[… ")?.strip_suffix(" …]")?;
    let (n, words) = rest.split_once(' ')?;
    matches!(words, "older entries omitted" | "earlier lines omitted").then(|| n.parse().ok())?
}

fn parse_goal(id: i64, body: &str, facts: &mut Facts<'_>) {
    if let Some(text) = body.strip_prefix("first request: ") {
        facts.first_request = Some(GoalLine {
            id,
            text: text.to_string(),
        });
    } else if let Some(text) = body.strip_prefix("latest request: ") {
        facts.latest_request = Some(GoalLine {
            id,
            text: text.to_string(),
        });
    }
}

/// `KEY — OUTCOME[: detail] → fixed at [#B] | → not fixed yet`
fn parse_error(id: i64, body: &str) -> Option<ErrorEntry> {
    let (key, rest) = body.split_once(" — ")?;
    let (middle, fix) = rest.rsplit_once(" → ")?;
    let fixed_at = match fix {
        "not fixed yet" => None,
        _ => Some(cited(fix.strip_prefix("fixed at ")?)?.0),
    };
    let (outcome, detail) = match middle.split_once("): ") {
        Some((o, d)) => (format!("{o})"), Some(d.to_string())),
        None => match middle.split_once(": ") {
            Some((o, d)) if Outcome::parse(o).is_some() => (o.to_string(), Some(d.to_string())),
            _ => (middle.to_string(), None),
        },
    };
    Some(ErrorEntry {
        id,
        key: key.to_string(),
        outcome: Outcome::parse(&outcome)?,
        detail,
        detail_from: None,
        fixed_at,
    })
}

fn parse_file(id: i64, body: &str) -> Option<FileEntry<'_>> {
    let (path, actions) = body.rsplit_once(" — ")?;
    let actions: Vec<FileAction> = actions
        .split(", ")
        .filter_map(|w| FileAction::ALL.into_iter().find(|a| a.word() == w))
        .collect();
    (!actions.is_empty()).then_some(FileEntry {
        last_id: id,
        path: Cow::Borrowed(path),
        actions,
    })
}

/// `` `cmd` — OUTCOME[; earlier OUTCOME at [#A]][; N runs] ``
fn parse_command(id: i64, body: &str) -> Option<CommandEntry<'_>> {
    let rest = body.strip_prefix('`')?;
    let (command, rest) = rest.split_once("` — ")?;
    let mut parts = rest.split("; ");
    let last = Outcome::parse(parts.next()?)?;
    let mut entry = CommandEntry {
        last_id: id,
        command: Cow::Borrowed(command),
        last,
        earlier_failure: None,
        runs: 1,
    };
    for part in parts {
        if let Some(runs) = part.strip_suffix(" runs") {
            entry.runs = runs.parse().ok()?;
        } else if let Some(rest) = part.strip_prefix("earlier ") {
            let (outcome, at) = rest.rsplit_once(" at ")?;
            entry.earlier_failure = Some((cited(at)?.0, Outcome::parse(outcome)?));
        }
    }
    Some(entry)
}
