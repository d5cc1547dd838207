//! Table tests for the capsule's shape: statuses, validation, Recovery, fallback, assembly.

use super::*;
use crate::handoff::trim::trim_marker;

fn chars(s: &str) -> usize {
    s.chars().count()
}

fn line(id: i64, role: &str, text: &str) -> TranscriptLine {
    TranscriptLine {
        id,
        role: role.to_string(),
        text: text.to_string(),
    }
}

const GOOD: &str = "## Working on\nMake the nightly mirror skip unreachable hosts.\n\n\
                    ## State\nHost B times out; patch drafted.\n\n\
                    ## Decisions\nSkip and report instead of failing.\n\n\
                    ## Pointers\n- [#12] the failing log\n\n\
                    ## Next\nRun the job once against host B.";

#[test]
fn build_status_strings_round_trip() {
    let table = [
        (BuildStatus::Ok, "ok", true),
        (BuildStatus::Degraded, "degraded", true),
        (BuildStatus::TooShort, "too_short", false),
        (BuildStatus::AlreadyRunning, "already_running", false),
        (BuildStatus::WriteFailed, "write_failed", false),
        (BuildStatus::ScrubFailed, "scrub_failed", false),
    ];
    assert_eq!(table.len(), BuildStatus::ALL.len());
    for (status, s, wrote) in table {
        assert_eq!(status.as_str(), s);
        assert_eq!(status.to_string(), s);
        assert_eq!(BuildStatus::parse(s), Some(status));
        assert_eq!(status.wrote_capsule(), wrote, "{s}");
        let json = serde_json::to_string(&status).expect("serialize");
        assert_eq!(json, format!("\"{s}\""));
    }
    for bad in [
        "",
        "OK",
        "Degraded",
        "too-short",
        "confidential_unsupported",
    ] {
        assert_eq!(BuildStatus::parse(bad), None, "{bad:?}");
    }
}

#[test]
fn writer_output_validation_table() {
    let three =
        "## Working on\nthe mirror job fix, nearly done\n## State\nhalf done\n## Next\nrun it";
    let two = "## Working on\nthe mirror job fix, nearly done now\n## Next\nrun it again tonight";
    let cases: &[(&str, Result<(), InvalidCapsule>)] = &[
        (GOOD, Ok(())),
        (three, Ok(())),
        ("```markdown\n## Working on\nx\n## State\ny\n## Next\nz and some more words here\n```", Ok(())),
        ("\n\n  ```\n## working ON\nthe mirror fix\n## STATE\nhalf\n## next\nrun it tonight\n```  \n", Ok(())),
        ("", Err(InvalidCapsule::TooFewChars { chars: 0 })),
        ("## Working on\n## State\n## Next", Err(InvalidCapsule::TooFewChars { chars: 30 })),
        (two, Err(InvalidCapsule::MissingHeadings { found: 2 })),
        (
            "I could not summarise this conversation because the credentials were rejected.",
            Err(InvalidCapsule::MissingHeadings { found: 0 }),
        ),
        (
            "Working on: the fix\nState: half\nDecisions: skip\nNext: run it tonight please",
            Err(InvalidCapsule::MissingHeadings { found: 0 }),
        ),
        (
            "### Working on\nthe fix\n### State\nhalf\n### Next\nrun it tonight please",
            Err(InvalidCapsule::MissingHeadings { found: 0 }),
        ),
    ];
    for (input, want) in cases {
        let got = validate_writer_output(input).map(|_| ());
        assert_eq!(&got, want, "validate({input:?})");
    }
}

#[test]
fn validation_cleans_fences_case_and_invented_recovery() {
    let reply = "```md\n## working on\nthe fix\n## State\nhalf\n## NEXT\nrun it tonight\n\n\
                 ## Recovery\nsession made-up-id\n```";
    let body = validate_writer_output(reply).expect("valid");
    assert_eq!(
        body,
        "## Working on\nthe fix\n## State\nhalf\n## Next\nrun it tonight"
    );
}

#[test]
fn recovery_names_session_count_and_both_search_calls() {
    let r = recovery_section("4f1c-77", 218);
    assert!(r.starts_with("## Recovery\n"));
    assert!(r.contains("session 4f1c-77 (218 messages)"));
    assert!(r.contains("`session_search(query=\"2 to 5 keywords\")`"));
    assert!(r.contains(
        "`session_search(session_id=\"4f1c-77\", around_message_id=<message id>, \
         role_filter=\"user,assistant,tool\")`"
    ));
    assert!(r.contains("does not search the session"));
    // a hostile id cannot break out of the quoted argument or add lines
    let r = recovery_section("a\"b\nc", 1);
    assert!(r.contains("session_id=\"a_b_c\""));
}

#[test]
fn recovery_says_when_the_writer_read_only_the_newest_messages() {
    // 400 messages of 1,000 characters: the 300,000-character input holds the newest 298.
    let lines: Vec<TranscriptLine> = (0..400)
        .map(|i| {
            line(
                i,
                if i % 2 == 0 { "user" } else { "assistant" },
                &"x".repeat(1_000),
            )
        })
        .collect();
    let read = crate::handoff::writer_input_count(&lines);
    assert!(read < 400 && read > 250, "{read}");
    let r = recovery_section_read("s9", 400, read);
    assert!(
        r.contains(&format!(
            "session s9 (400 messages; the writer read the newest {read},"
        )),
        "{r}"
    );
    assert_eq!(recovery_section_read("s9", 4, 4), recovery_section("s9", 4));
}

#[test]
fn strip_recovery_table() {
    let with = format!("{GOOD}\n\n{}", recovery_section("s1", 9));
    let cases: Vec<(&str, &str)> = vec![
        (&with, GOOD),
        (GOOD, GOOD),
        ("## Recovery\nonly", ""),
        ("body\n\n", "body"),
        (
            "a line mentioning ## Recovery inline",
            "a line mentioning ## Recovery inline",
        ),
    ];
    for (input, want) in cases {
        assert_eq!(strip_recovery(input), want, "strip_recovery({input:?})");
    }
}

#[test]
fn assemble_fits_cap_and_keeps_recovery_whole() {
    let recovery = recovery_section("sess-1", 40);
    let small = assemble(GOOD, Some(&recovery));
    assert_eq!(small, format!("{GOOD}\n\n{recovery}"));
    assert_eq!(assemble(GOOD, None), format!("{GOOD}\n"));

    let big_state = "line of state detail that goes on\n".repeat(400); // ~13,600 chars
    let body = GOOD
        .replace("half done", &big_state)
        .replace("Host B times out; patch drafted.", &big_state);
    let out = assemble(&body, Some(&recovery));
    assert!(chars(&out) <= CAP_CHARS, "{} chars", chars(&out));
    assert!(out.ends_with(&recovery));
    for h in ["## Working on", "## Pointers", "## Next", "## Recovery"] {
        assert!(out.contains(h), "lost {h}");
    }
    assert!(out.contains("characters trimmed from the middle"));
    let out = assemble(&body, None);
    assert!(chars(&out) <= CAP_CHARS);
    assert!(!out.contains("## Recovery"));
}

#[test]
fn fallback_says_what_it_is_and_fits_with_recovery_after_one_cut() {
    let mut lines = vec![line(
        1,
        "user",
        "The nightly mirror job is failing on host B.",
    )];
    for i in 2..800 {
        let role = if i % 2 == 0 { "assistant" } else { "user" };
        lines.push(line(
            i,
            role,
            &format!("message number {i} about the mirror job"),
        ));
        lines.push(line(10_000 + i, "tool", "TOOL OUTPUT SHOULD NOT APPEAR"));
    }
    lines.push(line(
        900,
        "assistant",
        "Last: run it against host B tonight.",
    ));
    let capsule = fallback_capsule(&lines);
    assert!(capsule.starts_with(
        "## Working on\nThe writer model did not return a usable handoff, so this is the \
         filtered transcript instead"
    ));
    assert!(capsule.contains("[#1] user: The nightly mirror job is failing on host B."));
    assert!(capsule
        .trim_end()
        .ends_with("[#900] assistant: Last: run it against host B tonight."));
    assert!(!capsule.contains("TOOL OUTPUT"));
    assert!(chars(&capsule) <= CAP_CHARS - RECOVERY_RESERVE_CHARS);

    let recovery = recovery_section("0193a1b2-session", lines.len());
    assert!(chars(&recovery) < RECOVERY_RESERVE_CHARS);
    let stored = assemble(&capsule, Some(&recovery));
    assert!(chars(&stored) <= CAP_CHARS);
    assert_eq!(
        stored.matches("characters trimmed from the middle").count(),
        1
    );
    assert!(stored.ends_with(&recovery));
}

#[test]
fn short_fallback_is_not_trimmed() {
    let lines = [
        line(1, "user", "hi"),
        line(2, "assistant", "hello\n## Next\nnot a heading"),
    ];
    let capsule = fallback_capsule(&lines);
    assert!(!capsule.contains(trim_marker(0).trim()));
    assert!(capsule.contains("[#2] assistant: hello\n  ## Next\n  not a heading"));
}

#[test]
fn word_count_table() {
    let cases = [
        ("", 0),
        ("   \n\t ", 0),
        ("one", 1),
        ("## Working on\nthe fix", 5),
        ("hand-off is one word, 1,200 is one", 7),
        ("漢字 かな", 2),
    ];
    for (text, want) in cases {
        assert_eq!(word_count(text), want, "word_count({text:?})");
    }
}
