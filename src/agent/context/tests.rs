//! The engine against a real SQLite store and a hand-driven clock.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use crate::store::{MigrationStore, SqliteStore};

/// A hand-set monotonic reading: a restart is a new process name.
struct TestClock(Mutex<Tick>);

impl TestClock {
    fn set(&self, process: &str, ms: i64) {
        *self.0.lock().unwrap() = Tick {
            process: process.into(),
            ms,
        };
    }
}

impl Clock for TestClock {
    fn tick(&self) -> Tick {
        self.0.lock().unwrap().clone()
    }
}

async fn open(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    let url = format!("sqlite://{}/t.db", dir.path().display());
    let s = SqliteStore::connect(&url, 2).await.unwrap();
    s.migrate().await.unwrap();
    Arc::new(s)
}

fn session(id: &str) -> Session {
    Session::new(id, "web:t".into(), 1, "You are a test.", "m")
}

/// Ten exchanges of about 500 tokens each: well over a 2,000-token window.
async fn seeded(store: &Arc<dyn Store>) -> (Lease, Session) {
    let lease = store
        .lease_acquire("web:t", "me", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    let s = session("s1");
    store.session_create(&lease, &s).await.unwrap();
    let mut rows = Vec::new();
    for i in 0..10 {
        rows.push(NewMessage::new(
            Role::User,
            format!("request {i} {}", "word ".repeat(400)),
        ));
        rows.push(NewMessage::new(Role::Assistant, format!("answer {i}")));
    }
    store
        .append_messages(&lease, &"s1".into(), &rows)
        .await
        .unwrap();
    (lease, s)
}

fn config() -> Config {
    let mut c = Config::default();
    c.context.tail_tokens = 300;
    c
}

#[tokio::test]
async fn blocked_for_five_minutes_then_one_probation_even_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let (lease, s) = seeded(&store).await;
    let tools = Tools::default();
    let clock = TestClock(Mutex::new(Tick {
        process: "first".into(),
        ms: 1_000,
    }));
    let tripped = ContextRow {
        compaction_strikes: 2,
        ..ContextRow::default()
    };
    store
        .context_set(&lease, &"s1".into(), &tripped)
        .await
        .unwrap();
    let live = |store: Arc<dyn Store>| async move {
        store.messages(&"s1".into(), true).await.unwrap().len()
    };
    let before = live(store.clone()).await;

    let cfg = config();
    let engine = ContextEngine::with_window(store.as_ref(), &cfg, 2_000, &clock);
    engine.prepare(&lease, &s, "next", &tools).await.unwrap();
    assert_eq!(
        live(store.clone()).await,
        before,
        "blocked: nothing compacted"
    );
    let row = store.context_get(&"s1".into()).await.unwrap().unwrap();
    assert_eq!(
        row.breaker_blocked_ms,
        Some(0),
        "armed at the first blocked check"
    );
    // Four minutes later in the same process.
    clock.set("first", 1_000 + 4 * 60_000);
    engine.prepare(&lease, &s, "next", &tools).await.unwrap();
    let row = store.context_get(&"s1".into()).await.unwrap().unwrap();
    assert_eq!(row.breaker_blocked_ms, Some(4 * 60_000));

    // A restart: a new store on the same file, a new process whose clock starts anywhere. The
    // four minutes are kept; the downtime is not counted.
    let store = open(&dir).await;
    clock.set("second", 50);
    let engine = ContextEngine::with_window(store.as_ref(), &cfg, 2_000, &clock);
    engine.prepare(&lease, &s, "next", &tools).await.unwrap();
    assert_eq!(
        live(store.clone()).await,
        before,
        "still blocked after the restart"
    );
    let row = store.context_get(&"s1".into()).await.unwrap().unwrap();
    assert_eq!(
        row.breaker_blocked_ms,
        Some(4 * 60_000),
        "a restart resets nothing"
    );

    clock.set("second", 50 + 60_000 - 1);
    engine.prepare(&lease, &s, "next", &tools).await.unwrap();
    assert_eq!(
        live(store.clone()).await,
        before,
        "still blocked a millisecond short"
    );

    clock.set("second", 50 + 60_000);
    let view = engine.prepare(&lease, &s, "next", &tools).await.unwrap();
    assert!(
        view.len() < before,
        "probation compacted: {} rows live",
        view.len()
    );
    assert!(plan::is_carrier(&view[2]), "head, then the carrier");
    let row = store.context_get(&"s1".into()).await.unwrap().unwrap();
    assert_eq!(row.anchor_fingerprint.as_deref(), Some(PENDING));
    assert_eq!(row.breaker_blocked_ms, None);

    // The probation pass worked: the next reading is under the threshold.
    let msgs = [
        NewMessage::new(Role::User, "next"),
        NewMessage::new(Role::Assistant, "ok"),
    ];
    let ids = store
        .append_messages(&lease, &"s1".into(), &msgs)
        .await
        .unwrap();
    engine
        .after_turn(&lease, &"s1".into(), &msgs, &ids, &[900])
        .await;
    let row = store.context_get(&"s1".into()).await.unwrap().unwrap();
    assert_eq!(row.compaction_strikes, 0);
    assert_eq!(row.prompt_tokens_anchor, Some(900));
}

#[tokio::test]
async fn anchor_counts_only_what_follows_its_boundary_and_an_edit_invalidates_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let lease = store
        .lease_acquire("web:t", "me", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    let s = session("s1");
    store.session_create(&lease, &s).await.unwrap();
    let msgs = [
        NewMessage::new(Role::User, "hello"),
        NewMessage::new(Role::Assistant, "hi there"),
    ];
    let ids = store
        .append_messages(&lease, &"s1".into(), &msgs)
        .await
        .unwrap();
    let cfg = config();
    let engine = ContextEngine::with_window(store.as_ref(), &cfg, 32_000, &SystemClock);
    engine
        .after_turn(&lease, &"s1".into(), &msgs, &ids, &[5_000, 7_000])
        .await;
    let row = store.context_get(&"s1".into()).await.unwrap().unwrap();
    assert_eq!(
        row.prompt_tokens_anchor,
        Some(7_000),
        "the last reading anchors"
    );

    let tools = Tools::default();
    let view = engine.view(store.messages(&"s1".into(), true).await.unwrap());
    // Anchor + the answer after the boundary ("hi there": 2 + 4) + "abcd" (1 + 4).
    assert_eq!(
        engine.projected(&s, &tools, &view, "abcd", &row),
        7_000 + 6 + 5
    );

    // The boundary message edited (as replayed): the anchor no longer applies.
    let mut edited = view.clone();
    edited[0].api_content = Some("hello, edited".into());
    let unanchored = engine.projected(&s, &tools, &edited, "abcd", &row);
    assert!(
        unanchored < 100,
        "falls back to a plain estimate: {unanchored}"
    );
}

#[tokio::test]
async fn a_turns_spilled_tool_result_was_billed_as_a_preview_and_the_anchor_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let lease = store
        .lease_acquire("web:t", "me", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    store.session_create(&lease, &session("s1")).await.unwrap();
    let mut call = NewMessage::new(Role::Assistant, "");
    call.tool_calls = vec![ToolCall {
        id: "c1".into(),
        name: "shell".into(),
        arguments: "{}".into(),
    }];
    let mut result = NewMessage::new(Role::Tool, "z".repeat(40_000));
    result.tool_call_id = Some("c1".into());
    let msgs = [
        NewMessage::new(Role::User, "run it"),
        call,
        result,
        NewMessage::new(Role::Assistant, "done"),
    ];
    let ids = store
        .append_messages(&lease, &"s1".into(), &msgs)
        .await
        .unwrap();
    let cfg = config();
    let engine = ContextEngine::with_window(store.as_ref(), &cfg, 32_000, &SystemClock);
    engine
        .after_turn(&lease, &"s1".into(), &msgs, &ids, &[200, 1_300])
        .await;
    // The second request already carried a preview (about 1,100 tokens), not the 10,000
    // tokens of the whole result: the anchor moves only by the preview's changed wording.
    let row = store.context_get(&"s1".into()).await.unwrap().unwrap();
    let anchor = row.prompt_tokens_anchor.unwrap();
    assert!((1_250..=1_300).contains(&anchor), "{anchor}");
    let view = engine.view(store.messages(&"s1".into(), true).await.unwrap());
    assert!(view[2]
        .wire_content()
        .starts_with("[Large tool result: 40000 characters"));
    assert_eq!(
        view[2].content.len(),
        40_000,
        "the row keeps the whole result"
    );
}

#[test]
fn a_fingerprint_names_its_message_id() {
    let fp = fingerprint(42, Role::User, "hello", None, &[]);
    assert_eq!(fingerprint_id(&fp), Some(42));
    assert_eq!(fingerprint_id("not a fingerprint"), None);
    assert_eq!(fingerprint_id("mx:0123"), None);
}
