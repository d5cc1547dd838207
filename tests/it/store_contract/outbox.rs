//! Contracts for the outbox (claims, lane order, sent and failed rows), key/value and the lane
//! overview: the guarantees behind "no reply sent twice, chunks arrive in order".

use std::sync::Arc;
use std::time::Duration;

use herald::domain::LaneKey;
use herald::store::clock::{Clock, ManualClock};
use herald::store::{now_ms, NewOutbox, OutboxKey, OutboxRow, ReplyKey, Store};

use super::{event, insert, open_lane, reply};

fn web() -> Vec<String> {
    vec!["web".to_string()]
}

const LONG: Duration = Duration::from_secs(60);
const SHORT: Duration = Duration::from_millis(150);

fn keys(rows: &[OutboxRow]) -> Vec<&str> {
    rows.iter().map(|r| r.idem_key.as_str()).collect()
}

async fn row(store: &Arc<dyn Store>, key: &str) -> OutboxRow {
    store
        .outbox_recent(100)
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.idem_key == key)
        .unwrap_or_else(|| panic!("outbox row {key} missing"))
}

pub async fn claim_and_expiry(store: Arc<dyn Store>, clock: Arc<ManualClock>) {
    store
        .outbox_enqueue(&[
            reply("web:o1", "o1", 0, None),
            reply("web:o2", "o2", 0, None),
            reply("web:o3", "o3", 0, None),
        ])
        .await
        .unwrap();

    let first = store.outbox_claim("s1", &web(), 2, SHORT).await.unwrap();
    assert_eq!(keys(&first), ["o1", "o2"]);
    assert!(first.iter().all(|r| r.status == "sending"));
    assert_eq!(
        keys(&store.outbox_claim("s2", &web(), 10, LONG).await.unwrap()),
        ["o3"]
    );
    assert!(store
        .outbox_claim("s3", &web(), 10, LONG)
        .await
        .unwrap()
        .is_empty());
    let counts = store.outbox_counts().await.unwrap();
    assert_eq!((counts.pending, counts.sending), (0, 3));

    // Only the asked-for platforms are claimed.
    store
        .outbox_enqueue(&[reply("telegram:9", "tg", 0, None)])
        .await
        .unwrap();
    assert!(store
        .outbox_claim("s3", &web(), 10, LONG)
        .await
        .unwrap()
        .is_empty());
    let tg = store
        .outbox_claim("s3", &["telegram".to_string()], 10, LONG)
        .await
        .unwrap();
    assert_eq!(keys(&tg), ["tg"]);
    assert_eq!(
        (tg[0].platform.as_str(), tg[0].chat_id.as_str()),
        ("telegram", "9")
    );

    // A sender that died holding a claim: its rows come back once the claim expires.
    clock.advance(Duration::from_millis(300));
    assert_eq!(
        keys(&store.outbox_claim("s4", &web(), 10, LONG).await.unwrap()),
        ["o1", "o2"]
    );

    // The first sender, back late, can neither put back nor fail the rows s4 now holds and
    // is sending: another claim would send them a second time.
    let o1 = row(&store, "o1").await;
    store.outbox_release(o1.id, "s1").await.unwrap();
    store
        .outbox_mark_retry(o1.id, "s1", "timeout (late)", clock.now_ms(), false)
        .await
        .unwrap();
    let o1 = row(&store, "o1").await;
    assert_eq!(
        (o1.status.as_str(), o1.attempts, o1.last_error.as_deref()),
        ("sending", 0, None)
    );
    assert!(store
        .outbox_claim("s6", &web(), 10, LONG)
        .await
        .unwrap()
        .is_empty());

    // Releasing puts a row back at once, without counting an attempt.
    let o3 = row(&store, "o3").await;
    store.outbox_release(o3.id, "s2").await.unwrap();
    let again = store.outbox_claim("s5", &web(), 10, LONG).await.unwrap();
    assert_eq!(keys(&again), ["o3"]);
    assert_eq!(again[0].attempts, 0);
}

/// A lane's later chunk waits for its earlier one; other lanes are not held up.
pub async fn lane_order(store: Arc<dyn Store>, clock: Arc<ManualClock>) {
    store
        .outbox_enqueue(&[
            reply("web:l", "l0", 0, None),
            reply("web:l", "l1", 1, None),
            reply("web:m", "m0", 0, None),
        ])
        .await
        .unwrap();
    let a = store.outbox_claim("a", &web(), 1, LONG).await.unwrap();
    assert_eq!(keys(&a), ["l0"]);
    // The sender counts the attempt before it sends.
    assert_eq!(store.outbox_start(a[0].id, "a").await.unwrap(), Some(1));
    // l0 is in flight: l1 must wait, m0 flows.
    assert_eq!(
        keys(&store.outbox_claim("b", &web(), 10, LONG).await.unwrap()),
        ["m0"]
    );

    store
        .outbox_mark_retry(
            a[0].id,
            "a",
            "429 too many requests",
            clock.now_ms() + 400,
            false,
        )
        .await
        .unwrap();
    let l0 = row(&store, "l0").await;
    assert_eq!(l0.status, "pending");
    assert_eq!(l0.attempts, 1);
    assert_eq!(l0.last_error.as_deref(), Some("429 too many requests"));
    // l0 waits for its retry time, so l1 still waits behind it.
    store
        .outbox_enqueue(&[reply("web:n", "n0", 0, None)])
        .await
        .unwrap();
    assert_eq!(
        keys(&store.outbox_claim("c", &web(), 10, LONG).await.unwrap()),
        ["n0"]
    );

    // Once l0 is due again, both go out in order.
    clock.advance(Duration::from_millis(500));
    let due = store.outbox_claim("d", &web(), 10, LONG).await.unwrap();
    assert_eq!(keys(&due), ["l0", "l1"]);
    assert_eq!(due[0].attempts, 1);
}

pub async fn sent_and_failed(store: Arc<dyn Store>, clock: Arc<ManualClock>) {
    let inbox_id = insert(&store, &event("sf", "hi")).await;
    store
        .outbox_enqueue(&[
            reply("web:sf", "sf0", 0, Some(inbox_id)),
            reply("web:sf", "sf1", 1, Some(inbox_id)),
            reply("web:sf", "sf2", 2, Some(inbox_id)),
        ])
        .await
        .unwrap();

    let c = store.outbox_claim("a", &web(), 1, SHORT).await.unwrap();
    assert_eq!(keys(&c), ["sf0"]);
    assert_eq!(store.outbox_start(c[0].id, "a").await.unwrap(), Some(1));
    store.outbox_mark_sent(c[0].id, "web-msg-1").await.unwrap();
    let sent = row(&store, "sf0").await;
    assert_eq!(sent.status, "sent");
    assert_eq!(sent.platform_message_id.as_deref(), Some("web-msg-1"));
    assert!(sent.sent_at.is_some());
    assert_eq!(sent.attempts, 1);

    // A sent row is never claimed again, not even after its claim would have expired, and a
    // late retry from a sender whose claim had lapsed does not bring it back.
    clock.advance(Duration::from_millis(300));
    store
        .outbox_mark_retry(sent.id, "a", "timeout (late)", clock.now_ms(), false)
        .await
        .unwrap();
    assert_eq!(row(&store, "sf0").await.status, "sent");
    let c = store.outbox_claim("b", &web(), 1, LONG).await.unwrap();
    assert_eq!(keys(&c), ["sf1"]);

    // Giving up fails the row for good and lets the rest of the lane go.
    store
        .outbox_mark_retry(c[0].id, "b", "403 bot was blocked", clock.now_ms(), true)
        .await
        .unwrap();
    let failed = row(&store, "sf1").await;
    assert_eq!(failed.status, "failed");
    assert_eq!(failed.last_error.as_deref(), Some("403 bot was blocked"));
    assert_eq!(
        keys(&store.outbox_claim("c", &web(), 10, LONG).await.unwrap()),
        ["sf2"]
    );
    assert!(store
        .outbox_claim("d", &web(), 10, LONG)
        .await
        .unwrap()
        .is_empty());

    let counts = store.outbox_counts().await.unwrap();
    assert_eq!(
        (counts.pending, counts.sending, counts.sent, counts.failed),
        (0, 1, 1, 1)
    );
    let for_inbox = store.outbox_for_inbox(inbox_id).await.unwrap();
    assert_eq!(keys(&for_inbox), ["sf0", "sf1", "sf2"]);
    assert_eq!(keys(&store.outbox_recent(2).await.unwrap()), ["sf2", "sf1"]);
}

/// The chunks of one answer, keyed the way the lanes key them.
fn answer(lane: &str, inbox_id: i64, chunks: usize) -> Vec<NewOutbox> {
    let reply = ReplyKey::answer(&LaneKey::parse(lane), inbox_id, "turn");
    (0..chunks)
        .map(|i| NewOutbox {
            key: OutboxKey::chunk(reply.clone(), i),
            ..reply_row(lane, i as i64)
        })
        .collect()
}

fn reply_row(lane: &str, chunk: i64) -> NewOutbox {
    reply(lane, "unused", chunk, None)
}

/// A chunk that failed for good stops the later chunks of its own reply, and only those, and
/// queues the notice in their place.
pub async fn fail_reply_stops_its_own_chunks(store: Arc<dyn Store>) {
    let lane = "web:fr";
    let mut rows = answer(lane, 1, 3);
    rows.extend(answer(lane, 2, 1));
    store.outbox_enqueue(&rows).await.unwrap();
    let claimed = store.outbox_claim("a", &web(), 1, LONG).await.unwrap();
    assert_eq!(keys(&claimed), ["web:fr:1:turn:0"]);
    let first = &claimed[0];
    let reply = first.reply().expect("a chunk of a reply");
    assert_eq!(reply.as_str(), "web:fr:1:turn");
    store
        .outbox_mark_retry(first.id, "a", "403", now_ms(), true)
        .await
        .unwrap();
    let notice = NewOutbox {
        key: OutboxKey::chunk(reply.notice(), 0),
        ..reply_row(lane, 0)
    };
    let stopped = store
        .outbox_fail_reply(first, &reply, Some(&notice))
        .await
        .unwrap();
    assert_eq!(stopped, 2);
    for key in ["web:fr:1:turn:1", "web:fr:1:turn:2"] {
        assert_eq!(row(&store, key).await.status, "failed", "{key}");
    }
    assert_eq!(row(&store, "web:fr:2:turn:0").await.status, "pending");
    let queued = row(&store, "web:fr:1:turn:notice:0").await;
    assert_eq!(queued.status, "pending");
    assert!(queued.reply().is_some_and(|r| r.is_notice()));
}

/// Two senders (two replicas) claim at the same moment: no row goes to both, and a lane's
/// second chunk never goes to one sender while the first is with the other.
pub async fn claim_race(store: Arc<dyn Store>) {
    for round in 0..super::race_rounds(50) {
        let lane = format!("web:race{round}");
        let (k0, k1) = (format!("r{round}c0"), format!("r{round}c1"));
        store
            .outbox_enqueue(&[reply(&lane, &k0, 0, None), reply(&lane, &k1, 1, None)])
            .await
            .unwrap();
        let claim = |holder: &'static str| {
            let s = store.clone();
            tokio::spawn(async move { s.outbox_claim(holder, &web(), 1, LONG).await })
        };
        let (t1, t2) = (claim("one"), claim("two"));
        let got1 = t1.await.unwrap().unwrap();
        let got2 = t2.await.unwrap().unwrap();
        let all: Vec<&str> = keys(&got1).into_iter().chain(keys(&got2)).collect();
        assert_eq!(
            all,
            [k0.as_str()],
            "round {round}: one={got1:?} two={got2:?}"
        );
        // Leave nothing claimable behind for the next round.
        let c0 = got1.iter().chain(&got2).next().unwrap().id;
        store.outbox_mark_sent(c0, "sent").await.unwrap();
        let rest = store.outbox_claim("three", &web(), 10, LONG).await.unwrap();
        assert_eq!(keys(&rest), [k1.as_str()], "round {round}");
        store.outbox_mark_sent(rest[0].id, "sent").await.unwrap();
    }
}

pub async fn kv_and_lanes_overview(store: Arc<dyn Store>, clock: Arc<ManualClock>) {
    assert_eq!(store.kv_get("telegram.offset").await.unwrap(), None);
    store.kv_set("telegram.offset", "41").await.unwrap();
    store.kv_set("other", "x").await.unwrap();
    assert_eq!(
        store.kv_get("telegram.offset").await.unwrap().as_deref(),
        Some("41")
    );
    store.kv_set("telegram.offset", "42").await.unwrap();
    assert_eq!(
        store.kv_get("telegram.offset").await.unwrap().as_deref(),
        Some("42")
    );
    assert_eq!(store.kv_get("other").await.unwrap().as_deref(), Some("x"));
    store.kv_delete("other").await.unwrap();
    assert_eq!(store.kv_get("other").await.unwrap(), None, "deleted");
    store.kv_delete("other").await.unwrap();
    assert_eq!(
        store.kv_get("telegram.offset").await.unwrap().as_deref(),
        Some("42"),
        "a delete touches its key only"
    );

    let x1 = insert(&store, &event("x", "x1")).await;
    insert(&store, &event("x", "x2")).await;
    insert(&store, &event("x", "x3")).await;
    store.inbox_skip(x1, "skipped", &[]).await.unwrap();
    let lease = open_lane(&store, "web:x", "s-x").await;
    // Lanes are listed by last activity: y arrives last.
    clock.advance(Duration::from_millis(5));
    insert(&store, &event("y", "y1")).await;

    let lanes = store.lanes_overview(10).await.unwrap();
    let view: Vec<_> = lanes
        .iter()
        .map(|l| {
            (
                l.lane.as_str(),
                l.pending,
                l.lease_holder.as_deref(),
                l.session_id.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        view,
        [
            ("web:y", 1, None, None),
            ("web:x", 2, Some(lease.holder.as_str()), Some("s-x"))
        ]
    );
    assert!(lanes[1].lease_expires_at.unwrap() > clock.now_ms());
    assert_eq!(store.lanes_overview(1).await.unwrap().len(), 1);
}

/// A crashed replica's claims come back as soon as its replica lease expires, long before the
/// claim's own TTL; a live replica's claims stay put.
pub async fn dead_replica_claims_return(store: Arc<dyn Store>, clock: Arc<ManualClock>) {
    store
        .outbox_enqueue(&[
            reply("web:d1", "d1-0", 0, None),
            reply("web:d1", "d1-1", 1, None),
            reply("web:d2", "d2-0", 0, None),
        ])
        .await
        .unwrap();
    let short = std::time::Duration::from_millis(200);
    let dead = store
        .lease_acquire("replica:dead", "dead", short)
        .await
        .unwrap()
        .unwrap();
    store
        .lease_acquire("replica:alive", "alive", LONG)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        keys(&store.outbox_claim("dead", &web(), 2, LONG).await.unwrap()),
        ["d1-0", "d1-1"]
    );
    assert_eq!(
        keys(&store.outbox_claim("alive", &web(), 10, LONG).await.unwrap()),
        ["d2-0"]
    );
    // While the dead replica's lease is still valid, nothing moves.
    assert!(store
        .outbox_claim("other", &web(), 10, LONG)
        .await
        .unwrap()
        .is_empty());
    clock.advance(std::time::Duration::from_millis(350));
    let _ = dead;
    // Its lease expired: its claims return, in order; the live replica's claim does not.
    assert_eq!(
        keys(&store.outbox_claim("other", &web(), 10, LONG).await.unwrap()),
        ["d1-0", "d1-1"]
    );
}
