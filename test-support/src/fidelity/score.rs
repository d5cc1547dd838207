//! Scores a projection against the ground truth of a planted transcript: which facts it kept
//! (of all planted, and of those its section caps leave room for), whether each command's
//! stated outcome is the true one, whether every `[#N]` cites a message holding what the line
//! quotes, and how much hostile text got through.
//!
//! Reads the projection only by its printed line formats (`sections.rs` render functions), as
//! a model or an operator would, so it measures the output rather than the projector's insides.

use std::collections::{BTreeSet, HashMap};

use herald::agent::compaction::check_faithful;
use serde::Serialize;

use super::cites::Facts;
use super::planted::{Planted, Truth};
use super::residue::{residue, Residue};

/// The projector's headings and entry caps, as documented in `sections.rs`.
pub const HEADINGS: [&str; 6] = [
    "## Goal",
    "## Errors and fixes",
    "## Files",
    "## Commands",
    "## Error names",
    "## Session log",
];
pub const MAX_FILES: usize = 40;
pub const MAX_COMMANDS: usize = 25;
pub const MAX_ERROR_NAMES: usize = 20;

/// Recall of one fact kind.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Kind {
    pub planted: usize,
    /// The newest planted facts the section's cap leaves room for.
    pub within_caps: usize,
    pub kept: usize,
    pub kept_within_caps: usize,
    /// Listed entries that were never planted (invented or misread).
    pub spurious: usize,
    /// Missing facts newer than the oldest one listed: dropped out of turn, not for room.
    pub silent_misses: usize,
    /// The section's own "[… N older entries omitted …]" count.
    pub omitted_note: usize,
    /// Planted facts the section neither lists nor counts as omitted: never read at all
    /// (a lower bound, since a spurious entry may hide among the omitted).
    pub unaccounted: usize,
}

#[derive(Debug, Default, Clone, Serialize)]
pub struct Score {
    pub commands: Kind,
    pub files: Kind,
    pub names: Kind,
    /// Listed planted commands, and those whose final outcome is the true one.
    pub outcomes_listed: usize,
    pub outcomes_correct: usize,
    /// Listed commands with a failed run before the last one, and those that show it.
    pub earlier_failures_expected: usize,
    pub earlier_failures_shown: usize,
    /// Listed files whose actions are exactly the planted ones.
    pub file_actions_correct: usize,
    /// Entry ids equal to the true one (last result, last touch, first sighting).
    pub ids_checked: usize,
    pub ids_correct: usize,
    pub citations: usize,
    pub bad_citations: usize,
    pub residue: Residue,
    pub faithful: bool,
    /// The first few misses, in words, for the report.
    pub problems: Vec<String>,
}

impl Score {
    fn problem(&mut self, text: String) {
        if self.problems.len() < 12 {
            self.problems.push(text);
        }
    }
}

/// A planted command's true summary: last result id and outcome, the first failure before
/// the last run, the number of runs.
struct CommandTruth {
    last_id: i64,
    outcome: String,
    earlier: Option<(i64, String)>,
    runs: usize,
}

/// Planted facts folded per key and ordered as the sections order them (oldest first).
struct Folded {
    commands: Vec<(String, CommandTruth)>,
    files: Vec<(String, i64, BTreeSet<&'static str>)>,
    names: Vec<(String, i64)>,
}

fn fold(truth: &Truth) -> Folded {
    let mut order: Vec<String> = Vec::new();
    let mut runs: HashMap<&str, Vec<&super::planted::Run>> = HashMap::new();
    for r in &truth.runs {
        runs.entry(&r.command)
            .or_insert_with(|| {
                order.push(r.command.clone());
                Vec::new()
            })
            .push(r);
    }
    let mut commands: Vec<(String, CommandTruth)> = order
        .into_iter()
        .map(|c| {
            let rs = &runs[c.as_str()];
            let last = rs[rs.len() - 1];
            let earlier = rs[..rs.len() - 1]
                .iter()
                .find(|r| r.outcome.starts_with("failed"))
                .map(|r| (r.result_id, r.outcome.clone()));
            let t = CommandTruth {
                last_id: last.result_id,
                outcome: last.outcome.clone(),
                earlier,
                runs: rs.len(),
            };
            (c, t)
        })
        .collect();
    commands.sort_by_key(|(_, t)| t.last_id);
    let mut files: Vec<(String, i64, BTreeSet<&'static str>)> = Vec::new();
    for t in &truth.touches {
        match files.iter_mut().find(|f| f.0 == t.path) {
            Some(f) => {
                f.1 = f.1.max(t.id);
                f.2.insert(t.action);
            }
            None => files.push((t.path.clone(), t.id, BTreeSet::from([t.action]))),
        }
    }
    files.sort_by_key(|f| f.1);
    let mut names: Vec<(String, i64)> = Vec::new();
    for (name, id) in &truth.names {
        if !names.iter().any(|(n, _)| n == name) {
            names.push((name.clone(), *id));
        }
    }
    names.sort_by_key(|n| n.1);
    Folded {
        commands,
        files,
        names,
    }
}

/// One section of a printed projection: its omission note and its entry lines.
#[derive(Default)]
struct Section<'a> {
    omitted: usize,
    lines: Vec<&'a str>,
}

fn sections(projection: &str) -> HashMap<&'static str, Section<'_>> {
    let mut out: HashMap<&'static str, Section<'_>> = HashMap::new();
    let mut current = None;
    for line in projection.lines() {
        if let Some(h) = HEADINGS.iter().find(|h| **h == line) {
            current = Some(*h);
            continue;
        }
        let Some(h) = current else { continue };
        let section = out.entry(h).or_default();
        let note = line
            .strip_prefix("[… ")
            .and_then(|r| r.split_once(' '))
            .filter(|(_, rest)| rest.ends_with(" omitted …]"))
            .and_then(|(n, _)| n.parse().ok());
        match note {
            Some(n) => section.omitted = n,
            None if !line.is_empty() => section.lines.push(line),
            None => {}
        }
    }
    out
}

/// `- [#N] BODY` → (N, BODY).
fn entry(line: &str) -> Option<(i64, &str)> {
    cited(line.strip_prefix("- ")?)
}

/// `[#N] BODY` → (N, BODY).
fn cited(text: &str) -> Option<(i64, &str)> {
    let (id, body) = text.strip_prefix("[#")?.split_once(']')?;
    Some((id.parse().ok()?, body.strip_prefix(' ').unwrap_or(body)))
}

/// A printed command entry: `` `CMD` — OUTCOME[; earlier OUTCOME at [#M]][; K runs] ``.
struct CommandLine<'a> {
    command: &'a str,
    outcome: &'a str,
    earlier: Option<(i64, &'a str)>,
    runs: usize,
}

fn command_line(body: &str) -> Option<CommandLine<'_>> {
    let (command, rest) = body.strip_prefix('`')?.split_once("` — ")?;
    let mut parts = rest.split("; ");
    let mut line = CommandLine {
        command,
        outcome: parts.next()?,
        earlier: None,
        runs: 1,
    };
    for part in parts {
        if let Some(k) = part.strip_suffix(" runs") {
            line.runs = k.parse().ok()?;
        } else if let Some((outcome, at)) = part.strip_prefix("earlier ")?.rsplit_once(" at ") {
            line.earlier = Some((cited(at)?.0, outcome));
        }
    }
    Some(line)
}

/// Recall bookkeeping shared by the three kinds: `truth` keys oldest first, `listed` keys.
fn recall(truth: &[&str], listed: &[&str], cap: usize, omitted_note: usize) -> (Kind, Vec<String>) {
    let from = truth.len().saturating_sub(cap);
    let position = |k: &str| truth.iter().position(|t| *t == k);
    let oldest_listed = listed.iter().filter_map(|k| position(k)).min();
    let mut kind = Kind {
        planted: truth.len(),
        within_caps: truth.len() - from,
        omitted_note,
        ..Kind::default()
    };
    let mut missing = Vec::new();
    for (i, t) in truth.iter().enumerate() {
        if listed.contains(t) {
            kind.kept += 1;
            kind.kept_within_caps += usize::from(i >= from);
        } else if oldest_listed.is_some_and(|o| i > o) {
            kind.silent_misses += 1;
            missing.push(format!("missing: {t}"));
        }
    }
    for k in listed.iter().filter(|k| position(k).is_none()) {
        kind.spurious += 1;
        missing.push(format!("listed, never planted: {k}"));
    }
    kind.unaccounted = kind.planted.saturating_sub(kind.kept + omitted_note);
    (kind, missing)
}

/// Scores `projection` of `planted.messages` against the planted truth.
pub fn score(planted: &Planted, projection: &str) -> Score {
    let folded = fold(&planted.truth);
    let secs = sections(projection);
    let empty = Section::default();
    let sec = |h: &str| secs.get(h).unwrap_or(&empty);
    let facts = Facts::of(&planted.messages);
    let mut s = Score {
        residue: residue(projection),
        faithful: check_faithful(projection, &planted.messages).is_ok(),
        ..Score::default()
    };

    // Commands: recall, outcomes, earlier failures, ids, citations.
    let parsed: Vec<(i64, CommandLine)> = sec(HEADINGS[3])
        .lines
        .iter()
        .filter_map(|l| entry(l).and_then(|(id, b)| Some((id, command_line(b)?))))
        .collect();
    let keys: Vec<&str> = folded.commands.iter().map(|(c, _)| c.as_str()).collect();
    let listed: Vec<&str> = parsed.iter().map(|(_, c)| c.command).collect();
    let (kind, missing) = recall(&keys, &listed, MAX_COMMANDS, sec(HEADINGS[3]).omitted);
    s.commands = kind;
    missing
        .iter()
        .for_each(|m| s.problem(format!("command {m}")));
    for (id, line) in &parsed {
        s.citations += 1 + usize::from(line.earlier.is_some());
        let ok = facts.result_of(*id) == Some(line.command)
            && line
                .earlier
                .is_none_or(|(m, _)| facts.result_of(m) == Some(line.command));
        if !ok {
            s.bad_citations += 1;
            s.problem(format!(
                "command cites a result of another call: [#{id}] {}",
                line.command
            ));
        }
        let Some((_, t)) = folded.commands.iter().find(|(c, _)| c == line.command) else {
            continue;
        };
        s.outcomes_listed += 1;
        s.ids_checked += 1;
        s.ids_correct += usize::from(*id == t.last_id && line.runs == t.runs);
        if line.outcome == t.outcome {
            s.outcomes_correct += 1;
        } else {
            s.problem(format!(
                "`{}` says {}, truth {}",
                line.command, line.outcome, t.outcome
            ));
        }
        s.earlier_failures_expected += usize::from(t.earlier.is_some());
        let shown = line.earlier.map(|(m, o)| (m, o.to_string()));
        if t.earlier.is_some() && shown == t.earlier {
            s.earlier_failures_shown += 1;
        } else if shown != t.earlier {
            s.problem(format!(
                "`{}` earlier failure {shown:?}, truth {:?}",
                line.command, t.earlier
            ));
        }
    }

    // Files: recall, actions, ids, citations.
    let parsed: Vec<(i64, &str, BTreeSet<&str>)> = sec(HEADINGS[2])
        .lines
        .iter()
        .filter_map(|l| {
            let (id, body) = entry(l)?;
            let (path, actions) = body.rsplit_once(" — ")?;
            Some((id, path, actions.split(", ").collect()))
        })
        .collect();
    let keys: Vec<&str> = folded.files.iter().map(|f| f.0.as_str()).collect();
    let listed: Vec<&str> = parsed.iter().map(|f| f.1).collect();
    let (kind, missing) = recall(&keys, &listed, MAX_FILES, sec(HEADINGS[2]).omitted);
    s.files = kind;
    missing.iter().for_each(|m| s.problem(format!("file {m}")));
    for (id, path, actions) in &parsed {
        s.citations += 1;
        if !facts.mentions(*id, path) {
            s.bad_citations += 1;
            s.problem(format!("[#{id}] does not contain path {path}"));
        }
        if let Some((_, last, truth_actions)) = folded.files.iter().find(|f| f.0 == *path) {
            s.ids_checked += 1;
            s.ids_correct += usize::from(id == last);
            if actions == truth_actions {
                s.file_actions_correct += 1;
            } else {
                s.problem(format!(
                    "{path}: actions {actions:?}, truth {truth_actions:?}"
                ));
            }
        }
    }

    // Error names: recall, ids, citations.
    let parsed: Vec<(i64, &str)> = sec(HEADINGS[4])
        .lines
        .iter()
        .filter_map(|l| entry(l))
        .collect();
    let keys: Vec<&str> = folded.names.iter().map(|n| n.0.as_str()).collect();
    let listed: Vec<&str> = parsed.iter().map(|n| n.1).collect();
    let (kind, missing) = recall(&keys, &listed, MAX_ERROR_NAMES, sec(HEADINGS[4]).omitted);
    s.names = kind;
    missing
        .iter()
        .for_each(|m| s.problem(format!("error name {m}")));
    for (id, name) in &parsed {
        s.citations += 1;
        if !facts.mentions(*id, name) {
            s.bad_citations += 1;
            s.problem(format!("[#{id}] does not contain error name {name}"));
        }
        if let Some((_, first)) = folded.names.iter().find(|n| n.0 == *name) {
            s.ids_checked += 1;
            s.ids_correct += usize::from(id == first);
        }
    }

    // Goal, errors and log: every cited id must exist and hold what the line quotes.
    for line in &sec(HEADINGS[0]).lines {
        s.citations += 1;
        let ok = entry(line).is_some_and(|(id, body)| facts.user_says(id, body));
        if !ok {
            s.bad_citations += 1;
            s.problem(format!("goal line does not quote its message: {line}"));
        }
    }
    for line in &sec(HEADINGS[1]).lines {
        let (id, body) = entry(line).unwrap_or((0, ""));
        let key = body.split(" — ").next().unwrap_or("");
        let fixed = body
            .rsplit_once(" → fixed at ")
            .and_then(|(_, at)| cited(at));
        s.citations += 1 + usize::from(fixed.is_some());
        let ok = facts.answers(id, key) && fixed.is_none_or(|(m, _)| facts.answers(m, key));
        if !ok {
            s.bad_citations += 1;
            s.problem(format!(
                "error entry cites a result of another call: {line}"
            ));
        }
    }
    for line in &sec(HEADINGS[5]).lines {
        s.citations += 1;
        if !cited(line).is_some_and(|(id, _)| facts.by_id.contains_key(&id)) {
            s.bad_citations += 1;
            s.problem(format!("log line cites no stored message: {line}"));
        }
    }
    s
}
