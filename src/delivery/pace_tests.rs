//! The pace's slots, computed at given instants (no sleeping, no wall clock).

use super::*;

const TG: Platform = Platform::named("telegram");

fn telegram() -> Pace {
    Pace::new(
        HashMap::from([(TG, Limits::telegram())]),
        HashMap::from([(TG, Duration::from_secs(1))]),
    )
}

/// The slot a send asking at `now` gets: its chat's, then the platform's from there (what
/// [`Pace::wait`] sleeps for).
fn slot(pace: &Pace, chat: &str, urgency: Urgency, now: Instant) -> Instant {
    let at = pace.chat_slot(TG, chat, urgency, now, true);
    pace.overall_slot(TG, urgency, at, true)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[tokio::test]
async fn a_person_at_conversation_pace_never_waits() {
    let pace = telegram();
    let t0 = Instant::now();
    // Each reply leaves 0.5 s after the last (faster than one a second): the burst covers
    // eighteen such exchanges, far more than a person types.
    for i in 0..18 {
        let now = t0 + ms(500) * i;
        assert_eq!(slot(&pace, "7", Urgency::Person, now), now, "reply {i}");
    }
}

#[tokio::test]
async fn a_long_reply_leaves_one_chunk_a_second() {
    let pace = telegram();
    let t0 = Instant::now();
    let first = slot(&pace, "7", Urgency::Person, t0);
    let rest: Vec<Instant> = (0..3)
        .map(|_| pace.chat_slot(TG, "7", Urgency::Bulk, t0, true))
        .collect();
    assert_eq!(first, t0, "the answer's first chunk goes at once");
    assert_eq!(rest, vec![t0 + ms(1000), t0 + ms(2000), t0 + ms(3000)]);
    // Another chat is not held by it.
    assert_eq!(pace.chat_slot(TG, "8", Urgency::Bulk, t0, true), t0);
    assert_eq!(pace.overall_slot(TG, Urgency::Bulk, t0, true), t0);
}

#[tokio::test]
async fn bulk_spends_no_burst_but_a_person_still_can() {
    let pace = telegram();
    let t0 = Instant::now();
    for i in 0..5 {
        slot(&pace, "7", Urgency::Bulk, t0 + ms(1000) * i);
    }
    // Bulk at the steady rate left the burst whole: a person's reply goes at once.
    let now = t0 + ms(4100);
    assert_eq!(slot(&pace, "7", Urgency::Person, now), now);
    assert_eq!(
        slot(&pace, "7", Urgency::Bulk, now),
        t0 + ms(6000),
        "the next bulk send waits for the token the reply took"
    );
}

#[tokio::test]
async fn a_streamed_final_edit_does_not_wait_for_the_preview_slot() {
    let pace = telegram();
    let t0 = Instant::now();
    assert_eq!(slot(&pace, "7", Urgency::Person, t0), t0);
    let edit = slot(&pace, "7", Urgency::Preview, t0 + ms(100));
    assert_eq!(edit, t0 + ms(1000), "previews keep the interval");
    assert!(pace.ready_in(TG, "7") > Duration::ZERO);
    let now = t0 + ms(1200);
    assert_eq!(slot(&pace, "7", Urgency::Final, now), now);
}

#[tokio::test]
async fn groups_never_exceed_twenty_a_minute() {
    let pace = telegram();
    let t0 = Instant::now();
    let slots: Vec<Instant> = (0..40)
        .map(|_| slot(&pace, "-100", Urgency::Person, t0))
        .collect();
    for (i, start) in slots.iter().enumerate() {
        let within = slots[i..]
            .iter()
            .filter(|s| **s < *start + Duration::from_secs(60))
            .count();
        assert!(within <= 20, "{within} sends in the minute from send {i}");
    }
}

#[tokio::test]
async fn the_platform_never_exceeds_thirty_a_second() {
    let pace = telegram();
    let t0 = Instant::now();
    let slots: Vec<Instant> = (0..200)
        .map(|i| slot(&pace, &i.to_string(), Urgency::Person, t0))
        .collect();
    for (i, start) in slots.iter().enumerate() {
        let within = slots[i..]
            .iter()
            .filter(|s| **s < *start + Duration::from_secs(1))
            .count();
        assert!(within <= 30, "{within} sends in the second from send {i}");
    }
    assert!(*slots.last().unwrap() >= t0 + Duration::from_secs(6));
}

#[tokio::test]
async fn an_unpaced_platform_sends_freely() {
    let pace = telegram();
    let t0 = Instant::now();
    for _ in 0..50 {
        assert_eq!(
            pace.chat_slot(Platform::WEB, "x", Urgency::Bulk, t0, true),
            t0
        );
    }
}

#[tokio::test]
async fn previews_keep_their_own_budget_and_final_edits_none() {
    let pace = telegram();
    let t0 = Instant::now();
    let edits: Vec<Instant> = (0..60)
        .map(|i| slot(&pace, &format!("e{i}"), Urgency::Preview, t0))
        .collect();
    let first_second = edits.iter().filter(|s| **s < t0 + ms(1000)).count();
    assert!(
        first_second <= 20,
        "{first_second} preview edits in a second"
    );
    // Messages and final edits are not held back by the previews elsewhere.
    assert_eq!(slot(&pace, "m", Urgency::Person, t0), t0);
    assert_eq!(slot(&pace, "f", Urgency::Final, t0), t0);
}
