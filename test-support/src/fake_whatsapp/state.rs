//! What the fake WhatsApp holds: the messages the bot sent (in order), the media on its
//! servers, the read receipts, the faults queued for the next sends, when each person last
//! wrote (the 24-hour rule), the approved templates, and the webhooks it delivered.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use serde_json::Value;

/// One message the bot sent (`POST /{phone-number-id}/messages`), as Meta took it.
#[derive(Clone, Debug)]
pub struct Sent {
    pub wamid: String,
    pub to: String,
    /// `text`, `image`, `document`, `interactive`, `template`, …
    pub kind: String,
    /// A text's body, an interactive message's body, a template's first parameter.
    pub text: String,
    /// The message it quotes (`context.message_id`).
    pub context: Option<String>,
    /// `biz_opaque_callback_data`, echoed in its statuses.
    pub callback: Option<String>,
    /// A media message's media id and file name.
    pub media_id: Option<String>,
    pub filename: Option<String>,
    /// An interactive message's reply buttons: (id, title).
    pub buttons: Vec<(String, String)>,
    /// A template's name and language code.
    pub template: Option<(String, String)>,
    pub body: Value,
    pub at: Instant,
    pub at_ms: i64,
}

/// A file on Meta's servers: uploaded by the bot, or sent by a person.
#[derive(Clone, Debug)]
pub struct Media {
    pub id: String,
    pub mime: String,
    pub name: Option<String>,
    pub bytes: Vec<u8>,
    /// Uploaded by the bot (not a person's).
    pub uploaded: bool,
}

/// A read receipt the bot sent, with or without the typing indicator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Read {
    pub wamid: String,
    pub typing: bool,
}

/// One webhook POST the fake made (or keeps making) to the daemon.
#[derive(Clone, Debug)]
pub struct Hook {
    pub id: u64,
    pub body: String,
    /// POSTs made so far, and whether one was answered 200.
    pub deliveries: u32,
    pub acked: bool,
    /// The wamids of the messages (and statuses) it carries.
    pub about: Vec<String>,
}

/// What the next send meets instead of its normal answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// HTTP 429, code 130429, with `Retry-After: secs` when given.
    RateLimited { retry_after_secs: Option<u64> },
    /// HTTP 400, code 131047: outside the 24-hour window.
    Reengagement,
    /// HTTP 401, code 190.
    InvalidToken,
    /// HTTP 400, code 100.
    InvalidParameter,
    /// The message is taken (recorded, its statuses sent) but the answer is lost: HTTP 500,
    /// code 1, as when Meta's front end fails after the send went through.
    AcceptedButLost,
}

pub struct State {
    counter: u64,
    pub sent: Vec<Sent>,
    pub media: HashMap<String, Media>,
    pub reads: Vec<Read>,
    pub faults: VecDeque<Fault>,
    /// Unix seconds each person last wrote.
    pub last_inbound: HashMap<String, i64>,
    pub enforce_window: bool,
    pub templates: HashSet<(String, String)>,
    pub hooks: Vec<Hook>,
    pub target: Option<String>,
    /// The pause between POSTs of a webhook not answered 200, and how many retries it gets
    /// (`None`: until it is).
    pub retry_delay: Duration,
    pub max_retries: Option<u32>,
    /// Send `sent` and `delivered` statuses for every accepted message.
    pub auto_status: bool,
    /// Profile names by WhatsApp id.
    pub names: HashMap<String, String>,
    /// Calls of each kind that arrived, refused or not: (call, at).
    pub calls: Vec<(String, Instant)>,
}

impl State {
    pub fn new() -> State {
        State {
            counter: 0,
            sent: Vec::new(),
            media: HashMap::new(),
            reads: Vec::new(),
            faults: VecDeque::new(),
            last_inbound: HashMap::new(),
            enforce_window: true,
            templates: HashSet::new(),
            hooks: Vec::new(),
            target: None,
            retry_delay: Duration::from_millis(300),
            max_retries: None,
            auto_status: true,
            names: HashMap::new(),
            calls: Vec::new(),
        }
    }

    /// A fresh number for ids.
    pub fn next(&mut self) -> u64 {
        self.counter += 1;
        self.counter
    }

    /// A message id in Meta's shape (`wamid.` + base64-looking text).
    pub fn new_wamid(&mut self) -> String {
        let n = self.next();
        format!("wamid.HBgLMTU1NTAwMDExMTEVAgASGBQz{n:016X}AA==")
    }

    /// A media id (digits, as Meta's are).
    pub fn new_media_id(&mut self) -> String {
        let n = self.next();
        format!("{}", 1_000_000_000_000_000u64 + n)
    }

    /// Whether a free-form message to `to` is inside the 24-hour window now.
    pub fn in_window(&self, to: &str) -> bool {
        let now = chrono::Utc::now().timestamp();
        !self.enforce_window
            || self
                .last_inbound
                .get(to)
                .is_some_and(|at| now - at < 24 * 60 * 60)
    }
}
