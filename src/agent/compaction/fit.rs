//! Fitting a projection to its character budget: the session log takes the newest lines that
//! fit after the structured sections, then sections give up their oldest entries in a fixed
//! order, each drop counted in the section's omission note.
//!
//! Lines of the log are built lazily, newest first, so a long middle costs only the lines that
//! can be shown. Deterministic like the rest of the projector.

use super::log::{log_line_count, log_lines, Pairing};
use super::project::is_carrier;
use super::sections::{self, join, Rendered};
use super::ProjMessage;

/// The session log before fitting: the previous projection's lines, then the lines of every
/// message, oldest first. Lines are built only for the newest ones that fit.
pub(super) struct Log<'a> {
    pub(super) previous: Vec<String>,
    pub(super) messages: &'a [ProjMessage],
    pub(super) pairing: &'a Pairing<'a>,
    pub(super) first_names: &'a [Option<usize>],
}

impl<'a> Log<'a> {
    fn len(&self) -> usize {
        let own: usize = (0..self.messages.len())
            .filter(|&i| !is_carrier(&self.messages[i]))
            .map(|i| log_line_count(self.messages, i))
            .sum();
        self.previous.len() + own
    }

    /// Lines newest first: the messages' own, then the previous projection's.
    fn newest_first(&self) -> NewestFirst<'_, 'a> {
        NewestFirst {
            log: self,
            unread: self.messages.len(),
            lines: Vec::new(),
            previous: self.previous.len(),
        }
    }
}

/// Builds a message's lines only when the fitting reaches it, into one reused buffer.
struct NewestFirst<'l, 'a> {
    log: &'l Log<'a>,
    /// Messages not read yet: those before this index.
    unread: usize,
    /// The lines of the message read last, oldest first, not handed out yet.
    lines: Vec<String>,
    /// Previous-projection lines not handed out yet: those before this index.
    previous: usize,
}

impl Iterator for NewestFirst<'_, '_> {
    type Item = String;

    fn next(&mut self) -> Option<String> {
        let log = self.log;
        loop {
            if let Some(line) = self.lines.pop() {
                return Some(line);
            }
            if self.unread == 0 {
                break;
            }
            self.unread -= 1;
            let i = self.unread;
            if !is_carrier(&log.messages[i]) {
                log_lines(
                    log.messages,
                    i,
                    log.pairing,
                    log.first_names[i],
                    &mut self.lines,
                );
            }
        }
        self.previous = self.previous.checked_sub(1)?;
        Some(log.previous[self.previous].clone())
    }
}

/// Order in which sections give up entries when even the capped sections exceed the budget:
/// the session log first (it is the most redundant with the sections above), the goal last.
const SHRINK_ORDER: [usize; 6] = [5, 4, 2, 3, 1, 0];

pub(super) fn fit(mut sections: Vec<Rendered>, log: &Log<'_>, budget: usize) -> String {
    let fixed: usize = sections[..5].iter().map(Rendered::chars).sum();
    fit_log(&mut sections[5], log, budget.saturating_sub(fixed));
    let mut total: usize = sections.iter().map(Rendered::chars).sum();
    for &i in &SHRINK_ORDER {
        while total > budget && sections[i].drop_oldest() {
            total = sections.iter().map(Rendered::chars).sum();
        }
    }
    // Nothing left but headings and notes: drop whole sections, newest-first order irrelevant.
    for &i in &SHRINK_ORDER {
        if total > budget {
            sections[i].omitted = 0;
            total = sections.iter().map(Rendered::chars).sum();
        }
    }
    join(&sections)
}

/// Fills `section` (the session log, still empty) with the newest lines that fit in `room`
/// characters, with the omission note when some do not. All lines are kept when they fit
/// without a note for the lines dropped now.
fn fit_log(section: &mut Rendered, log: &Log<'_>, room: usize) {
    let total = log.len();
    let heading = section.heading.chars().count() + 1;
    // Size of the section holding every line: heading, the note it already has, blank line.
    let whole_base = heading + section.note().map_or(0, |n| n.chars().count() + 1) + 1;
    // Size once lines are dropped: the note with the largest count it can show.
    let note = sections::log_note(total + section.omitted).chars().count() + 1;
    let overhead = heading + note + 1;
    let mut lines = Vec::new();
    let mut sum = 0;
    let mut keep = None;
    let mut all_fit = true;
    for line in log.newest_first() {
        sum += line.chars().count() + 1;
        if keep.is_none() && overhead + sum > room {
            keep = Some(lines.len());
        }
        if whole_base + sum > room {
            all_fit = false;
            break;
        }
        lines.push(line);
    }
    if total == 0 && section.omitted == 0 {
        return;
    }
    let keep = if all_fit {
        lines.len()
    } else {
        keep.unwrap_or(lines.len())
    };
    lines.truncate(keep);
    lines.reverse();
    section.omitted += total - keep;
    section.lines = lines;
}
