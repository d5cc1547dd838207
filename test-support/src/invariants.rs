//! The invariants of Herald's pure rules that take outside input, written once for both
//! drivers: the property tests in `tests/it/fuzz_props.rs` (stable, every `cargo test`) and the
//! cargo-fuzz targets in `fuzz/` (which take this crate without its `fakes` feature). Each check takes the input
//! and the rule's output and says what is wrong, so either driver reports it in its own way.
//!
//! It depends on herald and std only (the fuzz workspace has no proptest), and it must stay a
//! checker: no herald behaviour is reimplemented here beyond what an invariant needs to state.

use herald::adapters::split::Measure;
use herald::agent::compaction::{project, ProjMessage};
use herald::domain::{LaneKey, MessageEvent, MAX_LANE_KEY_LEN};
use herald::handoff::{is_handoff_word, is_wrapup_command, trim_marker};

/// What a broken invariant looks like to a driver.
pub type Verdict = Result<(), String>;

fn ensure(ok: bool, what: impl FnOnce() -> String) -> Verdict {
    if ok {
        Ok(())
    } else {
        Err(what())
    }
}

/// The characters a clean lane key may hold.
pub fn is_lane_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')
}

/// A lane key is bounded and clean whatever the raw id.
pub fn check_clean_lane(key: &LaneKey) -> Verdict {
    let s = key.as_str();
    let n = s.chars().count();
    ensure(n <= MAX_LANE_KEY_LEN, || format!("lane key of {n} chars"))?;
    ensure(s.chars().all(is_lane_char), || {
        format!("unclean lane key {s:?}")
    })
}

/// `LaneKey::new(raw)`: clean, a short clean id kept as it is, any other id ends in `-` and a
/// 20-hex-digit hash (so ids that clean alike, `café` and `caf?`, stay apart), and a clean key
/// parses to itself.
pub fn check_lane_key(raw: &str) -> Verdict {
    let key = LaneKey::new(raw);
    check_clean_lane(&key)?;
    let s = key.as_str();
    if raw.chars().count() <= MAX_LANE_KEY_LEN && raw.chars().all(is_lane_char) {
        ensure(s == raw, || format!("clean key {raw:?} changed to {s:?}"))?;
    } else {
        let tail = s.len().checked_sub(21).map(|i| &s[i..]).unwrap_or("");
        ensure(
            tail.starts_with('-') && tail[1..].chars().all(|c| c.is_ascii_hexdigit()),
            || format!("changed key {raw:?} became {s:?} without a hash suffix"),
        )?;
    }
    let reparsed = LaneKey::parse(s);
    ensure(reparsed.as_str() == s, || {
        format!("clean key {s:?} parses to {:?}", reparsed.as_str())
    })
}

/// The triggers accept only the bare words: `handoff` (any case and dressing of the three
/// spellings) and `/wrapup` without arguments, optionally addressed.
pub fn check_handoff_trigger(text: &str, bot: Option<&str>) -> Verdict {
    if is_handoff_word(text) {
        let letters: String = text
            .chars()
            .filter(|c| c.is_alphabetic())
            .flat_map(char::to_lowercase)
            .collect();
        ensure(letters == "handoff", || format!("handoff word in {text:?}"))?;
    }
    if is_wrapup_command(text, bot) {
        let t = text.trim();
        ensure(
            t.get(..7)
                .is_some_and(|p| p.eq_ignore_ascii_case("/wrapup")),
            || format!("/wrapup accepted in {text:?}"),
        )?;
        ensure(!t.contains(char::is_whitespace), || {
            format!("arguments accepted: {text:?}")
        })?;
    }
    Ok(())
}

/// `trim_capsule(text, cap)` gave `out`: the text itself when it fits, else within the cap and
/// a head + marker + tail of the text.
pub fn check_capsule_trim(text: &str, cap: usize, out: &str) -> Verdict {
    if text.chars().count() <= cap {
        return ensure(out == text, || "a text within the cap was changed".into());
    }
    let n = out.chars().count();
    ensure(n <= cap, || format!("trimmed to {n} chars > cap {cap}"))?;
    ensure(middle_cut_of(text, out), || {
        "not a head + marker + tail of the input".into()
    })
}

/// True when `out` is a bare head cut of `text`, or head + trim marker + tail with the head a
/// prefix, the tail a suffix and the marker counting exactly the characters between them.
pub fn middle_cut_of(text: &str, out: &str) -> bool {
    if text.starts_with(out) {
        return true;
    }
    let total = text.chars().count();
    out.match_indices("\n\n[… ").any(|(i, _)| {
        let head = &out[..i];
        let digits: String = out[i + "\n\n[… ".len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let Ok(removed) = digits.parse::<usize>() else {
            return false;
        };
        let marker = trim_marker(removed);
        let Some(tail) = out[i..].strip_prefix(marker.as_str()) else {
            return false;
        };
        text.starts_with(head)
            && text.ends_with(tail)
            && head.chars().count() + removed + tail.chars().count() == total
    })
}

/// `split_message(text, limit, measure)` gave `chunks`: every chunk within the limit and not
/// blank; and, when the text has no code fence (the splitter closes and reopens fences, which
/// adds text), the chunks are the text in order with only whitespace between them.
pub fn check_split(text: &str, limit: usize, measure: Measure, chunks: &[String]) -> Verdict {
    for c in chunks {
        let len = measure.len(c);
        ensure(len <= limit, || format!("chunk of {len} > {limit}"))?;
        ensure(!c.trim().is_empty(), || "whitespace-only chunk".into())?;
    }
    if text.contains('`') {
        return Ok(());
    }
    let mut pos = 0;
    for c in chunks {
        let Some(at) = text[pos..].find(c.as_str()) else {
            return Err(format!("chunk {c:?} not found in order"));
        };
        ensure(text[pos..pos + at].trim().is_empty(), || {
            format!("content dropped before {c:?}")
        })?;
        pos += at + c.len();
    }
    ensure(text[pos..].trim().is_empty(), || {
        "content dropped at the end".into()
    })
}

/// The compaction projection: the same input gives the same bytes, within the budget.
pub fn check_projection(msgs: &[ProjMessage], previous: Option<&str>, budget: usize) -> Verdict {
    let a = project(msgs, previous, budget);
    let b = project(msgs, previous, budget);
    ensure(a == b, || "the projection is not deterministic".into())?;
    let n = a.chars().count();
    ensure(n <= budget, || {
        format!("projection of {n} chars > budget {budget}")
    })
}

/// An event taken into the inbox: on a clean lane, and unchanged by the inbox's JSON round
/// trip.
pub fn check_event_round_trip(ev: &MessageEvent) -> Verdict {
    check_clean_lane(&ev.lane())?;
    let stored = serde_json::to_vec(ev).map_err(|e| format!("an event does not serialize: {e}"))?;
    let back: MessageEvent = serde_json::from_slice(&stored)
        .map_err(|e| format!("a stored event does not read: {e}"))?;
    ensure(*ev == back, || {
        "the inbox round trip changed the event".into()
    })
}
