//! WhatsApp's conformance rig: the adapter (its webhook route on the daemon's listener and our
//! reqwest Graph client) against the fake Cloud API (`test-support/src/fake_whatsapp`), the
//! owner and a second person on the allowlist (E.164), the owner's conversation their chat with
//! the business number. A person sees the bot's messages to their number in order (WhatsApp has
//! no edits), files as the uploaded bytes; an approval question is the interactive message with
//! reply buttons, and a tap's outcome is the bot's reply quoting the tap (left out of what a
//! person "sees", like the question itself).

use std::time::Instant;

use herald::adapters::split::Measure;
use herald::config::Config;
use herald_test_support::fake_whatsapp::{FakeWhatsApp, FakeWhatsAppConfig, Sent};
use herald_test_support::harness::{init, test_config, wait_for};
use herald_test_support::promise::whatsapp::WhatsAppChannel;

use super::rig_support::{Core, WAIT};
use super::{Caps, Rig, Seen, Who};

const OWNER: &str = "4915112340001";
const OTHER: &str = "4915112340002";
const STRANGER: &str = "4915112340003";

pub struct WhatsAppRig {
    fake: FakeWhatsApp,
    core: Core,
}

fn number(who: Who) -> &'static str {
    who.pick(OWNER, OTHER, STRANGER)
}

/// A config holding the `[whatsapp]` section a rig's daemon reads for `fake` (`extra`: more
/// keys of the section).
pub fn section(fake: &FakeWhatsApp, extra: &str) -> Config {
    let cfg = fake.config();
    let toml = format!(
        "[whatsapp]\naccess_token = \"{}\"\nphone_number_id = \"{}\"\napp_secret = \"{}\"\n\
         verify_token = \"{}\"\napi_url = \"{}\"\nallowed_users = [\"+{OWNER}\", \"+{OTHER}\"]\n{extra}",
        cfg.access_token,
        cfg.phone_number_id,
        cfg.app_secret,
        cfg.verify_token,
        fake.api_url()
    );
    herald::config::from_toml(&toml).expect("a [whatsapp] section")
}

impl WhatsAppRig {
    /// The open approval question in the owner's chat: the last interactive message.
    fn last_question(&self) -> Option<Sent> {
        self.fake
            .sent_to(OWNER)
            .into_iter()
            .rfind(|s| s.kind == "interactive")
    }

    /// The wamids of the taps people made (their outcomes quote them).
    fn taps(&self) -> Vec<String> {
        self.fake
            .hooks()
            .iter()
            .filter(|h| h.body.contains("\"button_reply\""))
            .flat_map(|h| h.about.clone())
            .collect()
    }
}

impl Rig for WhatsAppRig {
    type Crash = WhatsAppChannel;
    const LANE: &'static str = "whatsapp:4915112340001";

    fn caps() -> Caps {
        Caps::platform(herald::adapters::whatsapp::SPEC.caps, Measure::Chars)
    }

    async fn crash_side() -> WhatsAppChannel {
        WhatsAppChannel::start().await
    }

    async fn start(tune: impl FnOnce(&mut Config)) -> WhatsAppRig {
        init();
        let fake = FakeWhatsApp::start(FakeWhatsAppConfig::default()).await;
        let mut parsed = section(&fake, "");
        let config = |llm: &_, data: &_| {
            let mut c = test_config(llm, data);
            let table = parsed
                .sections
                .remove("whatsapp")
                .expect("the whatsapp table");
            c.sections.insert("whatsapp".into(), table);
            c
        };
        let core = Core::start(config, tune).await;
        fake.set_webhook(&format!("http://{}/whatsapp/webhook", core.app().addr));
        WhatsAppRig { fake, core }
    }

    fn core(&self) -> &Core {
        &self.core
    }

    async fn say(&self, who: Who, text: &str) {
        self.fake.text(number(who), text);
    }

    async fn photo(&self, bytes: &[u8], caption: &str) {
        self.fake.image(OWNER, bytes, "image/png", caption);
    }

    async fn document(&self, name: &str, mime: &str, bytes: &[u8]) {
        self.fake.document(OWNER, name, mime, bytes);
    }

    async fn question(&self) -> String {
        wait_for("an approval question", WAIT, async || {
            self.last_question().map(|q| q.text)
        })
        .await
    }

    async fn press(&self, who: Who, approve: bool) -> String {
        let q = self.last_question().expect("a question to press");
        let (id, title) = q.buttons[if approve { 0 } else { 1 }].clone();
        let tap = self.fake.tap(number(who), &q.wamid, &id, &title);
        wait_for("the tap to be answered", WAIT, async || {
            self.fake
                .sent_to(number(who))
                .into_iter()
                .find(|s| s.context.as_deref() == Some(tap.as_str()))
                .map(|s| s.text)
        })
        .await
    }

    async fn seen(&self, who: Who) -> Vec<Seen> {
        let taps = self.taps();
        let mut seen = Vec::new();
        for s in self.fake.sent_to(number(who)) {
            let answers_a_tap = s.context.as_ref().is_some_and(|c| taps.contains(c));
            if s.kind == "interactive" || answers_a_tap {
                continue;
            }
            match &s.media_id {
                Some(id) => {
                    let media = self.fake.media(id).expect("the uploaded file");
                    seen.push(Seen::File {
                        name: s.filename.clone().or(media.name).unwrap_or_default(),
                        bytes: media.bytes,
                    });
                }
                None => seen.push(Seen::Text(s.text.clone())),
            }
        }
        seen
    }

    fn edits(&self) -> usize {
        // WhatsApp has no edits: nothing the bot sent can change.
        0
    }

    fn refuse_next_send(&self, secs: u64) {
        self.fake.rate_limit_next(secs);
    }

    fn send_times(&self) -> Vec<Instant> {
        self.fake
            .sent()
            .into_iter()
            .filter(|s| s.kind != "interactive")
            .map(|s| s.at)
            .collect()
    }

    async fn stop(self) {
        self.core.stop().await;
    }
}
