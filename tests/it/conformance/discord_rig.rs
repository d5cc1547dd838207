//! Discord's conformance rig: the real serenity client against the fake Discord
//! (`test-support/src/fake_discord`: REST, gateway and CDN), the owner and a second person on
//! the allowlist, each conversation a DM channel. A person sees the bot's messages of their
//! channel (`channel_view`: edits applied, deletes gone) and the files attached to them.

use std::time::{Duration, Instant};

use herald::adapters::split::Measure;
use herald::app::App;
use herald::config::{Config, Secret};
use herald_test_support::fake_discord::{FakeDiscord, Fault};
use herald_test_support::fake_llm::FakeLlm;
use herald_test_support::harness::{init, test_config, wait_for};
use herald_test_support::promise::discord::DiscordChannel;

use super::{Caps, Rig, Seen, Who};

const TOKEN: &str = "conformance-token";
const OWNER: u64 = 42;
const OTHER: u64 = 43;
const STRANGER: u64 = 77;
/// The owner's DM channel, and the stranger's.
const DM: u64 = 900;
const STRANGER_DM: u64 = 901;
const WAIT: Duration = Duration::from_secs(20);

pub struct DiscordRig {
    fake: FakeDiscord,
    llm: FakeLlm,
    app: App,
    _data: tempfile::TempDir,
}

fn user(who: Who) -> u64 {
    match who {
        Who::Owner => OWNER,
        Who::Other => OTHER,
        Who::Stranger => STRANGER,
    }
}

fn channel(who: Who) -> u64 {
    if who == Who::Stranger {
        STRANGER_DM
    } else {
        DM
    }
}

/// An approval question: a message carrying buttons.
fn is_question(body: &serde_json::Value) -> bool {
    body["components"]
        .as_array()
        .is_some_and(|rows| !rows.is_empty())
}

impl Rig for DiscordRig {
    type Crash = DiscordChannel;
    const LANE: &'static str = "discord:900";

    fn caps() -> Caps {
        Caps {
            declared: herald::adapters::discord::SPEC.caps,
            measure: Measure::Chars,
            rate_limits: true,
            people: true,
        }
    }

    async fn crash_side() -> DiscordChannel {
        DiscordChannel::start().await
    }

    async fn start(tune: impl FnOnce(&mut Config)) -> DiscordRig {
        init();
        let fake = FakeDiscord::start(TOKEN).await;
        let llm = FakeLlm::start().await;
        let data = tempfile::tempdir().expect("temp dir");
        let mut c = test_config(&llm, &data);
        c.discord.token = Some(Secret::new(TOKEN));
        c.discord.api_url = fake.api_url().parse().expect("the fake's URL");
        // serenity's ratelimiter ignores the proxy (see the fake's header).
        c.discord.ratelimiter = false;
        c.discord.allowed_users = vec![OWNER.to_string(), OTHER.to_string()];
        tune(&mut c);
        let app = App::start(c).await.expect("herald starts");
        fake.wait_ready(WAIT).await;
        DiscordRig {
            fake,
            llm,
            app,
            _data: data,
        }
    }

    fn llm(&self) -> &FakeLlm {
        &self.llm
    }

    fn app(&self) -> &App {
        &self.app
    }

    async fn say(&self, who: Who, text: &str) {
        self.fake
            .dispatch_message_create(channel(who), None, user(who), text, false, None);
    }

    async fn photo(&self, bytes: &[u8], caption: &str) {
        let file = self.fake.add_cdn_file("photo.png", "image/png", bytes);
        self.fake
            .dispatch_message_with_files(DM, None, OWNER, caption, &[file], &[]);
    }

    async fn document(&self, name: &str, mime: &str, bytes: &[u8]) {
        let file = self.fake.add_cdn_file(name, mime, bytes);
        self.fake
            .dispatch_message_with_files(DM, None, OWNER, "", &[file], &[]);
    }

    async fn question(&self) -> String {
        wait_for("an approval question", WAIT, async || {
            let sent = self.fake.sent_messages();
            sent.into_iter()
                .rfind(|m| is_question(&m.body))
                .map(|m| m.content)
        })
        .await
    }

    async fn press(&self, who: Who, approve: bool) -> String {
        let q = self
            .fake
            .sent_messages()
            .into_iter()
            .rfind(|m| is_question(&m.body))
            .expect("a question to press");
        let button = if approve { 0 } else { 1 };
        let custom_id = q.body["components"][0]["components"][button]["custom_id"]
            .as_str()
            .expect("a button")
            .to_string();
        let before = self.fake.interaction_callbacks().len();
        self.fake
            .dispatch_button_press(DM, None, user(who), &[], q.message_id, &custom_id);
        wait_for("the press to be answered", WAIT, async || {
            let callbacks = self.fake.interaction_callbacks();
            callbacks.get(before).map(|cb| {
                let data = cb.data.clone().unwrap_or_default();
                data["content"].as_str().unwrap_or_default().to_string()
            })
        })
        .await
    }

    async fn seen(&self, who: Who) -> Vec<Seen> {
        let mut seen = Vec::new();
        for m in self.fake.channel_view(channel(who)) {
            if is_question(&m.body) {
                continue;
            }
            if !m.content.is_empty() {
                seen.push(Seen::Text(m.content));
            }
            for f in m.files {
                seen.push(Seen::File {
                    name: f.file_name,
                    bytes: f.bytes,
                });
            }
        }
        seen
    }

    fn edits(&self) -> usize {
        self.fake.edits().len()
    }

    /// The 429 carries Discord's `retry_after` and `Retry-After`, but with serenity's own
    /// ratelimiter off (it would escape the fake) neither reaches the adapter, which waits
    /// `discord.rate_limit_wait_ms` (2 s by default) instead: the case's 1 s is honoured by
    /// that fallback, not read. Against real Discord serenity's ratelimiter reads it.
    fn refuse_next_send(&self, secs: u64) {
        self.fake.fail_next_rest(
            &format!("/channels/{DM}/messages"),
            Fault::RateLimited {
                retry_after_secs: secs as f64,
            },
        );
    }

    fn send_times(&self) -> Vec<Instant> {
        self.fake
            .sent_with_times()
            .into_iter()
            .map(|(_, t)| t)
            .collect()
    }

    async fn stop(self) {
        self.app.shutdown().await;
    }
}
