//! Contracts for sessions, transcripts, turns and search: what the agent loop replays, what a
//! finished turn lands in one piece, and what session_search can and cannot find.

use std::sync::Arc;

use herald::domain::{LaneKey, Role, SessionId, ToolCall};
use herald::store::{
    InboxAttempt, InboxStatus, NewMessage, SearchScope, Store, StoreError, TurnCommit,
};

use super::{event, insert, open_lane, reply, session};

pub async fn sessions(store: Arc<dyn Store>) {
    let lane = LaneKey::new("web:s");
    assert!(store.session_current(&lane).await.unwrap().is_none());
    let l = open_lane(&store, lane.as_str(), "s-1").await;
    let cur = store
        .session_current(&lane)
        .await
        .unwrap()
        .expect("open session");
    assert_eq!(cur.id, "s-1");
    assert_eq!(cur.system_prompt, "You are Herald.");
    assert!(cur.ended_at.is_none());

    // One open session per lane.
    let second = store
        .session_create(&l, &session("s-2", lane.as_str()))
        .await;
    assert!(second.is_err(), "second open session: {second:?}");
    assert!(store.session_get(&"s-2".into()).await.unwrap().is_none());

    store
        .session_close(&l, &"s-1".into(), "handoff")
        .await
        .unwrap();
    assert!(store.session_current(&lane).await.unwrap().is_none());
    let closed = store.session_get(&"s-1".into()).await.unwrap().unwrap();
    assert_eq!(closed.end_reason.as_deref(), Some("handoff"));
    assert!(closed.ended_at.is_some());

    let mut next = session("s-2", lane.as_str());
    next.parent_id = Some("s-1".into());
    next.started_at = closed.started_at + 1;
    store.session_create(&l, &next).await.unwrap();
    assert_eq!(
        store
            .session_current(&lane)
            .await
            .unwrap()
            .unwrap()
            .parent_id
            .as_deref(),
        Some("s-1")
    );

    // Another lane's session is listed only without a lane filter.
    let other = super::lease(&store, "web:t", "w", std::time::Duration::from_secs(60)).await;
    store
        .session_create(&other, &session("t-1", "web:t"))
        .await
        .unwrap();
    let ids = |v: Vec<herald::store::Session>| v.into_iter().map(|s| s.id).collect::<Vec<_>>();
    assert_eq!(
        ids(store.sessions_list(Some(&lane), 10).await.unwrap()),
        ["s-2", "s-1"]
    );
    assert_eq!(store.sessions_list(None, 10).await.unwrap().len(), 3);
    assert_eq!(store.sessions_list(None, 1).await.unwrap().len(), 1);
}

pub async fn messages_round_trip(store: Arc<dyn Store>) {
    let l = open_lane(&store, "web:m", "s-m").await;
    let mut user = NewMessage::new(Role::User, "what is the weather?");
    user.api_content = Some("what is the weather?\n\n[context: capsule]".to_string());
    let mut call = NewMessage::new(Role::Assistant, "");
    call.tool_calls = vec![
        ToolCall {
            id: "call_1".to_string(),
            name: "weather".to_string(),
            arguments: r#"{"city":"Zürich","days":[1,2]}"#.to_string(),
        },
        ToolCall {
            id: "call_2".to_string(),
            name: "clock".to_string(),
            arguments: "{}".to_string(),
        },
    ];
    let mut result = NewMessage::new(Role::Tool, "12°C, \"cloudy\"");
    result.tool_call_id = Some("call_1".to_string());
    result.tool_name = Some("weather".to_string());
    let answer = NewMessage::new(Role::Assistant, "12 degrees and cloudy.");

    let first = store
        .append_messages(&l, &"s-m".into(), &[user.clone(), call.clone()])
        .await
        .unwrap();
    let second = store
        .append_messages(&l, &"s-m".into(), &[result.clone(), answer.clone()])
        .await
        .unwrap();
    let all_ids: Vec<i64> = first.iter().chain(&second).copied().collect();
    assert!(all_ids.windows(2).all(|w| w[0] < w[1]), "ids {all_ids:?}");

    let got = store.messages(&"s-m".into(), true).await.unwrap();
    assert_eq!(got.iter().map(|m| m.id).collect::<Vec<_>>(), all_ids);
    for (stored, sent) in got.iter().zip([&user, &call, &result, &answer]) {
        assert_eq!(stored.session_id, "s-m");
        assert_eq!(stored.role, sent.role);
        assert_eq!(stored.content, sent.content);
        assert_eq!(stored.api_content, sent.api_content);
        assert_eq!(stored.tool_calls, sent.tool_calls);
        assert_eq!(stored.tool_call_id, sent.tool_call_id);
        assert_eq!(stored.tool_name, sent.tool_name);
        assert!(stored.active && !stored.compacted);
    }
    assert_eq!(
        got[0].wire_content(),
        "what is the weather?\n\n[context: capsule]"
    );
    assert_eq!(got[3].wire_content(), "12 degrees and cloudy.");
    assert!(store
        .messages(&"no-such-session".into(), false)
        .await
        .unwrap()
        .is_empty());
}

/// Compaction hides rows from the model but keeps them; retraction hides them from both.
pub async fn compaction_flags(store: Arc<dyn Store>) {
    let l = open_lane(&store, "web:c", "s-c").await;
    let texts = ["one", "two", "three", "four"];
    let msgs: Vec<_> = texts
        .iter()
        .map(|t| NewMessage::new(Role::User, *t))
        .collect();
    let ids = store
        .append_messages(&l, &"s-c".into(), &msgs)
        .await
        .unwrap();

    let projection = [
        NewMessage::new(Role::User, "[#1] one [#2] two"),
        NewMessage::new(Role::User, "three"),
    ];
    let new_ids = store
        .compact(&l, &"s-c".into(), &ids[..3], &projection)
        .await
        .unwrap();
    assert_eq!(new_ids.len(), 2);
    assert!(new_ids[0] > ids[3]);

    let live = store.messages(&"s-c".into(), true).await.unwrap();
    let live_view: Vec<_> = live.iter().map(|m| (m.id, m.content.as_str())).collect();
    assert_eq!(
        live_view,
        [
            (ids[3], "four"),
            (new_ids[0], "[#1] one [#2] two"),
            (new_ids[1], "three")
        ]
    );
    let all = store.messages(&"s-c".into(), false).await.unwrap();
    assert_eq!(all.len(), 6);
    let flags: Vec<_> = all.iter().map(|m| (m.active, m.compacted)).collect();
    assert_eq!(
        flags,
        [
            (false, true),
            (false, true),
            (false, true),
            (true, false),
            (true, false),
            (true, false)
        ]
    );

    // A stale view (a row that is no longer live) aborts the whole compaction.
    let stale = store
        .compact(
            &l,
            &"s-c".into(),
            &[ids[3], ids[0]],
            &[NewMessage::new(Role::User, "x")],
        )
        .await;
    assert!(matches!(stale, Err(StoreError::NotFound(_))), "{stale:?}");
    assert_eq!(store.messages(&"s-c".into(), true).await.unwrap().len(), 3);
    assert_eq!(store.messages(&"s-c".into(), false).await.unwrap().len(), 6);

    store
        .messages_retract(&l, &"s-c".into(), &[ids[3]])
        .await
        .unwrap();
    let retracted = store.messages(&"s-c".into(), false).await.unwrap();
    let row = retracted.iter().find(|m| m.id == ids[3]).unwrap();
    assert_eq!((row.active, row.compacted), (false, false));
    assert_eq!(store.messages(&"s-c".into(), true).await.unwrap().len(), 2);
}

pub async fn turn_commit(store: Arc<dyn Store>) {
    let lane = "web:tc";
    let l = open_lane(&store, lane, "s-tc").await;
    let inbox_id = insert(&store, &event("tc", "hi there")).await;
    // A correction that joined the turn, and another lane's row the commit must not touch.
    let joined = insert(&store, &event("tc", "and the other one")).await;
    let foreign = insert(&store, &event("tc-other", "not yours")).await;
    let turn_id = store
        .turn_begin(&l, &"s-tc".into(), Some(InboxAttempt::first(inbox_id)))
        .await
        .unwrap();
    let commit = TurnCommit {
        turn_id,
        session_id: "s-tc".into(),
        messages: vec![
            NewMessage::new(Role::User, "hi there"),
            NewMessage::new(Role::Assistant, "hello! part one"),
            NewMessage::new(Role::Tool, "ignored for the reply id"),
        ],
        outbox: vec![
            reply(lane, "tc:1:0", 0, Some(inbox_id)),
            reply(lane, "tc:1:1", 1, Some(inbox_id)),
        ],
        inbox_id: Some(inbox_id),
        steered: vec![joined, foreign],
        inbox_status: InboxStatus::Done,
        note: Some("ok".to_string()),
        close_session: None,
        enqueue: Vec::new(),
        billed: Default::default(),
        cost: None,
    };
    let done = store.turn_commit(&l, &commit).await.unwrap();
    assert_eq!(done.message_ids.len(), 3);

    let msgs = store.messages(&"s-tc".into(), true).await.unwrap();
    assert_eq!(
        msgs.iter().map(|m| m.id).collect::<Vec<_>>(),
        done.message_ids
    );
    let out = store.outbox_for_inbox(inbox_id).await.unwrap();
    let keys: Vec<_> = out
        .iter()
        .map(|o| (o.idem_key.as_str(), o.chunk_index))
        .collect();
    assert_eq!(keys, [("tc:1:0", 0), ("tc:1:1", 1)]);
    let row = store.inbox_get(inbox_id).await.unwrap().unwrap();
    assert_eq!(row.status, InboxStatus::Done);
    assert_eq!(row.session_id.as_deref(), Some("s-tc"));
    assert_eq!(row.reply_message_id, Some(done.message_ids[1]));
    assert_eq!(row.note.as_deref(), Some("ok"));
    let j = store.inbox_get(joined).await.unwrap().unwrap();
    assert_eq!(
        (j.status, j.reply_message_id),
        (InboxStatus::Done, row.reply_message_id),
        "the joined row is answered by the same reply"
    );
    let f = store.inbox_get(foreign).await.unwrap().unwrap();
    assert_eq!(
        f.status,
        InboxStatus::Pending,
        "another lane's row is left alone"
    );
    let lane_key = LaneKey::new(lane);
    assert!(store.inbox_pending(&lane_key, 10).await.unwrap().is_empty());
    let turns = store.turns(&lane_key, 10).await.unwrap();
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0].id, turn_id);
    assert_eq!(turns[0].status, "done");
    assert_eq!(
        (turns[0].holder.as_str(), turns[0].token),
        ("worker-a", l.token)
    );
    assert!(turns[0].ended_at.is_some());

    // A re-run of the same turn cannot queue a second copy of a chunk.
    let again = TurnCommit {
        messages: vec![],
        ..commit
    };
    store.turn_commit(&l, &again).await.unwrap();
    assert_eq!(store.outbox_for_inbox(inbox_id).await.unwrap().len(), 2);
    assert_eq!(store.outbox_counts().await.unwrap().pending, 2);

    // Follow-up events land with the commit, once, and the session can close with it.
    let mut mirror = event("tc-target", "");
    mirror.platform_message_id = "control:mirror:tc:1".into();
    mirror.origin = herald::domain::Origin::Control(herald::domain::Control::Mirror {
        label: "brief".into(),
        text: "sent".into(),
    });
    let closing = TurnCommit {
        messages: vec![],
        close_session: Some("cron_fire".into()),
        enqueue: vec![mirror.clone()],
        ..again
    };
    store.turn_commit(&l, &closing).await.unwrap();
    store.turn_commit(&l, &closing).await.unwrap();
    let target = mirror.lane();
    let pending = store.inbox_pending(&target, 10).await.unwrap();
    assert_eq!(pending.len(), 1, "the enqueued event is written once");
    assert_eq!(pending[0].event.platform_message_id, "control:mirror:tc:1");
    let s = store.session_get(&"s-tc".into()).await.unwrap().unwrap();
    assert_eq!(s.end_reason.as_deref(), Some("cron_fire"));
    assert!(s.ended_at.is_some());
}

async fn seed_search(store: &Arc<dyn Store>) -> (Vec<i64>, Vec<i64>) {
    let a = open_lane(store, "web:sa", "s-a").await;
    let b = open_lane(store, "web:sb", "s-b").await;
    let msg = |t: &str| NewMessage::new(Role::User, t);
    let a_ids = store
        .append_messages(
            &a,
            &"s-a".into(),
            &[
                msg("the zebra crossing is blue"),
                msg("nothing here"),
                msg("another zebra appears"),
                msg("a retracted zebra secret"),
            ],
        )
        .await
        .unwrap();
    let b_ids = store
        .append_messages(
            &b,
            &"s-b".into(),
            &[msg("zebra in session b"), msg("quokka")],
        )
        .await
        .unwrap();
    store
        .compact(&a, &"s-a".into(), &[a_ids[0]], &[])
        .await
        .unwrap();
    store
        .messages_retract(&a, &"s-a".into(), &[a_ids[3]])
        .await
        .unwrap();
    store
        .compact(&b, &"s-b".into(), &[b_ids[1]], &[])
        .await
        .unwrap();
    (a_ids, b_ids)
}

pub async fn search(store: Arc<dyn Store>) {
    let (a_ids, b_ids) = seed_search(&store).await;

    // One hit per session, the newest one, newest session first; the retracted row (a_ids[3])
    // is newer than the hit in s-a but must never be returned.
    let hits = store
        .search(SearchScope::AllLanes, "zebra", &[], 10)
        .await
        .unwrap();
    let got: Vec<_> = hits
        .iter()
        .map(|h| (h.session_id.as_str(), h.message_id))
        .collect();
    assert_eq!(got, [("s-b", b_ids[0]), ("s-a", a_ids[2])]);
    assert!(
        hits[0].snippet.contains("zebra"),
        "snippet {:?}",
        hits[0].snippet
    );
    assert_eq!(hits[0].role, Role::User);
    assert_eq!(
        store
            .search(SearchScope::AllLanes, "zebra", &[], 1)
            .await
            .unwrap()
            .len(),
        1
    );

    // Compacted rows stay findable.
    let crossing = store
        .search(SearchScope::AllLanes, "crossing", &[], 10)
        .await
        .unwrap();
    assert_eq!(crossing.len(), 1);
    assert_eq!(crossing[0].message_id, a_ids[0]);
    let quokka = store
        .search(SearchScope::AllLanes, "quokka", &[], 10)
        .await
        .unwrap();
    assert_eq!(quokka.len(), 1);
    assert_eq!(quokka[0].message_id, b_ids[1]);
    assert!(store
        .search(SearchScope::AllLanes, "secret", &[], 10)
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .search(SearchScope::AllLanes, "platypus", &[], 10)
        .await
        .unwrap()
        .is_empty());

    // A chatty recent session does not crowd an older one out of a discovery search.
    let c = open_lane(&store, "web:sc", "s-c").await;
    let chatter: Vec<_> = (0..40)
        .map(|i| NewMessage::new(Role::Assistant, format!("zebra chatter {i}")))
        .collect();
    let c_ids = store
        .append_messages(&c, &"s-c".into(), &chatter)
        .await
        .unwrap();
    let hits = store
        .search(SearchScope::AllLanes, "zebra", &[], 3)
        .await
        .unwrap();
    let got: Vec<_> = hits
        .iter()
        .map(|h| (h.session_id.as_str(), h.message_id))
        .collect();
    assert_eq!(
        got,
        [("s-c", c_ids[39]), ("s-b", b_ids[0]), ("s-a", a_ids[2])]
    );
    assert_eq!(hits[0].role, Role::Assistant);

    // A lane-scoped search (the agent's tool) sees only that lane's sessions: s-c's chatter and
    // s-b's newer zebra are invisible from web:sa, and a lane with no match finds nothing.
    let lane_a = LaneKey::new("web:sa");
    let hits = store
        .search(SearchScope::Lane(&lane_a), "zebra", &[], 10)
        .await
        .unwrap();
    let got: Vec<_> = hits
        .iter()
        .map(|h| (h.session_id.as_str(), h.message_id, h.lane.as_str()))
        .collect();
    assert_eq!(got, [("s-a", a_ids[2], "web:sa")]);
    let nobody = LaneKey::new("web:nobody");
    assert!(store
        .search(SearchScope::Lane(&nobody), "zebra", &[], 10)
        .await
        .unwrap()
        .is_empty());
}

/// A role filter picks each session's newest hit among the named roles, however many newer
/// hits of other roles lie in between (more than one batch of the walk here).
pub async fn search_roles(store: Arc<dyn Store>) {
    let r = open_lane(&store, "web:sr", "s-r").await;
    let r_ids = store
        .append_messages(
            &r,
            &"s-r".into(),
            &[
                NewMessage::new(Role::User, "walrus question"),
                NewMessage::new(Role::Assistant, "walrus answer"),
                NewMessage::new(Role::Tool, "walrus output"),
            ],
        )
        .await
        .unwrap();
    let t = open_lane(&store, "web:sr2", "s-r2").await;
    let chatter: Vec<_> = (0..300)
        .map(|i| NewMessage::new(Role::Tool, format!("walrus log line {i}")))
        .collect();
    let t_ids = store
        .append_messages(&t, &"s-r2".into(), &chatter)
        .await
        .unwrap();
    let found = |roles: &'static [Role], limit| {
        let store = store.clone();
        async move {
            store
                .search(SearchScope::AllLanes, "walrus", roles, limit)
                .await
                .unwrap()
                .into_iter()
                .map(|h| (h.session_id, h.message_id, h.role))
                .collect::<Vec<_>>()
        }
    };
    let s = |id: &str| SessionId::from(id);
    assert_eq!(
        found(&[], 10).await,
        [
            (s("s-r2"), t_ids[299], Role::Tool),
            (s("s-r"), r_ids[2], Role::Tool)
        ]
    );
    assert_eq!(
        found(&[Role::User], 10).await,
        [(s("s-r"), r_ids[0], Role::User)]
    );
    assert_eq!(
        found(&[Role::User, Role::Assistant], 1).await,
        [(s("s-r"), r_ids[1], Role::Assistant)]
    );
    assert!(found(&[Role::System], 10).await.is_empty());
    let hit = &store
        .search(SearchScope::AllLanes, "walrus", &[Role::User], 1)
        .await
        .unwrap()[0];
    assert!(hit.snippet.contains("[walrus]"), "{:?}", hit.snippet);
}

/// Whatever a person types into session_search, the store answers instead of failing.
pub async fn search_odd_queries(store: Arc<dyn Store>) {
    let l = open_lane(&store, "web:q", "s-q").await;
    store
        .append_messages(
            &l,
            &"s-q".into(),
            &[NewMessage::new(Role::User, "foo and bar, with a star")],
        )
        .await
        .unwrap();
    for q in [
        "\"foo AND (",
        "*",
        "-",
        "foo*",
        "-foo",
        "NOT",
        "a OR",
        "\"",
        "(",
        ")",
        "foo:bar",
        "^foo",
        "NEAR(foo bar)",
        "'; DROP TABLE messages; --",
        "",
        "   ",
    ] {
        if let Err(e) = store.search(SearchScope::AllLanes, q, &[], 10).await {
            panic!("search {q:?} failed: {e}");
        }
    }
    // Plain words still match whatever punctuation surrounds them.
    for q in ["\"foo\" bar!", "\"foo AND (", "foo -", "(star)"] {
        let hits = store
            .search(SearchScope::AllLanes, q, &[], 10)
            .await
            .unwrap();
        assert_eq!(hits.len(), 1, "{q:?}: {hits:?}");
    }
    assert_eq!(store.messages(&"s-q".into(), false).await.unwrap().len(), 1);
}

pub async fn messages_around(store: Arc<dyn Store>) {
    let l = open_lane(&store, "web:ar", "s-ar").await;
    let msgs: Vec<_> = (0..9)
        .map(|i| NewMessage::new(Role::User, format!("m{i}")))
        .collect();
    let ids = store
        .append_messages(&l, &"s-ar".into(), &msgs)
        .await
        .unwrap();
    // Another session's rows interleave by id but never show up.
    let other = open_lane(&store, "web:ar2", "s-ar2").await;
    store
        .append_messages(
            &other,
            &"s-ar2".into(),
            &[NewMessage::new(Role::User, "other")],
        )
        .await
        .unwrap();
    store
        .append_messages(&l, &"s-ar".into(), &msgs[..1])
        .await
        .unwrap();

    let ids_of = |v: Vec<herald::store::StoredMessage>| v.iter().map(|m| m.id).collect::<Vec<_>>();
    let (ar, ar2) = (LaneKey::new("web:ar"), LaneKey::new("web:ar2"));
    // Asked from another lane, the session answers like one that does not exist.
    assert!(store
        .messages_around(&ar2, &"s-ar".into(), ids[4], 2)
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .messages_around(&ar, &"s-missing".into(), ids[4], 2)
        .await
        .unwrap()
        .is_empty());
    let around = store
        .messages_around(&ar, &"s-ar".into(), ids[4], 2)
        .await
        .unwrap();
    assert_eq!(ids_of(around), ids[2..=6]);
    let start = store
        .messages_around(&ar, &"s-ar".into(), ids[0], 2)
        .await
        .unwrap();
    assert_eq!(ids_of(start), ids[0..=2]);

    // Compacted rows are part of the neighbourhood (search finds them); retracted ones are not.
    store
        .compact(&l, &"s-ar".into(), &[ids[3]], &[])
        .await
        .unwrap();
    store
        .messages_retract(&l, &"s-ar".into(), &[ids[5]])
        .await
        .unwrap();
    let around = store
        .messages_around(&ar, &"s-ar".into(), ids[4], 2)
        .await
        .unwrap();
    assert_eq!(ids_of(around), [ids[2], ids[3], ids[4], ids[6], ids[7]]);
}

/// A turn's start stores the inbox row's attempt count (the poison-message guard) in its own
/// transaction: retries of one start never count twice, and the count never goes down.
pub async fn turn_begin_counts_attempts(store: Arc<dyn Store>) {
    let l = open_lane(&store, "web:ta", "s-ta").await;
    let inbox_id = insert(&store, &event("ta", "count me")).await;
    let first = store
        .turn_begin(&l, &"s-ta".into(), Some(InboxAttempt::first(inbox_id)))
        .await
        .unwrap();
    let attempts = |store: Arc<dyn Store>| async move {
        store.inbox_get(inbox_id).await.unwrap().unwrap().attempts
    };
    assert_eq!(
        attempts(store.clone()).await,
        1,
        "a turn's start counts its attempt"
    );
    // A retry of the same start (after a refused commit) stores the same count; a later start
    // raises it, and a stale lower number never lowers it.
    let second = store
        .turn_begin(&l, &"s-ta".into(), Some(InboxAttempt::first(inbox_id)))
        .await
        .unwrap();
    assert_ne!(first, second);
    assert_eq!(attempts(store.clone()).await, 1);
    let raised = InboxAttempt {
        id: inbox_id,
        attempt: 3,
    };
    store
        .turn_begin(&l, &"s-ta".into(), Some(raised))
        .await
        .unwrap();
    assert_eq!(attempts(store.clone()).await, 3);
    store
        .turn_begin(&l, &"s-ta".into(), Some(InboxAttempt::first(inbox_id)))
        .await
        .unwrap();
    assert_eq!(attempts(store.clone()).await, 3);
}

/// `hel*` is a prefix search on both backends (FTS5 `"hel"*`, Postgres `'hel':*`); a word
/// without the star stays a whole word.
pub async fn search_prefix(store: Arc<dyn Store>) {
    let l = open_lane(&store, "web:px", "s-px").await;
    store
        .append_messages(
            &l,
            &"s-px".into(),
            &[NewMessage::new(Role::User, "hello wonderful world")],
        )
        .await
        .unwrap();
    for (q, want) in [
        ("hel*", 1),
        ("hel", 0),
        ("wor* hel*", 1),
        ("hello won*", 1),
        ("help*", 0),
        ("hel**", 1),
    ] {
        let hits = store
            .search(SearchScope::AllLanes, q, &[], 10)
            .await
            .unwrap_or_else(|e| panic!("search {q:?} failed: {e}"));
        assert_eq!(hits.len(), want, "{q:?}: {hits:?}");
    }
}
