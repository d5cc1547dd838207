//! Context compaction end to end: the real core, a fake model billing realistic prompt sizes,
//! a tiny context window, SQLite. What the model is sent after a compaction, what search still
//! finds, and a breaker that a restart cannot reset.

use std::collections::BTreeSet;

use herald::agent::compaction::{check_faithful, CARRIER_FOOTER, CARRIER_HEADER};
use herald::agent::context::breaker::PROBATION_AFTER_MS;
use herald::agent::context::plan::to_proj;
use herald::agent::context::spill::PAGE_CHARS;
use herald::agent::tools::{SessionSearch, Tool, ToolContext};
use herald::app::App;
use herald::config::Config;
use herald::domain::SessionId;
use herald::domain::{LaneKey, Role};
use herald::store::SearchScope;
use herald_test_support::fake_llm::{Billing, FakeLlm, Recorded, Step};
use herald_test_support::harness::{init, test_config, Client};
use serde_json::{json, Value};

fn small_window(llm: &FakeLlm, data: &tempfile::TempDir) -> Config {
    let mut c = test_config(llm, data);
    c.llm.context_window = Some(4_000);
    c.context.tail_tokens = 300;
    c
}

/// A long user message with facts the projection should carry and one unique word.
fn long_message(i: usize) -> String {
    let mut s = format!(
        "Step {i}: I ran `cargo test -p app{i}` in /srv/app/src/mod{i}.rs and it failed with \
         error[E0308] mismatched types; unique marker quokka{i}. "
    );
    while s.len() < 1_500 {
        s.push_str("The build log repeats the same warning about unused imports in the parser. ");
    }
    s
}

async fn session_of(app: &App, lane: &str) -> String {
    app.store
        .session_current(&LaneKey::new(lane))
        .await
        .unwrap()
        .expect("open session")
        .id
        .into_string()
}

/// `[#N]` ids cited in a text.
fn cited_ids(text: &str) -> BTreeSet<i64> {
    let mut out = BTreeSet::new();
    for part in text.split("[#").skip(1) {
        if let Some(end) = part.find(']') {
            if let Ok(n) = part[..end].parse() {
                out.insert(n);
            }
        }
    }
    out
}

#[tokio::test]
async fn compaction_sends_head_carrier_tail_and_keeps_the_originals_searchable() {
    init();
    let llm = FakeLlm::start().await;
    llm.set_billing(Billing::BySize);
    let data = tempfile::tempdir().unwrap();
    let app = App::start(small_window(&llm, &data)).await.unwrap();
    let client = Client::new(&app);
    let lane = "web:ctx";

    let (status, _) = client.chat(lane, "Goal: make the app build green.").await;
    assert_eq!(status, 200);
    let sid = session_of(&app, lane).await;
    let mut turns = 1;
    while !app
        .store
        .messages(&SessionId::from(&sid), false)
        .await
        .unwrap()
        .iter()
        .any(|m| m.compacted)
    {
        assert!(turns < 12, "no compaction after {turns} turns");
        let (status, body) = client.chat(lane, &long_message(turns)).await;
        assert_eq!(status, 200, "{body}");
        turns += 1;
    }
    // The turn that compacted was sent head + carrier + tail + the new message.
    let reqs = llm.requests();
    let last = reqs.last().unwrap().messages().clone();
    let contents: Vec<String> = last
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(contents[1], "Goal: make the app build green.", "head kept");
    assert!(contents[2].starts_with("reply to: Goal"), "head reply kept");
    assert!(
        contents[3].starts_with(CARRIER_HEADER),
        "carrier after the head: {}",
        contents[3]
    );
    assert_eq!(last[3]["role"], "user");
    assert_eq!(
        contents.last().unwrap(),
        &long_message(turns - 1),
        "new message last"
    );
    assert!(
        last.len() < 2 * turns + 1,
        "the middle is gone: {} messages",
        last.len()
    );
    let live = app
        .store
        .messages(&SessionId::from(&sid), true)
        .await
        .unwrap();
    assert_eq!(
        live.len(),
        last.len(),
        "live rows are what was sent, minus the system prompt, plus the reply"
    );

    // Every [#N] resolves to a compacted original of this session; the log quotes it.
    let carrier = &contents[3];
    let ids = cited_ids(carrier);
    assert!(!ids.is_empty(), "the carrier cites messages");
    let all = app
        .store
        .messages(&SessionId::from(&sid), false)
        .await
        .unwrap();
    for id in &ids {
        let around = app
            .store
            .messages_around(&LaneKey::new(lane), &SessionId::from(&sid), *id, 0)
            .await
            .unwrap();
        let m = around
            .iter()
            .find(|m| m.id == *id)
            .unwrap_or_else(|| panic!("[#{id}] not found"));
        assert!(m.compacted && !m.active, "[#{id}] is a compacted original");
    }
    let flipped: Vec<_> = all.iter().filter(|m| m.compacted).map(to_proj).collect();
    let body = carrier.split_once("\n\n").unwrap().1;
    let projection = &body[..body.find(CARRIER_FOOTER).unwrap()];
    check_faithful(projection, &flipped).expect("session log quotes its sources");
    assert!(
        carrier.contains("cargo test -p app1"),
        "the first command is carried"
    );

    // A flipped row is found by store.search and by the session_search tool.
    let hits = app
        .store
        .search(SearchScope::AllLanes, "quokka1", &[], 5)
        .await
        .unwrap();
    let hit = hits
        .iter()
        .find(|h| h.session_id == sid)
        .expect("search finds quokka1");
    let row = app
        .store
        .message_get(hit.message_id)
        .await
        .unwrap()
        .unwrap();
    assert!(row.compacted && row.content.contains("quokka1"));
    let tool = SessionSearch {
        store: app.store.clone(),
    };
    let ctx = ToolContext {
        lane: LaneKey::new(lane),
        person: "web:tester".into(),
        session_id: sid.clone().into(),
        turn_id: None,
        inbox_id: None,
        call_index: 0,
        turn_files: Vec::new(),
        agent: herald::config::DEFAULT_AGENT.to_string(),
    };
    let found = tool.call(&ctx, r#"{"query": "quokka1"}"#).await.unwrap();
    assert!(
        found.contains(&format!("\"message_id\":{}", hit.message_id)),
        "{found}"
    );
    let scroll = tool
        .call(
            &ctx,
            &format!(
                r#"{{"session_id": "{sid}", "around_message_id": {}}}"#,
                hit.message_id
            ),
        )
        .await
        .unwrap();
    assert!(scroll.contains("quokka1"), "{scroll}");

    // The next turn is judged and re-anchored: one effective compaction, no strikes.
    let (status, _) = client.chat(lane, "short follow-up").await;
    assert_eq!(status, 200);
    let state = app
        .store
        .context_get(&SessionId::from(&sid))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(state.compaction_strikes, 0);
    assert!(state.prompt_tokens_anchor.is_some());
    assert_ne!(state.anchor_fingerprint.as_deref(), Some("pending"));
    app.shutdown().await;
}

#[tokio::test]
async fn breaker_trips_after_two_ineffective_passes_and_survives_a_restart() {
    init();
    let llm = FakeLlm::start().await;
    // The provider keeps billing over the threshold (3,000 of 4,000), whatever we send.
    llm.set_billing(Billing::Fixed(3_500));
    let data = tempfile::tempdir().unwrap();
    let app = App::start(small_window(&llm, &data)).await.unwrap();
    let client = Client::new(&app);
    let lane = "web:breaker";
    let carriers = |all: &[herald::store::StoredMessage]| {
        all.iter()
            .filter(|m| {
                m.api_content
                    .as_deref()
                    .is_some_and(|a| a.starts_with(CARRIER_HEADER))
            })
            .count()
    };
    for i in 0..6 {
        let (status, _) = client.chat(lane, &long_message(i)).await;
        assert_eq!(status, 200);
    }
    let sid = session_of(&app, lane).await;
    let state = app
        .store
        .context_get(&SessionId::from(&sid))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(state.compaction_strikes, 2, "two ineffective passes");
    let blocked = state
        .breaker_blocked_ms
        .expect("the sixth turn was blocked");
    let all = app
        .store
        .messages(&SessionId::from(&sid), false)
        .await
        .unwrap();
    assert_eq!(carriers(&all), 2);
    app.shutdown().await;

    // A new process on the same data: still tripped, still blocking.
    let app = App::start(small_window(&llm, &data)).await.unwrap();
    let client = Client::new(&app);
    for i in 6..8 {
        let (status, _) = client.chat(lane, &long_message(i)).await;
        assert_eq!(status, 200);
    }
    let after = app
        .store
        .context_get(&SessionId::from(&sid))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after.compaction_strikes, 2);
    let blocked_after = after.breaker_blocked_ms.expect("still blocking");
    assert!(
        (blocked..PROBATION_AFTER_MS).contains(&blocked_after),
        "the block kept what it had accumulated ({blocked} ms), now {blocked_after} ms"
    );
    assert_eq!(
        carriers(
            &app.store
                .messages(&SessionId::from(&sid), false)
                .await
                .unwrap()
        ),
        2,
        "no compaction while blocked"
    );
    app.shutdown().await;
}

/// A large tool result reaches the very next request of its own turn as a preview (not whole);
/// the model can page it in within that turn, and the stored row keeps it whole for later
/// turns, whose preview names the stored message.
#[tokio::test]
async fn a_large_tool_result_is_a_preview_from_the_next_request_of_its_turn() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let app = App::start(test_config(&llm, &data)).await.unwrap();
    let client = Client::new(&app);
    let lane = "web:spill";
    for i in 0..3 {
        let note = format!("note {i}: {}", "walrus tusk ".repeat(350));
        assert_eq!(client.chat(lane, &note).await.0, 200);
    }
    let sid = session_of(&app, lane).await;
    let first = app
        .store
        .messages(&SessionId::from(&sid), true)
        .await
        .unwrap()[0]
        .id;
    // The model reads the notes around the first one (a result of some 25,000 characters),
    // then pages that result in.
    let scroll = json!({"session_id": sid, "around_message_id": first});
    let page = json!({"session_id": sid, "around_message_id": -1, "offset": 0});
    llm.push(Step::ToolCall("session_search".into(), scroll.to_string()));
    llm.push(Step::ToolCall("session_search".into(), page.to_string()));
    llm.push(Step::Reply("three notes about walruses".into()));
    let before = llm.request_count();
    assert_eq!(client.chat(lane, "what did I note?").await.0, 200);
    let turn = llm.requests()[before..].to_vec();
    assert_eq!(turn.len(), 3, "scroll, page, answer");
    let last_content = |r: &Recorded| {
        let m = r.messages().last().expect("a message");
        assert_eq!(m["role"], "tool");
        m["content"].as_str().unwrap_or_default().to_string()
    };

    let preview = last_content(&turn[1]);
    assert!(
        preview.starts_with("[Large tool result: ")
            && preview.contains("around_message_id=-1, offset=0"),
        "the second request carries a preview: {}",
        &preview[..200.min(preview.len())]
    );
    assert!(preview.chars().count() < 5_000, "{}", preview.len());

    let paged: Value = serde_json::from_str(&last_content(&turn[2])).unwrap();
    let total = paged["total_chars"].as_u64().unwrap() as usize;
    assert!(total > 20_000, "{total}");
    assert_eq!(paged["next_offset"], PAGE_CHARS);

    // The row keeps the whole result; the page was its first PAGE_CHARS characters.
    let rows = app
        .store
        .messages(&SessionId::from(&sid), true)
        .await
        .unwrap();
    let stored = rows
        .iter()
        .find(|m| m.role == Role::Tool && m.content.chars().count() == total)
        .expect("the whole scroll result is stored");
    let head: String = stored.content.chars().take(PAGE_CHARS).collect();
    assert_eq!(paged["content"].as_str(), Some(head.as_str()));

    // The next turn's request shows the stored row's preview, pageable by its id.
    let before = llm.request_count();
    assert_eq!(client.chat(lane, "thanks").await.0, 200);
    let next = &llm.requests()[before];
    let named = format!("kept whole as message #{}", stored.id);
    assert!(next
        .messages()
        .iter()
        .any(|m| m["content"].as_str().is_some_and(|c| c.contains(&named))));
    app.shutdown().await;
}
