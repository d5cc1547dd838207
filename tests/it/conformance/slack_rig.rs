//! Slack's conformance rig: the adapter (our reqwest Web API client and the Socket Mode
//! websocket) against the fake Slack (`test-support/src/fake_slack`), the owner and a second
//! person on the allowlist, the owner's conversation their DM with the bot. A person sees the
//! bot's messages of their DM (`channel_view`: edits applied, deletions gone) and the files it
//! shared there, in Slack's message order; an approval's presser reads the ephemeral answer
//! posted to the press's `response_url`.

use std::time::{Duration, Instant};

use herald::adapters::split::Measure;
use herald::app::App;
use herald::config::Config;
use herald_test_support::fake_llm::FakeLlm;
use herald_test_support::fake_slack::{FakeSlack, FakeSlackConfig};
use herald_test_support::harness::{init, test_config, wait_for};
use herald_test_support::promise::slack::SlackChannel;

use super::{Caps, Rig, Seen, Who};

const OWNER: &str = "UOWNER001";
const OTHER: &str = "UOTHER002";
const STRANGER: &str = "USTRANGE3";
const WAIT: Duration = Duration::from_secs(20);

pub struct SlackRig {
    fake: FakeSlack,
    llm: FakeLlm,
    app: App,
    _data: tempfile::TempDir,
}

fn user(who: Who) -> &'static str {
    match who {
        Who::Owner => OWNER,
        Who::Other => OTHER,
        Who::Stranger => STRANGER,
    }
}

impl SlackRig {
    /// The conversation `who` talks in: the owner's DM (the other person presses there), or
    /// the stranger's own.
    fn channel(&self, who: Who) -> String {
        match who {
            Who::Stranger => self.fake.dm_channel(STRANGER),
            _ => self.fake.dm_channel(OWNER),
        }
    }

    /// The open approval question: the last post in the owner's DM with buttons.
    fn last_question(&self) -> Option<herald_test_support::fake_slack::Post> {
        let dm = self.channel(Who::Owner);
        self.fake
            .posted_in(&dm)
            .into_iter()
            .rfind(|p| !p.buttons().is_empty())
    }
}

impl Rig for SlackRig {
    type Crash = SlackChannel;
    const LANE: &'static str = "slack:DOWNER001";

    fn caps() -> Caps {
        Caps {
            declared: herald::adapters::slack::SPEC.caps,
            measure: Measure::Chars,
            rate_limits: true,
            people: true,
        }
    }

    async fn crash_side() -> SlackChannel {
        SlackChannel::start().await
    }

    async fn start(tune: impl FnOnce(&mut Config)) -> SlackRig {
        init();
        let fake = FakeSlack::start(FakeSlackConfig::default()).await;
        let llm = FakeLlm::start().await;
        let data = tempfile::tempdir().expect("temp dir");
        let cfg = fake.config();
        let toml = format!(
            "[slack]\nbot_token = \"{}\"\napp_token = \"{}\"\napi_url = \"{}\"\n\
             allowed_users = [\"{OWNER}\", \"{OTHER}\"]\n",
            cfg.bot_token,
            cfg.app_token,
            fake.api_url()
        );
        let mut section = herald::config::from_toml(&toml).expect("a [slack] section");
        let mut c = test_config(&llm, &data);
        let table = section.sections.remove("slack").expect("the slack table");
        c.sections.insert("slack".into(), table);
        tune(&mut c);
        let app = App::start(c).await.expect("herald starts");
        fake.wait_connected(WAIT).await;
        SlackRig {
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
        match who {
            Who::Other => {
                let dm = self.channel(Who::Owner);
                self.fake.channel_message(&dm, OTHER, text, None);
            }
            _ => {
                self.fake.dm(user(who), text);
            }
        }
    }

    async fn photo(&self, bytes: &[u8], caption: &str) {
        let dm = self.channel(Who::Owner);
        self.fake
            .file_message(&dm, OWNER, caption, "photo.png", "image/png", bytes);
    }

    async fn document(&self, name: &str, mime: &str, bytes: &[u8]) {
        let dm = self.channel(Who::Owner);
        self.fake.file_message(&dm, OWNER, "", name, mime, bytes);
    }

    async fn question(&self) -> String {
        wait_for("an approval question", WAIT, async || {
            self.last_question().map(|q| q.text)
        })
        .await
    }

    async fn press(&self, who: Who, approve: bool) -> String {
        let q = self.last_question().expect("a question to press");
        let button = &q.buttons()[if approve { 0 } else { 1 }];
        let before = self.fake.response_url_posts().len();
        let dm = self.channel(Who::Owner);
        let value = button.value.clone().unwrap_or_default();
        self.fake
            .click(&dm, &q.ts, user(who), &button.action_id, &value);
        wait_for("the press to be answered", WAIT, async || {
            let posts = self.fake.response_url_posts();
            posts
                .get(before)
                .map(|p| p.body["text"].as_str().unwrap_or_default().to_string())
        })
        .await
    }

    async fn seen(&self, who: Who) -> Vec<Seen> {
        let dm = self.channel(who);
        let questions: Vec<String> = self
            .fake
            .posted_in(&dm)
            .into_iter()
            .filter(|p| !p.buttons().is_empty())
            .map(|p| p.ts)
            .collect();
        let uploads = self.fake.uploads();
        let mut seen = Vec::new();
        for (ts, from, text) in self.fake.channel_view(&dm) {
            if [OWNER, OTHER, STRANGER].contains(&from.as_str()) || questions.contains(&ts) {
                continue;
            }
            match uploads
                .iter()
                .find(|u| u.share_ts.as_deref() == Some(ts.as_str()))
            {
                Some(u) => seen.push(Seen::File {
                    name: u.filename.clone(),
                    bytes: u.bytes.clone(),
                }),
                None if !text.is_empty() => seen.push(Seen::Text(text)),
                None => {}
            }
        }
        seen
    }

    fn edits(&self) -> usize {
        self.fake.edits().len()
    }

    fn refuse_next_send(&self, secs: u64) {
        self.fake.rate_limit("chat.postMessage", 1, secs);
    }

    fn send_times(&self) -> Vec<Instant> {
        self.fake.posted().into_iter().map(|p| p.at).collect()
    }

    async fn stop(self) {
        self.app.shutdown().await;
    }
}
