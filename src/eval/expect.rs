//! A case's expectations checked against what its run produced: each failed one becomes a
//! sentence an operator reads in the table ("reply lacks \"Paris\""), in the order the case
//! file lists them. The judge, which needs a model call, is `judge.rs`.

use regex::Regex;

use super::case::Expect;
use super::run::Observed;
use crate::domain::Amount;

/// An amount to the billionth, without trailing zeros: a cap of 0.0000001 and a cost just
/// over it must not both read as 0.00.
pub fn exact(a: Amount, currency: &str) -> String {
    let t = format!("{:.9}", a.units());
    let t = t.trim_end_matches('0').trim_end_matches('.');
    format!("{t} {currency}")
}

/// Why the run fails `expect`; empty when it passes.
pub fn failures(expect: &Expect, seen: &Observed, currency: &str) -> Vec<String> {
    let mut why = Vec::new();
    let reply = seen.reply();
    for w in &expect.reply_contains {
        if !reply.contains(w.as_str()) {
            why.push(format!("reply lacks {w:?}"));
        }
    }
    for w in &expect.reply_not_contains {
        if reply.contains(w.as_str()) {
            why.push(format!("reply contains {w:?}"));
        }
    }
    for re in &expect.reply_matches {
        // Checked at load: a pattern that does not compile never gets here.
        if !Regex::new(re).is_ok_and(|r| r.is_match(reply)) {
            why.push(format!("reply does not match /{re}/"));
        }
    }
    tools(expect, seen, &mut why);
    if let Some(want) = expect.approval_asked {
        let asked = !seen.asked.is_empty();
        match (want, asked) {
            (true, false) => why.push("no approval was asked".into()),
            (false, true) => why.push(format!("approval asked for {}", seen.asked.join(", "))),
            _ => {}
        }
    }
    for w in &expect.capsule_contains {
        match &seen.capsule {
            None => why.push(match &seen.capsule_status {
                Some(status) => format!("no handoff capsule was written (build {status})"),
                None => "no handoff capsule was written".into(),
            }),
            Some(c) if !c.contains(w.as_str()) => why.push(format!("capsule lacks {w:?}")),
            Some(_) => {}
        }
    }
    limits(expect, seen, currency, &mut why);
    why
}

fn tools(expect: &Expect, seen: &Observed, why: &mut Vec<String>) {
    for t in &expect.tool_called {
        let named: Vec<_> = seen.calls.iter().filter(|c| c.name == t.name()).collect();
        if named.is_empty() {
            why.push(format!("tool {} was not called", t.name()));
            continue;
        }
        if let Some(re) = t.arguments() {
            let fits = Regex::new(re).is_ok_and(|r| named.iter().any(|c| r.is_match(&c.arguments)));
            if !fits {
                let args: Vec<&str> = named.iter().map(|c| c.arguments.as_str()).collect();
                why.push(format!(
                    "tool {} was called with {}, not matching /{re}/",
                    t.name(),
                    args.join(" and ")
                ));
            }
        }
    }
    if expect.no_tool == Some(true) && !seen.calls.is_empty() {
        let names: Vec<&str> = seen.calls.iter().map(|c| c.name.as_str()).collect();
        why.push(format!("tools were called: {}", names.join(", ")));
    }
}

fn limits(expect: &Expect, seen: &Observed, currency: &str, why: &mut Vec<String>) {
    if let Some(max) = expect.max_input_tokens {
        let n = seen.input_tokens();
        if n > max {
            why.push(format!("{n} input tokens > {max}"));
        }
    }
    if let Some(max) = expect.max_cost {
        match seen.cost() {
            None => why.push("cost unknown (the model has no price in [budget] prices)".into()),
            Some(c) if c > crate::config::to_nanos(max) => why.push(format!(
                "cost {} > {}",
                exact(Amount(c), currency),
                exact(Amount(crate::config::to_nanos(max)), currency)
            )),
            Some(_) => {}
        }
    }
    if let Some(max) = expect.max_latency_ms {
        let ms = seen.latency_ms();
        if ms > max {
            why.push(format!("{ms} ms > {max} ms"));
        }
    }
}
