//! What a suite's results look like to a person and to CI: the table on stdout, the side by
//! side of `--compare`, and the files of `--report` — JSON (the list of case results) and
//! JUnit XML (one testcase per case, a failure element with the reason), which CI systems
//! read as test results.

use std::fmt::Write as _;
use std::io::Cursor;
use std::path::{Path, PathBuf};

use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};
use quick_xml::Writer;

use super::suite::CaseResult;

fn cost_text(c: Option<f64>) -> String {
    c.map_or("?".into(), |c| format!("{c:.6}"))
}

fn verdict(r: &CaseResult) -> String {
    match (r.runs, r.passed) {
        (1, true) => "pass".into(),
        (1, false) => "FAIL".into(),
        (n, true) => format!("pass {n}/{n}"),
        (n, false) => format!("FAIL {}/{n}", r.passes),
    }
}

/// The table: case, pass/fail, why, tokens (in/out), cost, latency; then a total line.
pub fn table(results: &[CaseResult], currency: &str) -> String {
    let w = results
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<w$}  {:<10}  {:>7}  {:>6}  {:>12}  {:>8}  why",
        "case",
        "result",
        "in tok",
        "out",
        format!("cost {currency}"),
        "ms"
    );
    for r in results {
        let _ = writeln!(
            out,
            "{:<w$}  {:<10}  {:>7}  {:>6}  {:>12}  {:>8}  {}",
            r.name,
            verdict(r),
            r.input_tokens,
            r.output_tokens,
            cost_text(r.cost),
            r.latency_ms,
            r.reason
        );
    }
    let failed = results.iter().filter(|r| !r.passed).count();
    let _ = writeln!(
        out,
        "{} cases: {} passed, {failed} failed",
        results.len(),
        results.len() - failed
    );
    out
}

fn delta_i(a: u64, b: u64) -> String {
    format!("{:+}", b as i64 - a as i64)
}

/// `--compare`: each case on both configurations, with the deltas (second minus first).
pub fn side_by_side(a: &[CaseResult], b: &[CaseResult], names: (&str, &str)) -> String {
    let w = a
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<w$}  {:<10}  {:<10}  {:>18}  {:>22}  {:>16}",
        "case", names.0, names.1, "in tokens (Δ)", "cost (Δ)", "ms (Δ)"
    );
    for (x, y) in a.iter().zip(b) {
        let cost = match (x.cost, y.cost) {
            (Some(p), Some(q)) => format!("{p:.6}→{q:.6} ({:+.6})", q - p),
            _ => format!("{}→{}", cost_text(x.cost), cost_text(y.cost)),
        };
        let _ = writeln!(
            out,
            "{:<w$}  {:<10}  {:<10}  {:>18}  {:>22}  {:>16}",
            x.name,
            verdict(x),
            verdict(y),
            format!(
                "{}→{} ({})",
                x.input_tokens,
                y.input_tokens,
                delta_i(x.input_tokens, y.input_tokens)
            ),
            cost,
            format!(
                "{}→{} ({})",
                x.latency_ms,
                y.latency_ms,
                delta_i(x.latency_ms, y.latency_ms)
            ),
        );
    }
    out
}

/// Where `--report` writes: `DIR/eval.json` and `DIR/eval.xml` for a folder (or a path
/// without an extension), else the path with `.json` and `.xml`.
pub fn paths(report: &Path) -> (PathBuf, PathBuf) {
    if report.is_dir() || report.extension().is_none() {
        (report.join("eval.json"), report.join("eval.xml"))
    } else {
        (report.with_extension("json"), report.with_extension("xml"))
    }
}

/// Writes both files.
pub fn write(report: &Path, results: &[CaseResult]) -> anyhow::Result<(PathBuf, PathBuf)> {
    let (json, xml) = paths(report);
    if let Some(dir) = json.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&json, serde_json::to_string_pretty(results)?)?;
    std::fs::write(&xml, junit(results)?)?;
    Ok((json, xml))
}

/// JUnit XML: one testsuite, one testcase per case (time in seconds), a `failure` with the
/// reason for a failed one.
pub fn junit(results: &[CaseResult]) -> anyhow::Result<Vec<u8>> {
    let mut w = Writer::new_with_indent(Cursor::new(Vec::new()), b' ', 2);
    w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    let failures = results.iter().filter(|r| !r.passed).count().to_string();
    let tests = results.len().to_string();
    let total: u64 = results.iter().map(|r| r.latency_ms).sum();
    let time = secs(total);
    let mut suite = BytesStart::new("testsuite");
    suite.push_attribute(("name", "herald eval"));
    suite.push_attribute(("tests", tests.as_str()));
    suite.push_attribute(("failures", failures.as_str()));
    suite.push_attribute(("time", time.as_str()));
    w.write_event(Event::Start(suite))?;
    for r in results {
        let mut case = BytesStart::new("testcase");
        let time = secs(r.latency_ms);
        case.push_attribute(("name", r.name.as_str()));
        case.push_attribute(("classname", r.file.as_str()));
        case.push_attribute(("time", time.as_str()));
        if r.passed {
            w.write_event(Event::Empty(case))?;
            continue;
        }
        w.write_event(Event::Start(case))?;
        let mut failure = BytesStart::new("failure");
        failure.push_attribute(("message", r.reason.as_str()));
        w.write_event(Event::Start(failure))?;
        let body = format!("{}\nreply: {}", r.reason, r.reply);
        w.write_event(Event::Text(BytesText::new(&body)))?;
        w.write_event(Event::End(BytesEnd::new("failure")))?;
        w.write_event(Event::End(BytesEnd::new("testcase")))?;
    }
    w.write_event(Event::End(BytesEnd::new("testsuite")))?;
    Ok(w.into_inner().into_inner())
}

fn secs(ms: u64) -> String {
    format!("{:.3}", ms as f64 / 1000.0)
}
