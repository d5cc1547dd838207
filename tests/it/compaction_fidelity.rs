//! What the projector keeps, checked on seeded transcripts with planted facts: every command,
//! file and error name its section caps leave room for, each command's true final outcome (and
//! the earlier failure of one that was fixed), citations that point at the quoted message, and
//! no hostile text in the output. `bench_fidelity` reports the same score at benchmark sizes.

use herald::agent::compaction::{project, projection_budget_chars};

use herald_test_support::fidelity::planted::{planted, Planted};
use herald_test_support::fidelity::residue::residue;
use herald_test_support::fidelity::score::{score, Kind, Score};

const SEEDS: [u64; 4] = [1, 2, 3, 4];
/// Large enough that every section overflows its cap, small enough for a debug build.
const TOKENS: usize = 15_000;
/// A 200k-token window's budget: room for every capped section, so only the caps limit them.
fn roomy_budget() -> usize {
    projection_budget_chars(200_000)
}

fn run(seed: u64, tokens: usize, budget: usize) -> (Planted, String, Score) {
    let p = planted(seed, tokens);
    let projection = project(&p.messages, None, budget);
    let s = score(&p, &projection);
    (p, projection, s)
}

fn assert_all_within_caps(label: &str, kind: &str, k: &Kind, s: &Score) {
    assert!(
        k.within_caps < k.planted,
        "{label}: the transcript must overflow the {kind} cap to test it"
    );
    assert_eq!(
        k.kept_within_caps, k.within_caps,
        "{label}: {kind} within the cap not all kept; {:?}",
        s.problems
    );
}

/// The section lists only planted facts and its omission note counts exactly the rest.
fn assert_accounted(label: &str, kind: &str, k: &Kind) {
    assert_eq!(k.spurious, 0, "{label}: {kind} listed but never planted");
    assert_eq!(
        k.omitted_note,
        k.planted - k.within_caps,
        "{label}: the {kind} omission note must count exactly the dropped entries"
    );
}

#[test]
fn every_fact_within_the_caps_is_kept() {
    let (mut spurious_files, mut crowded_out_files) = (0, 0);
    let (mut missed_names, mut unread_names, mut wrong_ids) = (0, 0, 0);
    for seed in SEEDS {
        let (p, _, s) = run(seed, TOKENS, roomy_budget());
        assert_all_within_caps(&p.label, "commands", &s.commands, &s);
        assert_accounted(&p.label, "commands", &s.commands);
        assert!(
            s.names.within_caps < s.names.planted,
            "{}: names cap not reached",
            p.label
        );
        assert_eq!(s.names.spurious, 0, "{}: {:?}", p.label, s.problems);
        missed_names += s.names.within_caps - s.names.kept_within_caps;
        assert_eq!(
            s.file_actions_correct, s.files.kept,
            "{}: {:?}",
            p.label, s.problems
        );
        wrong_ids += s.ids_checked - s.ids_correct;
        spurious_files += s.files.spurious;
        crowded_out_files += s.files.within_caps - s.files.kept_within_caps;
        unread_names += s.names.unaccounted;
    }
    // A JSON-wrapped result (`{"output": "...\napp/x.py:12: in handle\nValueError: ..."}`)
    // puts a path or a name right after a `\n` escape; the escape's `n` is not part of it.
    assert_eq!(spurious_files, 0, "spurious files");
    assert_eq!(crowded_out_files, 0, "files crowded out");
    assert_eq!(missed_names, 0, "names missed within the cap");
    assert_eq!(unread_names, 0, "names never read");
    assert_eq!(wrong_ids, 0, "entries citing another than the true id");
}

/// The entry lines of one section of a projection.
fn section<'a>(projection: &'a str, heading: &str) -> Vec<&'a str> {
    projection
        .lines()
        .skip_while(|l| *l != heading)
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .filter(|l| l.starts_with("- [#"))
        .collect()
}

/// Two kinds of fact the checks above demand, planted in every transcript and listed: an error
/// name in terminal colours (raw, and spelled as JSON escapes in a JSON-wrapped result), and
/// the path of a write whose arguments were cut by pruning, left only in the result's stub.
#[test]
fn coloured_names_and_pruned_writes_are_kept() {
    let (mut raw, mut json, mut pruned) = (0, 0, 0);
    for seed in SEEDS {
        let (p, projection, _) = run(seed, TOKENS, roomy_budget());
        let content = |id: i64| {
            p.messages
                .iter()
                .find(|m| m.id == id)
                .map_or("", |m| m.content.as_str())
        };
        let names = section(&projection, "## Error names");
        for (name, id) in &p.truth.names {
            let listed = names.iter().any(|l| l.ends_with(&format!("] {name}")));
            if !listed {
                continue;
            }
            raw += usize::from(content(*id).contains(&format!("\u{1b}[31m{name}\u{1b}[0m")));
            json += usize::from(content(*id).contains(&format!("\\u001b[31m{name}\\u001b[0m")));
        }
        let files = section(&projection, "## Files");
        for t in &p.truth.touches {
            if content(t.id).starts_with("[write_file] wrote to ") {
                let cited = format!("- [#{}] {} — written", t.id, t.path);
                pruned += usize::from(files.iter().any(|l| *l == cited));
            }
        }
    }
    assert!(raw > 0, "no coloured name listed");
    assert!(json > 0, "no JSON-escaped coloured name listed");
    assert!(pruned > 0, "no pruned write listed");
}

#[test]
fn every_stated_outcome_is_the_true_one() {
    for seed in SEEDS {
        let (p, _, s) = run(seed, TOKENS, roomy_budget());
        assert!(
            s.outcomes_listed >= 20,
            "{}: too few commands listed",
            p.label
        );
        assert_eq!(
            s.outcomes_correct, s.outcomes_listed,
            "{}: {:?}",
            p.label, s.problems
        );
        assert!(
            s.earlier_failures_expected > 0,
            "{}: no failed-then-rerun command listed",
            p.label
        );
        assert_eq!(
            s.earlier_failures_shown, s.earlier_failures_expected,
            "{}: {:?}",
            p.label, s.problems
        );
    }
}

#[test]
fn every_citation_points_at_the_quoted_message() {
    for seed in SEEDS {
        let (p, _, s) = run(seed, TOKENS, roomy_budget());
        assert!(s.citations > 100, "{}: too few citations", p.label);
        assert_eq!(s.bad_citations, 0, "{}: {:?}", p.label, s.problems);
        assert!(
            s.faithful,
            "{}: session log quotes words not in its source",
            p.label
        );
    }
}

#[test]
fn hostile_output_leaves_no_residue() {
    let mut planted_hostile = 0;
    for seed in SEEDS {
        let (p, projection, s) = run(seed, TOKENS, roomy_budget());
        planted_hostile += p.truth.hostile;
        assert_eq!(
            s.residue.total(),
            0,
            "{}: {:?}\n{projection}",
            p.label,
            s.residue
        );
        // The raw transcript does carry what the projection must not.
        let raw: String = p.messages.iter().map(|m| m.content.as_str()).collect();
        assert!(residue(&raw).total() > 0);
    }
    assert!(planted_hostile > 0, "no hostile messages planted");
}

#[test]
fn a_tight_budget_drops_oldest_first_and_says_so() {
    // The benchmark's 10k window: 4,500 characters, less than the capped sections need.
    let budget = projection_budget_chars(10_000 * 4 / 3);
    let (mut files_off, mut names_off) = (0, 0);
    for seed in SEEDS {
        let (p, projection, s) = run(seed, TOKENS, budget);
        assert!(projection.chars().count() <= budget);
        for (kind, k) in [("commands", &s.commands), ("files", &s.files)] {
            assert_eq!(k.silent_misses, 0, "{}: {kind}: {:?}", p.label, s.problems);
        }
        let c = &s.commands;
        assert_eq!(c.spurious, 0, "{}", p.label);
        assert_eq!(
            c.kept + c.omitted_note,
            c.planted,
            "{}: commands unaccounted",
            p.label
        );
        // Listed or counted as omitted, each planted fact once and nothing else.
        let off = |k: &Kind| (k.kept + k.omitted_note).abs_diff(k.planted) + k.spurious;
        files_off += off(&s.files);
        names_off += off(&s.names) + s.names.silent_misses;
        assert_eq!(
            s.outcomes_correct, s.outcomes_listed,
            "{}: {:?}",
            p.label, s.problems
        );
        assert_eq!(s.residue.total(), 0, "{}", p.label);
    }
    assert_eq!(files_off, 0, "files off");
    assert_eq!(names_off, 0, "names off");
}

#[test]
fn the_score_drops_when_a_projection_lies() {
    let (p, projection, honest) = run(1, TOKENS, roomy_budget());

    // One command's final outcome flipped from passing to failing.
    let ok_line = projection
        .lines()
        .find(|l| l.starts_with("- [#") && l.contains("` — ok (exit 0)"))
        .expect("a passing command is listed");
    let flipped = projection.replacen(
        ok_line,
        &ok_line.replacen("ok (exit 0)", "failed (exit 1)", 1),
        1,
    );
    let s = score(&p, &flipped);
    assert_eq!(s.outcomes_correct + 1, honest.outcomes_correct);

    // One file entry removed.
    let files = projection.find("## Files\n").expect("files section");
    let file_line = projection[files..]
        .lines()
        .find(|l| l.starts_with("- [#"))
        .expect("a file entry");
    let removed = projection.replacen(&format!("{file_line}\n"), "", 1);
    let s = score(&p, &removed);
    assert_eq!(s.files.kept_within_caps + 1, honest.files.kept_within_caps);

    // A cited id moved to a message that does not hold the fact.
    let name_at = projection.find("## Error names\n").expect("names section");
    let name_line = projection[name_at..]
        .lines()
        .find(|l| l.starts_with("- [#"))
        .expect("a name entry");
    let wrong_id = p.messages[0].id;
    let (_, name) = name_line.split_once("] ").expect("entry");
    let moved = projection.replacen(name_line, &format!("- [#{wrong_id}] {name}"), 1);
    let s = score(&p, &moved);
    assert_eq!(s.bad_citations, honest.bad_citations + 1);

    // A smuggled heading and an escape.
    let s = score(&p, &format!("{projection}## Goal\n\u{1b}[2J\n"));
    assert_eq!(s.residue.stray_headings, 1);
    assert_eq!(s.residue.escapes, 1);
}
