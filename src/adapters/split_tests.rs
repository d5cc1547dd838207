//! Tests for the message splitter: table cases for the cut rules, a long realistic answer, and a
//! seeded randomized check of the invariants (fit, balanced fences, nothing lost, order kept).

use super::{split_message, Measure, TELEGRAM_LIMIT};
use std::collections::HashSet;

use crate::test_rng::Rng;

#[test]
fn table_of_cuts() {
    let cases: &[(&str, &str, usize, Measure, &[&str])] = &[
        ("empty input sends nothing", "", 10, Measure::Chars, &[]),
        (
            "short text is one chunk",
            "hello",
            10,
            Measure::Chars,
            &["hello"],
        ),
        (
            "whitespace-only input sends nothing",
            " \n\n ",
            10,
            Measure::Chars,
            &[],
        ),
        (
            "a whitespace-only stretch is skipped",
            "aaaa\n\n    \n\nbbbb",
            5,
            Measure::Chars,
            &["aaaa", "bbbb"],
        ),
        (
            "exactly the limit is one chunk",
            "0123456789",
            10,
            Measure::Chars,
            &["0123456789"],
        ),
        (
            "paragraph break wins over a later line break",
            "aaaa bbbb\n\ncccc\ndddd",
            15,
            Measure::Chars,
            &["aaaa bbbb", "cccc\ndddd"],
        ),
        (
            "line break wins over a later space",
            "aaaa bbbb\ncc dd ee ff",
            14,
            Measure::Chars,
            &["aaaa bbbb", "cc dd ee ff"],
        ),
        (
            "space when there is no line break",
            "aaaa bbbb cccc",
            10,
            Measure::Chars,
            &["aaaa bbbb", "cccc"],
        ),
        (
            "hard cut for one long word",
            "abcdefghij",
            4,
            Measure::Chars,
            &["abcd", "efgh", "ij"],
        ),
        (
            "emoji count 2 in UTF-16",
            "😀😀😀",
            4,
            Measure::Utf16,
            &["😀😀", "😀"],
        ),
        (
            "an emoji never splits even at an odd limit",
            "😀😀😀",
            3,
            Measure::Utf16,
            &["😀", "😀", "😀"],
        ),
        (
            "emoji count 1 as characters",
            "😀😀😀",
            2,
            Measure::Chars,
            &["😀😀", "😀"],
        ),
        (
            "an early paragraph break loses to a later space",
            "ab\n\ncdefgh ijklmn",
            14,
            Measure::Chars,
            &["ab\n\ncdefgh", "ijklmn"],
        ),
        (
            "a fence cut is closed and reopened with its info string",
            "```rust\nlet a = 1;\nlet b = 2;\n```",
            24,
            Measure::Chars,
            &["```rust\nlet a = 1;\n```", "```rust\nlet b = 2;\n```"],
        ),
        (
            "prose before a block is cut before the block, not inside it",
            "intro text\n\n```\ncode\n```",
            16,
            Measure::Chars,
            &["intro text", "```\ncode\n```"],
        ),
    ];
    for (name, text, limit, measure, want) in cases {
        let got = split_message(text, *limit, *measure);
        assert_eq!(got, *want, "{name}");
    }
}

/// Lines that open or close a code fence.
fn fence_lines(chunk: &str) -> usize {
    chunk
        .lines()
        .filter(|l| l.trim_start().starts_with("```"))
        .count()
}

/// True when `chunks` give back `text` once the added fence lines are removed and the dropped
/// whitespace is put back at each cut (the table test pins down exactly which separator).
fn reassembles(text: &str, chunks: &[String]) -> bool {
    fn bodies(chunk: &str) -> Vec<&str> {
        let mut out = vec![chunk];
        let reopened = chunk
            .starts_with("```")
            .then(|| chunk.split_once('\n').map(|(_, b)| b));
        if let Some(Some(b)) = reopened {
            out.push(b);
        }
        for b in out.clone() {
            if let Some(b) = b.strip_suffix("\n```") {
                out.push(b);
            }
        }
        out
    }
    fn walk(
        text: &str,
        chunks: &[String],
        i: usize,
        pos: usize,
        seen: &mut HashSet<(usize, usize)>,
    ) -> bool {
        let rest = &text[pos..];
        let gap = rest.len() - rest.trim_start().len();
        if i == chunks.len() {
            return gap == rest.len();
        }
        if !seen.insert((i, pos)) {
            return false;
        }
        // Any whitespace may sit between chunks: separators and whitespace-only stretches.
        (0..=gap).filter(|g| rest.is_char_boundary(*g)).any(|g| {
            bodies(&chunks[i]).into_iter().any(|body| {
                rest[g..].starts_with(body) && walk(text, chunks, i + 1, pos + g + body.len(), seen)
            })
        })
    }
    walk(text, chunks, 0, 0, &mut HashSet::new())
}

fn check_invariants(text: &str, limit: usize, measure: Measure) -> Vec<String> {
    let chunks = split_message(text, limit, measure);
    for (i, chunk) in chunks.iter().enumerate() {
        assert!(!chunk.is_empty(), "chunk {i} is empty");
        assert!(
            measure.len(chunk) <= limit,
            "chunk {i} is {} > {limit}: {chunk:?}",
            measure.len(chunk)
        );
        assert_eq!(
            fence_lines(chunk) % 2,
            0,
            "chunk {i} has unbalanced fences: {chunk:?}"
        );
    }
    assert!(
        reassembles(text, &chunks),
        "content lost or reordered\ntext: {text:?}\nchunks: {chunks:?}"
    );
    chunks
}

#[test]
fn long_answer_with_emoji_and_code_fits_telegram() {
    let mut text = String::new();
    let mut n = 0;
    while text.chars().count() < 4_000 {
        n += 1;
        text.push_str(&format!(
            "Paragraph {n} 🚀 explains a step of the plan in plain words, with a 🎉 or two.\n\n"
        ));
    }
    text.push_str("```rust\n");
    while text.chars().count() < 8_000 {
        n += 1;
        text.push_str(&format!("    let value_{n} = compute(\"😀 {n}\");\n"));
    }
    text.push_str("```\n\n");
    while text.chars().count() < 10_000 {
        n += 1;
        text.push_str(&format!(
            "Afterword {n}: the answer ends here 👋 and nothing is missing.\n"
        ));
    }
    let chunks = check_invariants(&text, TELEGRAM_LIMIT, Measure::Utf16);
    assert!(
        chunks.len() >= 3,
        "a 10,000-character answer needs at least 3 chunks"
    );
    let reopened: Vec<_> = chunks
        .iter()
        .skip(1)
        .filter(|c| c.starts_with("```rust\n"))
        .collect();
    assert!(
        !reopened.is_empty(),
        "a chunk inside the code block reopens it with its language"
    );
    assert!(chunks[0].starts_with("Paragraph 1 🚀"));
    assert!(chunks
        .last()
        .is_some_and(|c| c.trim_end().ends_with("nothing is missing.")));
    let sizes: Vec<usize> = chunks.iter().map(|c| Measure::Utf16.len(c)).collect();
    println!(
        "10k answer: {} chunks, UTF-16 sizes {sizes:?}",
        chunks.len()
    );
}

fn random_text(rng: &mut Rng) -> String {
    const PIECES: &[&str] = &[
        "word",
        "a",
        "Ünïcode",
        "😀",
        "👩‍💻",
        "日本語",
        "x",
        "longerwordwithoutspaces",
    ];
    let mut text = String::new();
    let mut in_fence = false;
    for _ in 0..rng.below(120) {
        match rng.below(12) {
            0 => text.push_str("\n\n"),
            1 | 2 => text.push('\n'),
            3 if !text.is_empty() && !text.ends_with('\n') => {}
            3 if in_fence => {
                text.push_str("```\n");
                in_fence = false;
            }
            3 => {
                text.push_str(["```\n", "```rust\n", "```py\n"][rng.below(3)]);
                in_fence = true;
            }
            4 => text.push_str(&" ".repeat(1 + rng.below(3))),
            _ => {
                text.push_str(PIECES[rng.below(PIECES.len())]);
                text.push(' ');
            }
        }
    }
    if in_fence {
        text.push_str(if text.ends_with('\n') { "```" } else { "\n```" });
    }
    text
}

#[test]
fn random_inputs_keep_the_invariants() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    for _ in 0..2_000 {
        let text = random_text(&mut rng);
        let limit = 16 + rng.below(60);
        let measure = if rng.below(2) == 0 {
            Measure::Utf16
        } else {
            Measure::Chars
        };
        check_invariants(&text, limit, measure);
    }
}
