//! Failover in seconds: two `herald` replicas on one Postgres schema and one fake Telegram, with
//! production lease settings (lanes: 30 s TTL). The polling replica is SIGKILLed right after a
//! chat talked to it, so it dies holding both the poller role and, most likely, that chat's
//! idle lane lease; the chat's next message must be answered by the standby within the role
//! lease's takeover bound plus a turn, not after a lane lease's 30 s.
//!
//! Runs only when `DATABASE_URL` is set.

use std::time::{Duration, Instant};

use herald::store::{ROLE_LEASE_TTL, ROLE_RENEW_EVERY, ROLE_TAKEOVER_BOUND};
use herald_test_support::{fake_llm, promise};

use fake_llm::FakeLlm;
use promise::daemon::{herald_bin, Backend, Daemon, Spec};
use promise::telegram::TelegramChannel;

const CHAT: i64 = 9100;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_is_answered_by_the_standby_within_seconds_of_the_pollers_death() {
    let Ok(admin_url) = std::env::var("DATABASE_URL") else {
        herald_test_support::skip_or_fail("failover_pg: DATABASE_URL not set");
        return;
    };
    // The bound a chat can see: the role lease runs out, a standby takes it on its next try.
    assert!(ROLE_LEASE_TTL + ROLE_RENEW_EVERY <= ROLE_TAKEOVER_BOUND);
    assert!(ROLE_TAKEOVER_BOUND <= Duration::from_secs(5));

    promise::init();
    let llm = FakeLlm::start().await;
    let backend = Backend::postgres(&admin_url).await;
    let tg = TelegramChannel::start().await;
    let spec = |name: &str| {
        let mut s = Spec::new(&herald_bin(), name, &backend, &llm.base_url());
        for (k, v) in tg.daemon_env() {
            s = s.set(&k, &v);
        }
        // Production lane leases: only the dead replica's liveness may free them early.
        s.set("HERALD_LANES__LEASE_TTL_SECS", "30")
            .set("HERALD_LANES__HEARTBEAT_SECS", "10")
    };
    let poller = Daemon::start(&spec("f1"), 0).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while tg.fake().calls("getUpdates").is_empty() {
        assert!(Instant::now() < deadline, "f1 never polled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let standby = Daemon::start(&spec("f2"), 0).await;
    let fake = tg.fake();
    fake.push_private_text(CHAT, CHAT, "before");
    fake.wait_for_sent(1, Duration::from_secs(30)).await;

    poller.kill();
    let killed = Instant::now();
    fake.push_private_text(CHAT, CHAT, "after");
    // Well under the 30 s lane lease and the old role lease: the takeover bound plus a turn
    // on a loaded machine.
    let answered = Instant::now() + Duration::from_secs(15);
    let after = |sent: &[herald_test_support::fake_telegram::SentMessage]| {
        sent.iter().filter(|m| m.text == "reply to: after").count()
    };
    while after(&fake.sent_messages()) == 0 {
        assert!(
            Instant::now() < answered,
            "no answer 15 s after the kill; sent: {:#?}",
            fake.sent_messages()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!(
        "the chat's answer came {:?} after the kill",
        killed.elapsed()
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sent = fake.sent_messages();
    assert_eq!(after(&sent), 1, "answered once: {sent:#?}");
    // The one resend allowed: the reply Telegram accepted just before the kill, whose
    // `mark_sent` had not committed yet.
    assert!(
        sent.iter()
            .all(|m| m.text == "reply to: after" || m.text == "reply to: before"),
        "{sent:#?}"
    );
    assert!(sent.len() <= 3, "{sent:#?}");
    drop(standby);
    backend.cleanup().await;
}
