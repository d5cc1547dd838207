//! Mechanical scrub of a confidential-lane capsule.
//!
//! The confidential prompt already forbids names, addresses, file names and account numbers;
//! this pass runs over the writer's output anyway, because a prompt is a request and the
//! contract is a promise. It replaces whole matches with a bracketed tag (`[email]`, `[phone]`,
//! `[card]`, `[hex]`, `[secret]`, `[guid]`) and must not eat ordinary prose: dates, versions,
//! short numbers and order ids that fail the Luhn check stay as written. It cannot find names
//! or street addresses; that part is the prompt's job.

use std::sync::LazyLock;

use regex::{Captures, Regex};

fn compile(pattern: &str) -> Regex {
    // The patterns are literals in this file; a bad one fails every test, not a user's input.
    Regex::new(pattern).expect("scrub pattern compiles")
}

/// Well-known token prefixes (OpenAI, Anthropic, GitHub, Slack, AWS, Google, GitLab) and JWTs.
static PREFIXED_TOKEN: LazyLock<Regex> = LazyLock::new(|| {
    compile(
        r"\b(?:sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35}|glpat-[A-Za-z0-9_-]{20,}|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})",
    )
});

/// `NAME_SECRET=value`, `*_TOKEN=`, `*_KEY=`, `PASSWORD=` and friends: the name stays (it says
/// what was configured), the value goes. The name must be the word itself or end in `_WORD`
/// so `monkey=banana` is left alone.
static ASSIGNMENT: LazyLock<Regex> = LazyLock::new(|| {
    compile(
        r#"(?i)\b((?:[A-Za-z0-9]+_)*(?:secret|token|key|password|passwd|pwd|apikey|credentials?)(?:_[A-Za-z0-9]+)*)(\s*=\s*)("[^"\n]*"|'[^'\n]*'|[^\s"'&;,]+)"#,
    )
});

static GUID: LazyLock<Regex> = LazyLock::new(|| {
    compile(r"\b[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}\b")
});

static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
});

static LONG_HEX: LazyLock<Regex> = LazyLock::new(|| compile(r"\b(?:0x)?[0-9A-Fa-f]{32,}\b"));

/// Candidates only: a run is a secret when it mixes lower case, upper case and digits.
static BASE64ISH: LazyLock<Regex> = LazyLock::new(|| compile(r"[A-Za-z0-9+/_-]{32,}={0,2}"));

/// Candidates only: 13–19 digits with optional single spaces or dashes, then the Luhn check.
static CARD: LazyLock<Regex> = LazyLock::new(|| compile(r"\b\d(?:[ -]?\d){12,18}\b"));

/// Phone shapes that ordinary numbers do not have: a leading `+`, a bracketed area code, the
/// North American 3-3-4 grouping, or a trunk `0` with grouped digits. Dates and versions never
/// match these; the digit count is checked after.
static PHONE: LazyLock<Regex> = LazyLock::new(|| {
    compile(
        r"(?:\+\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d{1,4}(?:[ .-]?\d{2,4}){1,5}|\(\d{2,4}\)[ .-]?\d{3,4}[ .-]?\d{3,4}|\b\d{3}[-. ]\d{3}[-. ]\d{4}|\b0\d{2,4}[- ]\d{3,4}[- ]?\d{3,4})\b",
    )
});

/// Replaces confidential-looking spans with bracketed tags. Idempotent: the tags themselves
/// match nothing.
pub fn scrub_confidential(text: &str) -> String {
    // Order matters: structured forms first so a later, looser pattern cannot claim a piece of
    // them (a GUID's groups look like hex, a card's groups look like a phone).
    let text = PREFIXED_TOKEN.replace_all(text, "[secret]");
    let text = ASSIGNMENT.replace_all(&text, |c: &Captures| {
        if &c[3] == "[secret]" {
            c[0].to_string()
        } else {
            format!("{}{}[secret]", &c[1], &c[2])
        }
    });
    let text = GUID.replace_all(&text, "[guid]");
    let text = EMAIL.replace_all(&text, "[email]");
    let text = LONG_HEX.replace_all(&text, "[hex]");
    let text = BASE64ISH.replace_all(&text, |c: &Captures| {
        let run = &c[0];
        let mixed = run.bytes().any(|b| b.is_ascii_lowercase())
            && run.bytes().any(|b| b.is_ascii_uppercase())
            && run.bytes().any(|b| b.is_ascii_digit());
        if mixed {
            "[secret]".to_string()
        } else {
            run.to_string()
        }
    });
    let text = CARD.replace_all(&text, |c: &Captures| {
        let start = c.get(0).map_or(0, |m| m.start());
        if text[..start].ends_with('+') {
            // `+4915112345678` is a phone number even when its digits pass Luhn.
            return c[0].to_string();
        }
        let digits: Vec<u8> = c[0]
            .bytes()
            .filter(u8::is_ascii_digit)
            .map(|b| b - b'0')
            .collect();
        if luhn_valid(&digits) {
            "[card]".to_string()
        } else {
            c[0].to_string()
        }
    });
    let text = PHONE.replace_all(&text, |c: &Captures| {
        let digits = c[0].bytes().filter(u8::is_ascii_digit).count();
        if (7..=15).contains(&digits) {
            "[phone]".to_string()
        } else {
            c[0].to_string()
        }
    });
    text.into_owned()
}

/// The Luhn checksum over decimal digits (most significant first).
fn luhn_valid(digits: &[u8]) -> bool {
    if !(13..=19).contains(&digits.len()) {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            let d = u32::from(d);
            if i % 2 == 1 {
                let doubled = d * 2;
                if doubled > 9 {
                    doubled - 9
                } else {
                    doubled
                }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confidential_spans_are_replaced_table() {
        let cases: &[(&str, &str)] = &[
            // emails
            ("mail ana.lopez+bills@example.co.uk today", "mail [email] today"),
            ("<ops@herald.dev>", "<[email]>"),
            // phones
            ("call +1 415 555 0100 now", "call [phone] now"),
            ("call +44 20 7946 0958", "call [phone]"),
            ("call +4915112345678.", "call [phone]."),
            ("office (415) 555-0100", "office [phone]"),
            ("cell 415-555-0100", "cell [phone]"),
            ("cell 415.555.0100", "cell [phone]"),
            ("Berlin 030 1234 5678", "Berlin [phone]"),
            // Luhn-valid cards, plain, spaced, dashed, 15-digit Amex
            ("card 4111111111111111 ok", "card [card] ok"),
            ("card 4111 1111 1111 1111 ok", "card [card] ok"),
            ("card 5500-0000-0000-0004", "card [card]"),
            ("amex 3782 822463 10005", "amex [card]"),
            // long hex
            ("sha d41d8cd98f00b204e9800998ecf8427e end", "sha [hex] end"),
            (
                "commit 2fd4e1c67a2d28fced849ee1bb76e7391b93eb12",
                "commit [hex]",
            ),
            ("0xdeadbeefdeadbeefdeadbeefdeadbeef", "[hex]"),
            // GUIDs
            (
                "tenant 123e4567-e89b-12d3-a456-426614174000.",
                "tenant [guid].",
            ),
            ("{6F9619FF-8B86-D011-B42D-00C04FC964FF}", "{[guid]}"),
            // prefixed tokens
            ("key sk-proj-abcdefghijklmnop1234", "key [secret]"),
            ("sk-ant-api03-AbCdEfGhIjKlMnOp", "[secret]"),
            ("ghp_1234567890abcdefghijABCDEFGHIJ", "[secret]"),
            ("xoxb-1234-5678-abcdefghij", "[secret]"),
            ("AKIAIOSFODNN7EXAMPLE", "[secret]"),
            (
                "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
                "jwt [secret]",
            ),
            // base64-ish with mixed case and digits
            (
                "token Zm9vYmFyQmF6UXV4MTIzNDU2Nzg5MGFiY2RlZg== there",
                "token [secret] there",
            ),
            // assignments keep the name, lose the value
            ("DB_SECRET=hunter2 next", "DB_SECRET=[secret] next"),
            ("GITHUB_TOKEN=abc123", "GITHUB_TOKEN=[secret]"),
            ("export OPENAI_API_KEY='x y z'", "export OPENAI_API_KEY=[secret]"),
            ("PASSWORD = \"correct horse\"", "PASSWORD = [secret]"),
            ("db_password=pa55", "db_password=[secret]"),
            ("url ?token=abc&x=1", "url ?token=[secret]&x=1"),
            ("API_KEY_PROD=k1, done", "API_KEY_PROD=[secret], done"),
        ];
        for (input, want) in cases {
            assert_eq!(scrub_confidential(input), *want, "scrub({input:?})");
        }
    }

    #[test]
    fn ordinary_text_stays_table() {
        let cases = [
            "Meeting on 2024-05-01 at 14:30, moved to 01/06/2025.",
            "Upgrade to 1.2.3, then 10.4.21-beta; see RFC 9110.",
            "We shipped 42 items, order 1234 5678 9012 3456 is late.",
            "Order id 1234567812345678 needs a refund.",
            "The monkey=banana config line and key points: none.",
            "Short hex abc123 and a git sha 2fd4e1c stay.",
            "Version 2024.10.1 and build 20240501.",
            "Normal words: handoff, capsule, Pointers, Next, State.",
            "a path like src/handoff/trim.rs is not a token",
            "an all-lowercase-slug-that-is-quite-long-indeed-yes stays",
            "IP 192.168.1.10 and port 8080.",
            "Tally: 3 of 5 hosts, 60 % done, ETA 12 minutes.",
            "Already scrubbed: [email] [phone] [card] [hex] [secret] [guid]",
        ];
        for input in cases {
            assert_eq!(scrub_confidential(input), input, "scrub changed {input:?}");
        }
    }

    #[test]
    fn luhn_is_a_real_checksum() {
        let digits = |s: &str| -> Vec<u8> { s.bytes().map(|b| b - b'0').collect() };
        assert!(luhn_valid(&digits("4111111111111111")));
        assert!(luhn_valid(&digits("378282246310005")));
        assert!(luhn_valid(&digits("6011111111111117")));
        assert!(!luhn_valid(&digits("4111111111111112")));
        assert!(!luhn_valid(&digits("1234567812345678")));
        assert!(!luhn_valid(&digits("0000000000"))); // too short to be a card
    }

    #[test]
    fn scrub_is_idempotent() {
        let once = scrub_confidential(
            "Reach ana@example.com or +1 415 555 0100; card 4111 1111 1111 1111; \
             GITHUB_TOKEN=ghp_1234567890abcdefghijABCDEFGHIJ",
        );
        assert_eq!(scrub_confidential(&once), once);
        assert_eq!(
            once,
            "Reach [email] or [phone]; card [card]; GITHUB_TOKEN=[secret]"
        );
    }
}
