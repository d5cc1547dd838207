//! The conversation cases of the suite, written once over any [`Rig`]: a message answered
//! once, the crash loop, a long reply, streaming, approvals, a 429 and a stranger. Files and
//! handoff are in `cases_files.rs`. Each asserts what the person sees; where a platform cannot
//! do a thing, the case asserts what its [`Caps`] declare instead.

use std::path::Path;
use std::time::Duration;

use herald::adapters::split::split_message;
use herald_test_support::fake_llm::Step;
use herald_test_support::harness::{quiet, wait_for, wait_until};
use herald_test_support::promise::crash::{run_on, CrashSpec, PeopleSaw, Via};
use serde_json::json;

use super::{Rig, Seen, Who};

pub const WAIT: Duration = Duration::from_secs(30);

/// Waits until `who` sees at least `n` things, then until the store has nothing left to send
/// (a duplicate would have shown by then), and returns everything `who` sees.
pub async fn seen_settled<R: Rig>(rig: &R, who: Who, n: usize) -> Vec<Seen> {
    wait_for(&format!("{n} things seen by {who:?}"), WAIT, async || {
        let seen = rig.seen(who).await;
        (seen.len() >= n).then_some(())
    })
    .await;
    quiet(rig.app().store.as_ref()).await;
    rig.seen(who).await
}

pub fn texts(seen: &[Seen]) -> Vec<String> {
    seen.iter()
        .filter_map(|s| s.text())
        .map(str::to_string)
        .collect()
}

/// A plain answer (no Markdown, so every platform's formatting leaves it as it is) of `words`.
pub fn long_answer(words: usize) -> String {
    let words: Vec<String> = (0..words).map(|i| format!("word{i}")).collect();
    words.join(" ")
}

/// Case 1: One message, exactly one reply: the model's text.
pub async fn answered_once<R: Rig>() {
    let rig = R::start(|_| {}).await;
    rig.say(Who::Owner, "hello there").await;
    let seen = seen_settled(&rig, Who::Owner, 1).await;
    assert_eq!(seen, [Seen::Text("reply to: hello there".into())]);
    let asked: Vec<String> = rig.llm().requests().iter().map(|r| r.last_user()).collect();
    assert_eq!(asked, ["hello there"], "one model call, for the message");
    rig.stop().await;
}

/// Case 2: The real binary under load, SIGKILLed three times: 200 messages (20 lanes × 10), none
/// lost and none answered twice in the store; what the people saw agrees, and the only extra
/// copies they may see are the documented resend across a kill (a platform without an
/// idempotency key accepted a message just before the kill hit `mark_sent`).
pub async fn sigkills<R: Rig>() {
    let spec = CrashSpec {
        lanes: 20,
        min_per_lane: 10,
        kills: 3,
        life_ms: (800, 2000),
        model_jitter: Duration::from_millis(50),
        // Not read by `run_on`: the rig's side is the way in.
        via: Via::Web,
    };
    let outcome = run_on(&spec, R::crash_side().await).await;
    println!("{}", serde_json::to_string_pretty(&outcome.report).unwrap());
    let c = &outcome.census;
    c.assert_promise();
    assert!(c.client_messages >= 200, "{} messages", c.client_messages);
    assert_eq!(c.inbox_rows, c.client_messages, "retries deduplicated");
    if let Some(r) = &outcome.receipts {
        let report = serde_json::to_string_pretty(r).unwrap();
        assert!(
            r.promise_held(),
            "the people saw a broken promise: {report}"
        );
        assert_eq!(r.messages(), c.client_messages);
        assert_eq!(r.unanswered(), 0, "{report}");
        // A platform without an idempotency key may show a chunk again when a kill falls
        // between its acceptance and our record of it (each such resend straddles a kill:
        // `promise_held`). A lane has one chunk in flight at a time, so a kill can repeat at
        // most one per lane.
        let bound = spec.lanes * spec.kills;
        assert!(
            r.resends_across_a_kill() <= bound,
            "at most one per lane per kill ({bound}): {report}"
        );
    }
}

/// Case 3: A reply longer than the platform's limit arrives in pieces of at most the limit, cut
/// where the daemon's splitter cuts, which put back together are the reply.
pub async fn long_reply<R: Rig>() {
    let answer = long_answer(1500);
    let rig = R::start(|_| {}).await;
    rig.llm().push(Step::Reply(answer.clone()));
    rig.say(Who::Owner, "tell me everything").await;
    let pieces = texts(&seen_settled(&rig, Who::Owner, 1).await);
    let (limit, measure) = (R::caps().declared.max_text, R::caps().measure);
    match (limit != usize::MAX).then_some(limit) {
        Some(limit) => {
            assert!(
                answer.len() > 2 * limit,
                "the answer needs three pieces or more"
            );
            // Lengths first: a whole piece in a failure message is thousands of characters.
            let lens = |v: &[String]| v.iter().map(|p| measure.len(p)).collect::<Vec<_>>();
            let want = split_message(&answer, limit, measure);
            assert_eq!(
                lens(&pieces),
                lens(&want),
                "piece lengths at max_text {limit}"
            );
            assert!(pieces == want, "the pieces are not the splitter's");
            assert!(
                lens(&pieces).iter().all(|n| *n <= limit),
                "a piece over the limit"
            );
            assert!(pieces.join(" ") == answer, "something lost at the cuts");
        }
        // No limit: the reply is one message, whole.
        None => assert_eq!(pieces, [answer]),
    }
    rig.stop().await;
}

/// Case 4: With streaming on, a slow answer grows in place by edits and ends as the exact text;
/// a platform without edits gets it whole, in one message, never edited.
pub async fn streaming<R: Rig>() {
    let answer = long_answer(120);
    let rig = R::start(|c| {
        c.streaming.enabled = Some(true);
        c.streaming.edit_interval_ms = 300;
    })
    .await;
    rig.llm()
        .push(Step::stream(&answer, 20, Duration::from_millis(60)));
    rig.say(Who::Owner, "tell me a story").await;
    wait_until("the final text", WAIT, || async {
        texts(&rig.seen(Who::Owner).await) == [answer.clone()]
    })
    .await;
    quiet(rig.app().store.as_ref()).await;
    assert_eq!(texts(&rig.seen(Who::Owner).await), [answer]);
    if R::caps().declared.edits {
        assert!(rig.edits() >= 2, "grew in place: {} edits", rig.edits());
    } else {
        assert_eq!(rig.edits(), 0, "a platform without edits edits nothing");
    }
    rig.stop().await;
}

fn proposed(skills: &Path, name: &str) -> bool {
    skills.join(".proposed").join(name).exists()
}

/// Case 5: A tool that needs approval: someone else's press is refused and changes nothing (the
/// question stays open); the requester's press runs the tool once and the turn ends. On a
/// platform that cannot tell its people apart (the web), someone else is a caller without the
/// credential. On a platform without buttons the contract asks in the chat all the same, so
/// nobody can answer: after `approvals.timeout_secs` the call is denied and never made.
pub async fn approval<R: Rig>() {
    let skills = tempfile::tempdir().unwrap();
    let dir = skills.path().to_path_buf();
    let buttons = R::caps().declared.buttons || R::answers_in_words();
    let rig = R::start(|c| {
        c.agent.skills_dir = Some(dir);
        c.tools.require_approval = vec!["skill_manage".into()];
        if !buttons {
            c.approvals.timeout_secs = 2;
        }
    })
    .await;
    let args = json!({"action": "create", "name": "conftriage",
        "description": "Sort bug reports", "body": "1. Label it."});
    rig.llm()
        .push(Step::ToolCall("skill_manage".into(), args.to_string()));
    rig.say(Who::Owner, "make a triage skill").await;
    if !buttons {
        let seen = seen_settled(&rig, Who::Owner, 2).await;
        assert!(texts(&seen)[0].contains("skill_manage"), "asked: {seen:?}");
        let result = rig.llm().requests()[1].last_tool_result();
        assert_eq!(
            result,
            "denied: nobody answered within 2 seconds; the tool was not called"
        );
        assert!(!proposed(skills.path(), "conftriage"));
        rig.stop().await;
        return;
    }
    let question = rig.question().await;
    assert!(question.contains("skill_manage"), "{question}");

    let someone_else = if R::caps().people {
        Who::Other
    } else {
        Who::Stranger
    };
    let told_other = rig.press(someone_else, true).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !proposed(skills.path(), "conftriage"),
        "a refused press ran it"
    );
    assert_eq!(rig.llm().request_count(), 1, "the turn is still parked");

    // Still open: the requester's press is the one that counts.
    let told_owner = rig.press(Who::Owner, true).await;
    assert_ne!(told_other, told_owner, "the other person was refused");
    let seen = seen_settled(&rig, Who::Owner, 1).await;
    assert_eq!(texts(&seen), ["reply to: make a triage skill"]);
    assert!(
        proposed(skills.path(), "conftriage"),
        "the approved call ran"
    );
    let result = rig.llm().requests()[1].last_tool_result();
    assert!(
        result.contains("herald skills approve conftriage"),
        "{result}"
    );
    rig.stop().await;
}

/// Case 8: The platform answers the reply with 429 and `Retry-After: 1`: the reply goes out once,
/// no sooner than a second after the model answered. The web has no platform in between:
/// its answer is not held back at all.
pub async fn rate_limited<R: Rig>() {
    let rig = R::start(|_| {}).await;
    rig.refuse_next_send(1);
    rig.say(Who::Owner, "are you there").await;
    let seen = seen_settled(&rig, Who::Owner, 1).await;
    assert_eq!(seen, [Seen::Text("reply to: are you there".into())]);
    let model_done = rig.llm().requests()[0]
        .finished
        .expect("the model answered");
    let sends = rig.send_times();
    assert_eq!(sends.len(), 1, "one accepted send");
    let waited = sends[0] - model_done;
    if R::caps().rate_limits {
        assert!(waited >= Duration::from_secs(1), "waited only {waited:?}");
    } else {
        assert!(waited < Duration::from_secs(1), "held back {waited:?}");
    }
    rig.stop().await;
}

/// Case 9: Someone off the allowlist costs no model call and sees only Herald's refusal.
pub async fn stranger<R: Rig>() {
    let rig = R::start(|_| {}).await;
    rig.say(Who::Stranger, "let me in").await;
    let seen = seen_settled(&rig, Who::Stranger, 1).await;
    assert_eq!(rig.llm().request_count(), 0, "no model call");
    let said = texts(&seen);
    assert_eq!(said.len(), 1, "one refusal: {said:?}");
    assert!(!said[0].contains("let me in"), "{said:?}");
    assert!(rig.seen(Who::Owner).await.is_empty());
    rig.stop().await;
}
