//! Approval contracts: a request is opened once per call (a retry finds it), answered once,
//! expires only past its deadline, starts running once, keeps its result, and a turn that
//! ended without its answer closes it.

use std::sync::Arc;

use herald::domain::LaneKey;
use herald::store::{ApprovalStatus, NewApproval, Store};

fn new(id: &str, lane: &str, inbox: i64, index: i64, hash: &str, deadline: i64) -> NewApproval {
    NewApproval {
        id: id.into(),
        lane: LaneKey::new(lane),
        inbox_id: inbox,
        call_index: index,
        call_hash: hash.into(),
        tool: "shop__delete_order".into(),
        arguments: r#"{"id": 7}"#.into(),
        person: "telegram:1".into(),
        platform: "telegram".into(),
        chat_id: "1".into(),
        thread_id: None,
        deadline,
        now: 1_000,
    }
}

pub async fn approval_lifecycle(store: Arc<dyn Store>) {
    let s = &*store;
    let first = s
        .approval_open(&new("a1", "telegram:1", 10, 0, "h", 5_000))
        .await
        .unwrap();
    assert_eq!(
        (first.id.as_str(), first.status),
        ("a1", ApprovalStatus::Pending)
    );
    // A retry of the same turn opens nothing new: it finds the first request.
    let again = s
        .approval_open(&new("a2", "telegram:1", 10, 0, "h", 9_000))
        .await
        .unwrap();
    assert_eq!((again.id.as_str(), again.deadline), ("a1", 5_000));
    // Another call (other position or other arguments) is another request.
    let other = s
        .approval_open(&new("b1", "telegram:1", 10, 0, "other", 5_000))
        .await
        .unwrap();
    assert_eq!(other.id, "b1");

    assert_eq!(
        s.approval_prompted("a1", "777").await.unwrap(),
        Some(ApprovalStatus::Pending)
    );
    assert_eq!(s.approval_prompted("nope", "1").await.unwrap(), None);
    let pending = s
        .approvals_pending(Some(&LaneKey::new("telegram:1")))
        .await
        .unwrap();
    assert_eq!(pending.len(), 2);
    assert_eq!(pending[0].prompt_message_id.as_deref(), Some("777"));
    assert!(s
        .approvals_pending(Some(&LaneKey::new("telegram:2")))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(s.approvals_pending(None).await.unwrap().len(), 2);

    // Not yet expired; answered once; the second answer loses.
    assert!(!s.approval_expire("a1", 4_999).await.unwrap());
    assert!(s
        .approval_answer("a1", true, "telegram:1", 2_000)
        .await
        .unwrap());
    assert!(!s
        .approval_answer("a1", false, "telegram:1", 2_001)
        .await
        .unwrap());
    let a1 = s.approval_get("a1").await.unwrap().unwrap();
    assert_eq!(a1.status, ApprovalStatus::Approved);
    assert_eq!(a1.decided_by.as_deref(), Some("telegram:1"));
    // Runs once, keeps its result.
    assert!(s.approval_start("a1").await.unwrap());
    assert!(!s.approval_start("a1").await.unwrap());
    s.approval_finish("a1", "deleted order 7").await.unwrap();
    let a1 = s.approval_get("a1").await.unwrap().unwrap();
    assert_eq!(a1.status, ApprovalStatus::Done);
    assert_eq!(a1.result.as_deref(), Some("deleted order 7"));

    // Past its deadline an answer is refused and the request expires.
    assert!(!s
        .approval_answer("b1", true, "telegram:1", 5_000)
        .await
        .unwrap());
    assert!(s.approval_expire("b1", 5_000).await.unwrap());
    assert_eq!(
        s.approval_get("b1").await.unwrap().unwrap().status,
        ApprovalStatus::Expired
    );
    assert!(s.approval_get("nope").await.unwrap().is_none());

    // A stopped turn closes what it left open, and only that.
    s.approval_open(&new("c1", "telegram:1", 11, 0, "h", 50_000))
        .await
        .unwrap();
    s.approval_open(&new("d1", "telegram:1", 12, 0, "h", 50_000))
        .await
        .unwrap();
    let closed = s
        .approvals_abandon(&LaneKey::new("telegram:1"), 11, 6_000)
        .await
        .unwrap();
    assert_eq!(
        closed.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["c1"]
    );
    assert_eq!(
        s.approval_get("c1").await.unwrap().unwrap().status,
        ApprovalStatus::Expired
    );
    assert!(!s
        .approval_answer("c1", true, "telegram:1", 6_001)
        .await
        .unwrap());
    assert_eq!(
        s.approval_get("d1").await.unwrap().unwrap().status,
        ApprovalStatus::Pending
    );

    // A stop racing a question's send: whichever write comes second learns of the first, so
    // exactly one side closes the question. Stopped before the id is recorded: the stop
    // returns no id, and the recorder is told the request is closed.
    s.approval_open(&new("e1", "telegram:1", 13, 0, "h", 50_000))
        .await
        .unwrap();
    let closed = s
        .approvals_abandon(&LaneKey::new("telegram:1"), 13, 6_000)
        .await
        .unwrap();
    assert_eq!(closed.len(), 1);
    assert_eq!(closed[0].prompt_message_id, None);
    assert_eq!(closed[0].status, ApprovalStatus::Expired);
    assert_eq!(
        s.approval_prompted("e1", "901").await.unwrap(),
        Some(ApprovalStatus::Expired)
    );
    // Recorded first: the stop returns the id, so it closes the question itself.
    s.approval_open(&new("f1", "telegram:1", 14, 0, "h", 50_000))
        .await
        .unwrap();
    assert_eq!(
        s.approval_prompted("f1", "902").await.unwrap(),
        Some(ApprovalStatus::Pending)
    );
    let closed = s
        .approvals_abandon(&LaneKey::new("telegram:1"), 14, 6_000)
        .await
        .unwrap();
    assert_eq!(closed[0].prompt_message_id.as_deref(), Some("902"));
}
