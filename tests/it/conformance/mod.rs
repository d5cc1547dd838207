//! The platform conformance suite: every chat platform runs the same cases against its wire
//! fake, so a platform is "one module, one wire fake and one line here".
//!
//! A platform plugs in through [`Rig`] (its fixture, in `conformance/<platform>_rig.rs`): it starts
//! the fake and the real core, acts as a person of the platform (a text, a photo, a document,
//! an approval button) and reads back what that person sees. The cases in `cases*.rs` are
//! written once over `R: Rig`; [`conformance!`] turns each into a `#[tokio::test]` for one
//! platform. What a platform cannot do (web has no platform 429, no edits, no file input) is
//! declared in its [`Caps`], and the case asserts that declared behaviour instead of skipping.
//!
//! Adding a platform: write `conformance/<platform>_rig.rs` with a `Rig` for its fake (its
//! crash-loop side is a `promise::crash::Side`, the load's way in through the fake), then add
//! one line below:
//! `conformance!(<platform>, <platform>_rig::<Platform>Rig);`.

mod cases;
mod cases_files;
mod discord_rig;
mod email_rig;
mod matrix_rig;
mod rig_support;
mod signal_rig;
mod slack_rig;
mod telegram_rig;
mod web_rig;
mod whatsapp_rig;

use std::time::Instant;

use herald::adapters::split::Measure;
use herald::app::App;
use herald::config::{Capabilities, Config};
use herald::domain::LaneKey;
use herald_test_support::fake_llm::FakeLlm;
use herald_test_support::promise::crash::Side;
use rig_support::Core;

/// The people of a conformance run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    /// The allowed person whose private conversation the cases talk in.
    Owner,
    /// A second allowed person, present in the owner's conversation (presses buttons there).
    Other,
    /// Someone off the allowlist, writing in a conversation of their own.
    Stranger,
}

impl Who {
    /// The one of `owner`, `other` and `stranger` that is this person's.
    pub fn pick<T>(self, owner: T, other: T, stranger: T) -> T {
        match self {
            Who::Owner => owner,
            Who::Other => other,
            Who::Stranger => stranger,
        }
    }
}

/// One thing a person sees in their conversation, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// A message from the bot, as it reads now (after any edits).
    Text(String),
    /// A file from the bot.
    File { name: String, bytes: Vec<u8> },
}

impl Seen {
    pub fn text(&self) -> Option<&str> {
        match self {
            Seen::Text(t) => Some(t),
            Seen::File { .. } => None,
        }
    }
}

/// What a platform can do: the daemon's own facts (the adapter's `SPEC.caps`, which the cases
/// hold it to), and the few the daemon does not record.
#[derive(Clone, Copy, Debug)]
pub struct Caps {
    /// `config::registry::Capabilities` as the adapter declares them. A `max_text` of
    /// `usize::MAX` means one message whatever the length.
    pub declared: Capabilities,
    /// How the platform counts `max_text`.
    pub measure: Measure,
    /// The platform can answer a send with 429 + Retry-After.
    pub rate_limits: bool,
    /// The platform tells the people of a conversation apart, so only the requester's press
    /// answers an approval. Without (the web chat: whoever passed its guard is the person),
    /// someone else is whoever has no credential.
    pub people: bool,
}

impl Caps {
    /// A chat platform's: it rate-limits sends and tells its people apart.
    pub fn platform(declared: Capabilities, measure: Measure) -> Caps {
        Caps {
            declared,
            measure,
            rate_limits: true,
            people: true,
        }
    }
}

/// A platform's fixture: its wire fake and the real core, as one person of the platform sees
/// them. Each case starts its own.
#[allow(async_fn_in_trait)]
pub trait Rig: Sized {
    /// The platform's side of the crash loop (`promise::crash::run_on`: the real binary under
    /// SIGKILL, its fake, the load through it).
    type Crash: Side;
    async fn crash_side() -> Self::Crash;
    /// The lane key of the owner's conversation.
    const LANE: &'static str;
    /// The owner's lane as the store keys it: [`Rig::LANE`], unless the platform makes its
    /// conversation ids at run time (Matrix room ids), when the started rig knows it.
    fn lane(&self) -> String {
        LaneKey::new(Self::LANE).as_str().to_string()
    }
    fn caps() -> Caps;
    /// A platform without buttons whose people answer a question in words (a `yes`/`no` reply
    /// or a reaction, `Approvals::answer_in_words`): `press` is such an answer, and the
    /// approval case runs as it does with buttons.
    fn answers_in_words() -> bool {
        false
    }
    /// The fake, the fake model and the core, started with the rig's settings and then `tune`.
    async fn start(tune: impl FnOnce(&mut Config)) -> Self;
    /// The core the rig started.
    fn core(&self) -> &Core;
    fn llm(&self) -> &FakeLlm {
        self.core().llm()
    }
    fn app(&self) -> &App {
        self.core().app()
    }
    /// A text from `who`, in the owner's conversation (the stranger: in their own).
    async fn say(&self, who: Who, text: &str);
    /// A PNG photo from the owner with `caption`.
    async fn photo(&self, bytes: &[u8], caption: &str);
    /// A document from the owner.
    async fn document(&self, name: &str, mime: &str, bytes: &[u8]);
    /// Waits for the open approval question in the owner's conversation; returns its text.
    async fn question(&self) -> String;
    /// `who` presses Approve (or Deny) on that question; returns what the presser is told.
    async fn press(&self, who: Who, approve: bool) -> String;
    /// What `who` sees from the bot in their conversation, in order (questions left out).
    async fn seen(&self, who: Who) -> Vec<Seen>;
    /// Edits the bot made to its messages so far.
    fn edits(&self) -> usize;
    /// The platform answers the bot's next message send with 429 and `Retry-After: secs`.
    fn refuse_next_send(&self, secs: u64);
    /// When the platform accepted each message the bot sent, in order.
    fn send_times(&self) -> Vec<Instant>;
    async fn stop(self);
}

/// One `#[tokio::test]` per case for platform `$rig`, in a module named `$name`.
macro_rules! conformance {
    ($name:ident, $rig:ty) => {
        mod $name {
            use super::*;

            #[tokio::test]
            async fn a_message_is_answered_once() {
                cases::answered_once::<$rig>().await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn three_sigkills_under_200_messages_lose_and_duplicate_nothing() {
                cases::sigkills::<$rig>().await
            }
            #[tokio::test]
            async fn a_long_reply_is_split_at_the_limit() {
                cases::long_reply::<$rig>().await
            }
            #[tokio::test]
            async fn a_streamed_reply_is_edited_in_place_or_arrives_whole() {
                cases::streaming::<$rig>().await
            }
            #[tokio::test]
            async fn only_the_requester_answers_an_approval() {
                cases::approval::<$rig>().await
            }
            #[tokio::test]
            async fn a_photo_and_a_document_reach_the_model() {
                cases_files::files_in::<$rig>().await
            }
            #[tokio::test]
            async fn a_file_the_agent_attaches_reaches_the_person() {
                cases_files::file_out::<$rig>().await
            }
            #[tokio::test]
            async fn a_429_with_retry_after_is_honoured() {
                cases::rate_limited::<$rig>().await
            }
            #[tokio::test]
            async fn a_person_off_the_allowlist_is_refused() {
                cases::stranger::<$rig>().await
            }
            #[tokio::test]
            async fn handoff_wraps_the_conversation() {
                cases_files::handoff::<$rig>().await
            }
        }
    };
}

conformance!(telegram, telegram_rig::TelegramRig);
conformance!(discord, discord_rig::DiscordRig);
conformance!(web, web_rig::WebRig);
conformance!(slack, slack_rig::SlackRig);

conformance!(matrix, matrix_rig::MatrixRig);
conformance!(email, email_rig::EmailRig);
conformance!(signal, signal_rig::SignalRig);
conformance!(whatsapp, whatsapp_rig::WhatsAppRig);
