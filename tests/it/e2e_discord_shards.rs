//! Gateway shards spread across replicas: two daemons (`App::start` twice on one SQLite file)
//! against one fake Discord that routes each guild's events to shard `(guild_id >> 22) % total`
//! only. What a user sees: every message answered exactly once, whichever replica runs its
//! shard, and a shard whose replica stops is picked up by the survivor.
//!
//! Which replica runs a shard is read from the store (`role:discord-shard-<n>` leases); that
//! each shard has one live socket, and that no IDENTIFY ever cut another live socket of the
//! same shard, is read from the fake.

use std::future::Future;
use std::time::{Duration, Instant};

use herald::adapters::discord::SHARD_LEASE_PREFIX;
use herald::app::App;
use herald::config::{Config, Secret, ShardCount};
use herald::store::Store;
use herald_test_support::fake_discord::{within, FakeDiscord, SentMessage};
use herald_test_support::fake_llm::FakeLlm;
use herald_test_support::harness::{init, test_config};

const TOKEN: &str = "fake-token";
const USER: u64 = 42;
const DM: u64 = 900;
/// Guilds whose ids route to shard 0, 1 and 2 of 2 or 3 shards.
const GUILD_0: u64 = 6 << 22;
const GUILD_1: u64 = 7 << 22;
const GUILD_2: u64 = 8 << 22;
const CHANNEL_0: u64 = 600;
const CHANNEL_1: u64 = 601;
const CHANNEL_2: u64 = 602;
/// Takeovers go in 5 s ticks; a handover is two of them at most.
const WAIT: Duration = Duration::from_secs(30);

fn config(fake: &FakeDiscord, llm: &FakeLlm, data: &tempfile::TempDir, replica: &str) -> Config {
    let mut c = test_config(llm, data);
    c.server.replica_id = Some(replica.into());
    c.server.shutdown_grace_secs = 1;
    c.discord.token = Some(Secret::new(TOKEN));
    c.discord.api_url = fake.api_url().parse().unwrap();
    c.discord.ratelimiter = false;
    c.discord.allowed_users = vec![USER.to_string()];
    c.discord.free_response_channels = [CHANNEL_0, CHANNEL_1, CHANNEL_2]
        .iter()
        .map(u64::to_string)
        .collect();
    c.discord.shards = ShardCount::Fixed(2);
    c
}

/// `(shard, holder)` of every live shard lease.
async fn holders(store: &dyn Store) -> Vec<(String, String)> {
    store
        .leases_live(SHARD_LEASE_PREFIX)
        .await
        .unwrap()
        .into_iter()
        .map(|l| (l.name[SHARD_LEASE_PREFIX.len()..].to_string(), l.holder))
        .collect()
}

fn held(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(s, h)| (s.to_string(), format!("{h}/discord")))
        .collect()
}

/// Polls until the shard leases are `want` and the fake sees exactly those shards connected.
async fn wait_for_shards(fake: &FakeDiscord, store: &dyn Store, want: Vec<(String, String)>) {
    let shards: Vec<u64> = want.iter().map(|(s, _)| s.parse().unwrap()).collect();
    let deadline = Instant::now() + WAIT;
    loop {
        let now = holders(store).await;
        if now == want && fake.connected_shards() == shards {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for shards {want:?}: leases {now:?}, connected {:?}",
            fake.connected_shards()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What the bot posted, once `n` posts are in and a duplicate has had time to show up.
async fn sent_settled(fake: &FakeDiscord, n: usize) -> Vec<(u64, String)> {
    fake.wait_for_sent(n, WAIT).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut posts: Vec<(u64, String)> = fake
        .sent_messages()
        .into_iter()
        .map(|m: SentMessage| (m.channel_id, m.content))
        .collect();
    posts.sort();
    posts
}

fn post(channel: u64, text: &str) -> (u64, String) {
    (channel, format!("reply to: {text}"))
}

async fn bounded(what: &str, test: impl Future<Output = ()>) {
    within(what, Duration::from_secs(120), test).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_split_the_shards_answer_once_and_the_survivor_takes_over() {
    bounded("two replicas", async {
        init();
        let fake = FakeDiscord::start(TOKEN).await;
        let llm = FakeLlm::start().await;
        let data = tempfile::tempdir().unwrap();

        // Alone, a replica runs every shard.
        let a = App::start(config(&fake, &llm, &data, "a")).await.unwrap();
        let store = a.store.clone();
        wait_for_shards(&fake, store.as_ref(), held(&[("0", "a"), ("1", "a")])).await;
        assert_eq!(fake.shard_total(), 2);

        // A second replica gets half: the first gives shard 1 back before it is taken.
        let b = App::start(config(&fake, &llm, &data, "b")).await.unwrap();
        wait_for_shards(&fake, store.as_ref(), held(&[("0", "a"), ("1", "b")])).await;
        assert_eq!(
            fake.identify_count_for(1),
            2,
            "shard 1 identified by a, then by b"
        );
        fake.guild_create(GUILD_0, &[(CHANNEL_0, "zero")], &[]);
        fake.guild_create(GUILD_1, &[(CHANNEL_1, "one")], &[]);

        fake.dispatch_message_create(CHANNEL_0, Some(GUILD_0), USER, "on shard 0", false, None);
        fake.dispatch_message_create(CHANNEL_1, Some(GUILD_1), USER, "on shard 1", false, None);
        fake.dispatch_message_create(DM, None, USER, "a dm", false, None);
        assert_eq!(
            sent_settled(&fake, 3).await,
            vec![
                post(CHANNEL_0, "on shard 0"),
                post(CHANNEL_1, "on shard 1"),
                post(DM, "a dm"),
            ],
            "each message answered once"
        );

        // The replica running shard 0 stops (closing its store handle): the survivor takes it over.
        a.shutdown().await;
        let store = b.store.clone();
        wait_for_shards(&fake, store.as_ref(), held(&[("0", "b"), ("1", "b")])).await;
        assert_eq!(
            fake.identify_count_for(0),
            2,
            "shard 0 identified by a, then by b"
        );
        fake.dispatch_message_create(CHANNEL_0, Some(GUILD_0), USER, "after", false, None);
        let posts = sent_settled(&fake, 4).await;
        assert_eq!(
            posts
                .iter()
                .filter(|p| **p == post(CHANNEL_0, "after"))
                .count(),
            1,
            "{posts:?}"
        );
        assert_eq!(posts.len(), 4, "{posts:?}");
        assert_eq!(
            fake.shard_takeovers(),
            0,
            "no shard was ever identified while another socket ran it"
        );
        b.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_replica_runs_every_shard_discord_recommends() {
    bounded("auto shards", async {
        init();
        let fake = FakeDiscord::start(TOKEN).await;
        fake.set_recommended_shards(3);
        let llm = FakeLlm::start().await;
        let data = tempfile::tempdir().unwrap();
        let mut c = config(&fake, &llm, &data, "solo");
        c.discord.shards = ShardCount::Auto;
        let app = App::start(c).await.unwrap();
        wait_for_shards(
            &fake,
            app.store.as_ref(),
            held(&[("0", "solo"), ("1", "solo"), ("2", "solo")]),
        )
        .await;
        assert_eq!(fake.shard_total(), 3);
        fake.dispatch_message_create(CHANNEL_2, Some(GUILD_2), USER, "third", false, None);
        fake.dispatch_message_create(CHANNEL_1, Some(GUILD_1), USER, "second", false, None);
        assert_eq!(
            sent_settled(&fake, 2).await,
            vec![post(CHANNEL_1, "second"), post(CHANNEL_2, "third")]
        );
        assert_eq!(fake.shard_takeovers(), 0);
        app.shutdown().await;
    })
    .await;
}
