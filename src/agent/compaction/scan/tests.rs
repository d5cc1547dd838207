//! Tests of the free-text scanners that need their insides: escapes that end a word, the
//! extension table, and the SIMD extension search against the dot walk.

use super::*;

use crate::test_rng::Rng;

#[test]
fn an_escaped_line_break_ends_the_word_after_it() {
    // JSON text of a tool result: `\n` is a line break, `\\n` a backslash and an `n`.
    let json = r#"{"output":"boom\nValueError: x\napp/h.py:12: in f\n\tTimeoutError\\nkept.py"}"#;
    assert_eq!(error_names(json), ["ValueError", "TimeoutError"]);
    assert_eq!(mentioned_paths(json), ["app/h.py", "nkept.py"]);
    let first = json.find("ValueError");
    assert_eq!(
        error_line(json, first, 80).as_deref(),
        Some("ValueError: x")
    );
    let header =
        r#"{"out":"log\nTraceback (most recent call last):\n  File \"a.py\"\nfailed: y\n"}"#;
    assert_eq!(error_line(header, None, 80).as_deref(), Some("failed: y"));
}

#[test]
fn every_source_extension_is_found_and_only_those() {
    for ext in SOURCE_EXTENSIONS {
        assert!(is_source_extension(ext), "{ext}");
        assert_eq!(
            token_path(&format!("src/a.{ext}:3")),
            Some(&*format!("src/a.{ext}"))
        );
    }
    for other in ["", "r", "rss", "RS", "exe", "toml2", "longextension"] {
        assert!(!is_source_extension(other), "{other}");
    }
    assert_eq!(token_path("lib/x.rs..."), Some("lib/x.rs"));
    assert_eq!(token_path("./.rs"), None);
    assert_eq!(token_path("v1.2.rs:9"), Some("v1.2.rs"));
    assert_eq!(token_path("123.rs"), None);
}

/// The SIMD extension search must find exactly what the dot walk finds, so a machine
/// without it projects the same bytes.
#[test]
fn extension_search_and_dot_walk_agree() {
    let Some(finder) = &*EXTENSION_FINDER else {
        panic!("this machine has no packed search; the agreement cannot be checked here");
    };
    let alphabet: &[&str] = &[
        "src/", "lib", ".rs", ".r", ".", "..", "...", ":12", ":", " ", "\n", "a.b", ".cpp", ".c",
        ".PY", ".py", "x", "/", "-", "é", ".json.", "mod", ".lock", "~",
    ];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..20_000 {
        let mut text = String::new();
        for _ in 0..rng.below(24) {
            text.push_str(rng.pick(alphabet));
        }
        let simd = paths_at(&text, finder.find_iter(&text).map(|m| m.start()));
        let walk = paths_at(&text, dots_before_letters(text.as_bytes()));
        assert_eq!(simd, walk, "text {text:?}");
    }
    assert_eq!(
        mentioned_paths("at src/lib.rs:12:5 and tests/a.py... test x ... ok src/lib.rs"),
        ["src/lib.rs", "tests/a.py"]
    );
}
