//! The text rule (issue 25): outside text holding U+0000 saves on every backend and reads back
//! with U+FFFD in its place — the same on SQLite, which could store the NUL, and on Postgres,
//! which refuses it ("invalid byte sequence for encoding UTF8: 0x00"). One write per path
//! that stores a person's, a model's, a tool's or a file's text.

use std::sync::Arc;
use std::time::Duration;

use herald::cron::JobSpec;
use herald::domain::{LaneKey, Role, ToolCall};
use herald::store::{
    InboxAttempt, InboxStatus, NewApproval, NewCapsule, NewFire, NewMessage, PairingAsk,
    SearchScope, Store, TurnCommit,
};

use super::{event, insert, open_lane, reply, session};

const DIRTY: &str = "poison\u{0}byte";
const CLEAN: &str = "poison\u{FFFD}byte";

fn approval(id: &str, index: i64) -> NewApproval {
    NewApproval {
        id: id.into(),
        lane: LaneKey::new("web:nul"),
        inbox_id: 1,
        call_index: index,
        call_hash: format!("h{index}"),
        tool: "shop\u{0}tool".into(),
        arguments: format!(r#"{{"a":"{DIRTY}"}}"#),
        person: "web:alice".into(),
        platform: "web".into(),
        chat_id: "nul".into(),
        thread_id: None,
        deadline: i64::MAX,
        now: 1,
    }
}

pub async fn nul_is_replaced_on_every_path(store: Arc<dyn Store>) {
    let lane = "web:nul";
    // A session whose prompt came from a file holding a NUL.
    let l = super::lease(&store, lane, "w", Duration::from_secs(60)).await;
    let mut s = session("s-nul", lane);
    s.system_prompt = format!("memory: {DIRTY}");
    store
        .session_create(&l, &s)
        .await
        .expect("session with NUL");
    let got = store.session_get(&"s-nul".into()).await.unwrap().unwrap();
    assert_eq!(got.system_prompt, format!("memory: {CLEAN}"));

    // The inbox event (JSON), then a turn: person, model, tool traffic, reply chunk, note.
    let inbox_id = insert(&store, &event("nul", DIRTY)).await;
    let row = store.inbox_get(inbox_id).await.unwrap().unwrap();
    assert_eq!(row.event.text, CLEAN, "the event's text");
    let turn_id = store
        .turn_begin(&l, &"s-nul".into(), Some(InboxAttempt::first(inbox_id)))
        .await
        .unwrap();
    let mut user = NewMessage::new(Role::User, DIRTY);
    user.api_content = Some(format!("{DIRTY} [context]"));
    let mut call = NewMessage::new(Role::Assistant, DIRTY);
    call.tool_calls = vec![ToolCall {
        id: "call\u{0}1".into(),
        name: "shout".into(),
        arguments: format!(r#"{{"text":"{}"}}"#, "a\\u0000b"),
    }];
    let mut result = NewMessage::new(Role::Tool, format!("tool said {DIRTY}"));
    result.tool_call_id = Some("call\u{0}1".into());
    result.tool_name = Some("sh\u{0}out".into());
    let mut chunk = reply(lane, "nul:1:0", 0, Some(inbox_id));
    chunk.text = DIRTY.into();
    let commit = TurnCommit {
        turn_id,
        session_id: "s-nul".into(),
        messages: vec![user, call, result, NewMessage::new(Role::Assistant, DIRTY)],
        outbox: vec![chunk],
        inbox_id: Some(inbox_id),
        steered: Vec::new(),
        inbox_status: InboxStatus::Done,
        note: Some(DIRTY.into()),
        close_session: None,
        enqueue: vec![event("nul-mirror", DIRTY)],
        billed: Default::default(),
        cost: None,
    };
    store
        .turn_commit(&l, &commit)
        .await
        .expect("a turn with NULs commits");
    let msgs = store.messages(&"s-nul".into(), true).await.unwrap();
    assert_eq!(msgs[0].content, CLEAN);
    assert_eq!(
        msgs[0].api_content.as_deref(),
        Some(format!("{CLEAN} [context]").as_str())
    );
    assert_eq!(msgs[1].content, CLEAN);
    assert_eq!(msgs[1].tool_calls[0].id, "call\u{FFFD}1");
    assert_eq!(msgs[2].content, format!("tool said {CLEAN}"));
    assert_eq!(msgs[2].tool_call_id.as_deref(), Some("call\u{FFFD}1"));
    assert_eq!(msgs[2].tool_name.as_deref(), Some("sh\u{FFFD}out"));
    assert_eq!(msgs[3].content, CLEAN);
    let row = store.inbox_get(inbox_id).await.unwrap().unwrap();
    assert_eq!(row.note.as_deref(), Some(CLEAN));
    let out = store.outbox_for_inbox(inbox_id).await.unwrap();
    assert_eq!(out[0].text, CLEAN);
    // A search for text with a NUL runs (and finds the cleaned row).
    let hits = store
        .search(SearchScope::Lane(&LaneKey::new(lane)), DIRTY, &[], 10)
        .await
        .expect("a query holding a NUL");
    assert!(!hits.is_empty(), "the cleaned text is found");

    // An outbox error, a skip note, a give-up note.
    let claimed = store
        .outbox_claim("nul", &["web".to_string()], 10, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    store
        .outbox_mark_retry(out[0].id, "nul", DIRTY, 0, false)
        .await
        .unwrap();
    let sent = store.outbox_for_inbox(inbox_id).await.unwrap();
    assert_eq!(sent[0].last_error.as_deref(), Some(CLEAN));
    let skipped = insert(&store, &event("nul", "skip me")).await;
    store.inbox_skip(skipped, DIRTY, &[]).await.unwrap();
    let failed = insert(&store, &event("nul", "fail me")).await;
    store.inbox_give_up(failed, DIRTY, &[]).await.unwrap();
    for id in [skipped, failed] {
        let row = store.inbox_get(id).await.unwrap().unwrap();
        assert_eq!(row.note.as_deref(), Some(CLEAN));
    }
    assert_eq!(
        store.inbox_get(failed).await.unwrap().unwrap().status,
        InboxStatus::Dead
    );

    // Capsule, kv, session end reason.
    store
        .capsule_put(
            &NewCapsule {
                lane: lane.into(),
                session_id: "s-nul".into(),
                status: herald::domain::BuildStatus::Ok,
                text: DIRTY.into(),
                message_count: 4,
                confidential: false,
                created_at: 1,
                agent: "default".into(),
            },
            false,
        )
        .await
        .unwrap();
    let cap = store.capsule_latest(&LaneKey::new(lane)).await.unwrap();
    assert_eq!(cap.unwrap().text, CLEAN);
    store.kv_set("nul", DIRTY).await.unwrap();
    assert_eq!(store.kv_get("nul").await.unwrap().as_deref(), Some(CLEAN));
    store
        .session_close(&l, &"s-nul".into(), DIRTY)
        .await
        .unwrap();
    let closed = store.session_get(&"s-nul".into()).await.unwrap().unwrap();
    assert_eq!(closed.end_reason.as_deref(), Some(CLEAN));

    // Approvals: the call's arguments, its result, and a kept result of an unasked call.
    let a = store.approval_open(&approval("ap-1", 0)).await.unwrap();
    assert_eq!(a.tool, "shop\u{FFFD}tool");
    assert_eq!(a.arguments, format!(r#"{{"a":"{CLEAN}"}}"#));
    assert!(store
        .approval_answer("ap-1", true, "web:alice", 2)
        .await
        .unwrap());
    assert!(store.approval_start("ap-1").await.unwrap());
    store.approval_finish("ap-1", DIRTY).await.unwrap();
    assert_eq!(
        store
            .approval_get("ap-1")
            .await
            .unwrap()
            .unwrap()
            .result
            .as_deref(),
        Some(CLEAN)
    );
    store
        .tool_result_keep(&approval("kept-1", 1), DIRTY)
        .await
        .unwrap();
    assert_eq!(
        store
            .tool_result_recall(&approval("any", 1))
            .await
            .unwrap()
            .as_deref(),
        Some(CLEAN)
    );

    // Cron: a chat job's prompt (JSON) and a fire's note.
    let spec = JobSpec {
        name: "nul-job".into(),
        schedule: "every 1h".into(),
        prompt: DIRTY.into(),
        deliver: vec![lane.into()],
        timezone: None,
        catch_up: None,
        enabled: true,
        budget: None,
    };
    assert!(store
        .cron_job_add_owned(&spec, &LaneKey::new(lane), "web:alice", 1)
        .await
        .unwrap());
    let job = store.cron_job_get("nul-job").await.unwrap().unwrap();
    assert_eq!(job.spec.prompt, CLEAN);
    store
        .cron_fire_skip(&NewFire {
            job: "nul-job".into(),
            scheduled_at: 10,
            manual: false,
            holder: "h".into(),
            claim_until: 0,
            missed_count: 0,
            note: Some(DIRTY.into()),
        })
        .await
        .unwrap();
    let fires = store.cron_fires(Some("nul-job"), 10).await.unwrap();
    assert_eq!(fires[0].note.as_deref(), Some(CLEAN));

    // Pairing: the name a stranger gave their account.
    store
        .pairing_request(&PairingAsk {
            platform: "telegram",
            sender_id: "77",
            sender_name: DIRTY,
            chat_id: "77",
            new_code: "NULL0000",
            ttl_ms: 3_600_000,
            remind_every_ms: 3_600_000,
            max_pending: 10,
        })
        .await
        .unwrap();
    let pending = store.pairing_pending().await.unwrap();
    assert_eq!(pending[0].sender_name, CLEAN);
    let approved = store.pairing_approve("telegram", "NULL0000").await.unwrap();
    assert_eq!(approved.sender_name, CLEAN);
}

/// A kept result is found by its own call only, and the turn's commit removes it.
pub async fn kept_tool_results(store: Arc<dyn Store>) {
    let lane = "web:nul";
    let l = open_lane(&store, lane, "s-k").await;
    let inbox_id = insert(&store, &event("nul", "refund order 7")).await;
    let key = |index: i64, hash: &str| NewApproval {
        inbox_id,
        call_hash: hash.into(),
        ..approval(&uuid::Uuid::new_v4().to_string(), index)
    };
    assert_eq!(store.tool_result_recall(&key(0, "h")).await.unwrap(), None);
    store
        .tool_result_keep(&key(0, "h"), "refunded")
        .await
        .unwrap();
    // Kept once: a second keep of the same call changes nothing.
    store.tool_result_keep(&key(0, "h"), "again").await.unwrap();
    assert_eq!(
        store
            .tool_result_recall(&key(0, "h"))
            .await
            .unwrap()
            .as_deref(),
        Some("refunded")
    );
    // Another position, other arguments, another event: nothing kept for them.
    assert_eq!(store.tool_result_recall(&key(1, "h")).await.unwrap(), None);
    assert_eq!(store.tool_result_recall(&key(0, "x")).await.unwrap(), None);
    let other = NewApproval {
        inbox_id: inbox_id + 1000,
        ..key(0, "h")
    };
    assert_eq!(store.tool_result_recall(&other).await.unwrap(), None);
    // Kept results are not approvals anyone is waiting on.
    assert!(store.approvals_pending(None).await.unwrap().is_empty());

    let turn_id = store
        .turn_begin(&l, &"s-k".into(), Some(InboxAttempt::first(inbox_id)))
        .await
        .unwrap();
    let mut commit = TurnCommit::new(turn_id, &"s-k".into(), Some(inbox_id), InboxStatus::Done);
    commit.messages = vec![NewMessage::new(Role::User, "refund order 7")];
    store.turn_commit(&l, &commit).await.unwrap();
    assert_eq!(
        store.tool_result_recall(&key(0, "h")).await.unwrap(),
        None,
        "the transcript holds the result now"
    );
}
