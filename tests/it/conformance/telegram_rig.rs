//! Telegram's conformance rig: the real teloxide client against the fake Bot API
//! (`test-support/src/fake_telegram`), polling, the owner and a second person on the allowlist.
//! A person sees the bot's messages of their private chat (`chat_view`: edits applied) and the
//! files it uploaded there, in Telegram's message order.

use std::time::{Duration, Instant};

use herald::adapters::split::Measure;
use herald::app::App;
use herald::config::Config;
use herald_test_support::fake_llm::FakeLlm;
use herald_test_support::fake_telegram::{FakeTelegram, Fault, Media};
use herald_test_support::harness::wait_for;
use herald_test_support::promise::telegram::TelegramChannel;
use herald_test_support::telegram::{fakes, tg_config, USER};

use super::{Caps, Rig, Seen, Who};

/// The second allowed person.
const OTHER: i64 = 2002;
/// Someone off the allowlist.
const STRANGER: i64 = 777;
const WAIT: Duration = Duration::from_secs(20);

pub struct TelegramRig {
    tg: FakeTelegram,
    llm: FakeLlm,
    app: App,
    _data: tempfile::TempDir,
}

fn user(who: Who) -> i64 {
    match who {
        Who::Owner => USER,
        Who::Other => OTHER,
        Who::Stranger => STRANGER,
    }
}

impl Rig for TelegramRig {
    type Crash = TelegramChannel;
    const LANE: &'static str = "telegram:1001";

    fn caps() -> Caps {
        Caps {
            declared: herald::adapters::telegram::SPEC.caps,
            measure: Measure::Utf16,
            rate_limits: true,
            people: true,
        }
    }

    async fn crash_side() -> TelegramChannel {
        TelegramChannel::start().await
    }

    async fn start(tune: impl FnOnce(&mut Config)) -> TelegramRig {
        let (tg, llm, data) = fakes().await;
        let mut c = tg_config(&tg, &llm, &data);
        c.telegram.allowed_users.push(OTHER.to_string());
        tune(&mut c);
        let app = App::start(c).await.expect("app starts");
        TelegramRig {
            tg,
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
        let chat = if who == Who::Stranger { STRANGER } else { USER };
        self.tg.push_private_text(chat, user(who), text);
    }

    async fn photo(&self, bytes: &[u8], caption: &str) {
        self.tg.add_file("conf-photo", bytes);
        let photo = Media::Photo {
            file_id: "conf-photo".into(),
            size: bytes.len() as u64,
            caption: Some(caption.into()),
        };
        self.tg.push_media(USER, USER, &photo);
    }

    async fn document(&self, name: &str, mime: &str, bytes: &[u8]) {
        self.tg.add_file("conf-doc", bytes);
        let doc = Media::Document {
            file_id: "conf-doc".into(),
            size: bytes.len() as u64,
            name: name.into(),
            mime: mime.into(),
            caption: None,
        };
        self.tg.push_media(USER, USER, &doc);
    }

    async fn question(&self) -> String {
        wait_for("an approval question", WAIT, async || {
            self.tg.questions().pop().map(|q| q.text)
        })
        .await
    }

    async fn press(&self, who: Who, approve: bool) -> String {
        let q = self.tg.questions().pop().expect("a question to press");
        let before = self.tg.calls("answerCallbackQuery").len();
        let data = if approve { &q.approve } else { &q.deny };
        self.tg
            .push_button_press(USER, user(who), q.message_id, data);
        wait_for("the press to be answered", WAIT, async || {
            let answers = self.tg.calls("answerCallbackQuery");
            answers
                .get(before)
                .map(|a| a["text"].as_str().unwrap_or_default().to_string())
        })
        .await
    }

    async fn seen(&self, who: Who) -> Vec<Seen> {
        let chat = if who == Who::Stranger { STRANGER } else { USER };
        let questions: Vec<i64> = self.tg.questions().iter().map(|q| q.message_id).collect();
        let mut seen: Vec<(i64, Seen)> = self
            .tg
            .chat_view(chat)
            .into_iter()
            .filter(|m| !questions.contains(&m.message_id))
            .map(|m| (m.message_id, Seen::Text(m.text)))
            .collect();
        for u in self.tg.uploads().into_iter().filter(|u| u.chat_id == chat) {
            let file = Seen::File {
                name: u.file_name,
                bytes: u.bytes,
            };
            seen.push((u.message_id, file));
        }
        seen.sort_by_key(|(id, _)| *id);
        seen.into_iter().map(|(_, s)| s).collect()
    }

    fn edits(&self) -> usize {
        self.tg.edits().len()
    }

    fn refuse_next_send(&self, secs: u64) {
        self.tg.fail_next("sendMessage", Fault::RetryAfter(secs));
    }

    fn send_times(&self) -> Vec<Instant> {
        self.tg
            .sent_with_times()
            .into_iter()
            .map(|(_, t)| t)
            .collect()
    }

    async fn stop(self) {
        self.app.shutdown().await;
    }
}
