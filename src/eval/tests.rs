//! The pure parts of evals, table-tested: what a case file may say and the error a wrong one
//! gets, `--since`, the redaction of an export, and the JUnit file's escaping.

use std::path::PathBuf;

use chrono::{TimeZone, Utc};

use super::case::load;
use super::export::{case_file, since_ms, Recorded, Recording};
use super::report::junit;
use super::suite::CaseResult;

fn file(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

fn load_error(name: &str, text: &str) -> String {
    let (_dir, path) = file(name, text);
    load(&[path]).unwrap_err().to_string()
}

#[test]
fn a_case_file_in_toml_or_yaml_reads_the_same() {
    let toml = "[[cases]]\nname = \"a\"\n[[cases.messages]]\nperson = \"telegram:7\"\n\
                platform = \"telegram\"\ntext = \"hi\"\n[cases.expect]\nreply_contains = \"x\"\n\
                tool_called = \"search\"\n";
    let yaml = "cases:\n  - name: a\n    messages:\n      - {person: 'telegram:7', platform: \
                telegram, text: hi}\n    expect: {reply_contains: [x], tool_called: [search]}\n";
    for (name, text) in [("a.toml", toml), ("a.yaml", yaml)] {
        let (_dir, path) = file(name, text);
        let cases = load(&[path]).unwrap();
        let c = &cases[0].case;
        assert_eq!(c.expect.reply_contains, vec!["x".to_string()], "{name}");
        assert_eq!(c.expect.tool_called[0].name(), "search", "{name}");
        assert_eq!(c.messages[0].sender(), "7", "{name}");
        assert_eq!(c.messages[0].chat_id(), "7", "{name}");
    }
}

#[test]
fn a_wrong_case_file_is_refused_naming_the_file_and_the_case() {
    let table = [
        (
            "[[cases]]\nname = \"a\"\nmessages = []\n",
            "case \"a\": no [[cases.messages]]",
        ),
        (
            "[[cases]]\nname = \"a\"\n[[cases.messages]]\nperson = \"p\"\ntext = \"t\"\n\
             [cases.expect]\nreply_matches = \"(\"\n",
            "case \"a\": expect.reply_matches \"(\"",
        ),
        (
            "[[cases]]\nname = \"a\"\n[[cases.messages]]\nperson = \"p\"\ntext = \"t\"\n\
             [cases.expect]\nreply_contain = \"x\"\n",
            "unknown field `reply_contain`",
        ),
        (
            "[[cases]]\nname = \"a\"\n[[cases.messages]]\nplatform = \"Tele gram\"\n\
             person = \"p\"\ntext = \"t\"\n",
            "platform \"Tele gram\" is not a platform name",
        ),
        (
            "[[cases]]\nname = \"a\"\n[[cases.messages]]\nperson = \"p\"\ntext = \"t\"\n\
             [cases.expect]\nno_tool = true\ntool_called = \"x\"\n",
            "contradict",
        ),
        ("", "the file holds no [[cases]]"),
    ];
    for (text, want) in table {
        let e = load_error("suite.toml", text);
        assert!(e.starts_with("case file "), "{e}");
        assert!(e.contains("suite.toml"), "{e}");
        assert!(e.contains(want), "{want:?} not in {e}");
    }
    let twice = "[[cases]]\nname = \"a\"\n[[cases.messages]]\nperson = \"p\"\ntext = \"t\"\n";
    let e = load_error("s.toml", &format!("{twice}{twice}"));
    assert!(e.contains("case \"a\" is named twice"), "{e}");
}

#[test]
fn since_takes_a_time_a_date_or_an_age() {
    let now = Utc.with_ymd_and_hms(2026, 12, 7, 12, 0, 0).unwrap();
    let ms = |s: &str| since_ms(Some(s), now).unwrap();
    assert_eq!(since_ms(None, now).unwrap(), 0);
    assert_eq!(
        ms("2026-12-07T11:00:00Z"),
        now.timestamp_millis() - 3_600_000
    );
    assert_eq!(ms("2026-12-07"), now.timestamp_millis() - 12 * 3_600_000);
    assert_eq!(ms("30m"), now.timestamp_millis() - 1_800_000);
    assert_eq!(ms("2d"), now.timestamp_millis() - 2 * 86_400_000);
    for bad in ["yesterday", "5w", "h", ""] {
        let e = since_ms(Some(bad), now).unwrap_err().to_string();
        assert!(e.contains("--since"), "{bad}: {e}");
    }
}

#[test]
fn an_export_keeps_its_person_and_hides_secrets_and_everyone_else() {
    let mut config = crate::config::Config::default();
    config.people = vec![
        crate::config::Person {
            name: "ana".into(),
            ids: vec!["telegram:111".into()],
        },
        crate::config::Person {
            name: "zoe".into(),
            ids: vec!["telegram:222333".into()],
        },
    ];
    let rec = Recording {
        platform: "telegram".into(),
        chat: "111".into(),
        turns: vec![Recorded {
            text: "ask zoe (222333) or mail bob@example.com".into(),
            reply: "I will ask someone.".into(),
            at: 0,
        }],
    };
    let f = case_file(&rec, "telegram:111", &config);
    let m = &f.cases[0].messages[0];
    assert_eq!(
        (m.platform.as_str(), m.person.as_str()),
        ("telegram", "111")
    );
    assert!(
        !m.text.contains("zoe") && !m.text.contains("222333"),
        "{}",
        m.text
    );
    assert!(!m.text.contains("bob@example.com"), "{}", m.text);
    assert_eq!(m.reference.as_deref(), Some("I will ask someone."));
    assert_eq!(
        f.cases[0].expect.reply_contains,
        vec!["I will ask someone."]
    );
}

#[test]
fn the_junit_file_escapes_what_a_reason_quotes() {
    let r = |name: &str, passed: bool, reason: &str| CaseResult {
        name: name.into(),
        file: "s.toml".into(),
        passed,
        reason: reason.into(),
        runs: 1,
        passes: passed as u32,
        pass_rate: passed as u8 as f64,
        input_tokens: 1,
        output_tokens: 1,
        cost: None,
        latency_ms: 1500,
        reply: "<b>&</b>".into(),
    };
    let xml = String::from_utf8(
        junit(&[r("ok", true, ""), r("a<b", false, "reply lacks \"x\"")]).unwrap(),
    )
    .unwrap();
    assert!(
        xml.contains(r#"tests="2" failures="1" time="3.000""#),
        "{xml}"
    );
    assert!(
        xml.contains(r#"<testcase name="ok" classname="s.toml" time="1.500"/>"#),
        "{xml}"
    );
    assert!(xml.contains(r#"name="a&lt;b""#), "{xml}");
    assert!(
        xml.contains(r#"message="reply lacks &quot;x&quot;""#),
        "{xml}"
    );
    assert!(xml.contains("reply: &lt;b&gt;&amp;&lt;/b&gt;"), "{xml}");
}
