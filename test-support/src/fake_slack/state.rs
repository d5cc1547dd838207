//! The fake workspace in memory: channels with their messages, people, files, tokens, queued
//! faults, the envelope queue and the records. One mutex guards it all, so an answer and the
//! record of it can never disagree.
//!
//! Must not: await while the lock is held (callers take it, change what they need, and let go).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::envelopes::Envelope;
use super::events_api::Targets;
use super::records::Records;
use super::socket::Conn;
use super::{FakeSlackConfig, Fault, DEFAULT_SCOPES};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Public,
    Private,
    Im,
    Mpim,
}

impl Kind {
    fn of(id: &str, name: &str) -> Kind {
        match id.chars().next() {
            Some('D') => Kind::Im,
            Some('G') if name.starts_with("mpdm-") => Kind::Mpim,
            Some('G') => Kind::Private,
            _ => Kind::Public,
        }
    }

    /// `channel_type` of a message event.
    pub fn channel_type(self) -> &'static str {
        match self {
            Kind::Public => "channel",
            Kind::Private => "group",
            Kind::Im => "im",
            Kind::Mpim => "mpim",
        }
    }

    /// The scope prefix of this kind (`channels:history`, `im:read`, …).
    pub fn scope_family(self) -> &'static str {
        match self {
            Kind::Public => "channels",
            Kind::Private => "groups",
            Kind::Im => "im",
            Kind::Mpim => "mpim",
        }
    }

    /// The event subscription that delivers its messages.
    pub fn subscription(self) -> &'static str {
        match self {
            Kind::Public => "message.channels",
            Kind::Private => "message.groups",
            Kind::Im => "message.im",
            Kind::Mpim => "message.mpim",
        }
    }
}

/// One message as the channel keeps it (a person's, another bot's or ours).
#[derive(Clone, Debug, Default)]
pub(crate) struct Msg {
    pub ts: String,
    pub thread_ts: Option<String>,
    pub user: Option<String>,
    pub bot_id: Option<String>,
    pub app_id: Option<String>,
    pub username: Option<String>,
    pub subtype: Option<String>,
    pub text: String,
    pub blocks: Option<Value>,
    pub metadata: Option<Value>,
    pub files: Vec<Value>,
    pub upload: bool,
    pub client_msg_id: Option<String>,
    pub edited: Option<(String, String)>,
    pub deleted: bool,
    pub reply_broadcast: bool,
}

pub(crate) struct Channel {
    pub id: String,
    pub name: String,
    pub kind: Kind,
    /// The other person of a direct message.
    pub user: Option<String>,
    pub bot_member: bool,
    pub created: i64,
    pub messages: Vec<Msg>,
}

pub(crate) struct User {
    pub name: String,
    pub real_name: String,
    pub is_bot: bool,
}

/// A file on the fake's private host: shared by a person, or uploaded by the bot.
#[derive(Clone, Debug)]
pub(crate) struct StoredFile {
    pub id: String,
    pub name: String,
    pub title: String,
    pub mimetype: String,
    pub bytes: Vec<u8>,
    pub user: String,
    pub created: i64,
}

/// An upload slot given by `files.getUploadURLExternal`, filled by a POST to its URL.
pub(crate) struct PendingUpload {
    pub file_id: String,
    pub filename: String,
    pub length: usize,
    pub bytes: Option<Vec<u8>>,
    pub content_type: Option<String>,
}

pub(crate) struct State {
    last_ts_micros: u64,
    next_id: u64,
    pub channels: BTreeMap<String, Channel>,
    pub users: BTreeMap<String, User>,
    pub files: HashMap<String, StoredFile>,
    /// By the upload URL's token.
    pub uploads: HashMap<String, PendingUpload>,
    pub revoked: HashSet<String>,
    pub scopes: Vec<String>,
    /// Tickets handed out by `apps.connections.open`, each good for one connection.
    pub tickets: HashSet<String>,
    pub faults: HashMap<String, VecDeque<Fault>>,
    pub subscriptions: HashSet<String>,
    pub echo_own: bool,
    pub ack_timeout: Duration,
    pub max_retries: Option<u32>,
    pub conns: BTreeMap<u64, Conn>,
    /// Round-robin cursor over live connections.
    pub rr: usize,
    pub envelopes: Vec<Envelope>,
    pub targets: Targets,
    pub rec: Records,
}

impl State {
    pub fn new(cfg: &FakeSlackConfig) -> State {
        let mut users = BTreeMap::new();
        users.insert(
            cfg.bot_user_id.clone(),
            User {
                name: "herald".into(),
                real_name: "Herald".into(),
                is_bot: true,
            },
        );
        State {
            last_ts_micros: 0,
            next_id: 1,
            channels: BTreeMap::new(),
            users,
            files: HashMap::new(),
            uploads: HashMap::new(),
            revoked: HashSet::new(),
            scopes: DEFAULT_SCOPES.iter().map(|s| s.to_string()).collect(),
            tickets: HashSet::new(),
            faults: HashMap::new(),
            subscriptions: [
                "message.im",
                "message.channels",
                "message.groups",
                "message.mpim",
                "app_mention",
            ]
            .into_iter()
            .map(String::from)
            .collect(),
            echo_own: true,
            ack_timeout: Duration::from_secs(3),
            max_retries: Some(3),
            conns: BTreeMap::new(),
            rr: 0,
            envelopes: Vec::new(),
            targets: Targets::default(),
            rec: Records::default(),
        }
    }

    /// A message timestamp: wall-clock microseconds, strictly increasing, `secs.micros`.
    pub fn next_ts(&mut self) -> String {
        let now = chrono::Utc::now().timestamp_micros().max(0) as u64;
        self.last_ts_micros = now.max(self.last_ts_micros + 1);
        format!(
            "{}.{:06}",
            self.last_ts_micros / 1_000_000,
            self.last_ts_micros % 1_000_000
        )
    }

    /// A Slack-looking id: `prefix` + 10 upper-case base-36 digits.
    pub fn new_id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        let mut n = self.next_id + 36u64.pow(8);
        let mut digits = Vec::new();
        while n > 0 {
            digits.push(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"[(n % 36) as usize]);
            n /= 36;
        }
        while digits.len() < 10 {
            digits.push(b'0');
        }
        digits.reverse();
        format!("{prefix}{}", String::from_utf8_lossy(&digits))
    }

    pub fn ensure_channel(&mut self, id: &str, name: Option<&str>) -> &mut Channel {
        let ch = self.channels.entry(id.to_string()).or_insert_with(|| {
            let name = name.unwrap_or(id).to_string();
            Channel {
                id: id.to_string(),
                kind: Kind::of(id, &name),
                name,
                user: None,
                bot_member: true,
                created: chrono::Utc::now().timestamp(),
                messages: Vec::new(),
            }
        });
        if let Some(n) = name {
            ch.name = n.to_string();
        }
        ch
    }

    pub fn dm_channel(&mut self, user: &str) -> String {
        self.ensure_user(user);
        let rest = match user.chars().next() {
            Some('U' | 'W') => &user[1..],
            _ => user,
        };
        let id = format!("D{rest}");
        self.ensure_channel(&id, None).user = Some(user.to_string());
        id
    }

    pub fn ensure_user(&mut self, id: &str) {
        self.users.entry(id.to_string()).or_insert_with(|| User {
            name: format!("user-{}", id.to_lowercase()),
            real_name: format!("User {id}"),
            is_bot: false,
        });
    }

    pub fn set_user(&mut self, id: &str, name: &str, real_name: &str) {
        self.ensure_user(id);
        let u = self.users.get_mut(id).expect("just added");
        u.name = name.to_string();
        u.real_name = real_name.to_string();
    }

    pub fn user_name(&self, id: &str) -> String {
        self.users
            .get(id)
            .map(|u| u.name.clone())
            .unwrap_or_else(|| format!("user-{}", id.to_lowercase()))
    }

    pub fn find_msg(&self, channel: &str, ts: &str) -> Option<&Msg> {
        let ch = self.channels.get(channel)?;
        ch.messages.iter().find(|m| m.ts == ts && !m.deleted)
    }

    pub fn find_msg_mut(&mut self, channel: &str, ts: &str) -> Option<&mut Msg> {
        let ch = self.channels.get_mut(channel)?;
        ch.messages.iter_mut().find(|m| m.ts == ts && !m.deleted)
    }

    /// A message as `conversations.history` / `replies` show it: thread parents carry their
    /// reply counts, replies their parent's author; `metadata` only when asked for.
    pub fn render(&self, channel: &str, m: &Msg, with_metadata: bool, team: &str) -> Value {
        let mut o = Map::new();
        o.insert("type".into(), json!("message"));
        if let Some(s) = &m.subtype {
            o.insert("subtype".into(), json!(s));
        }
        o.insert("ts".into(), json!(m.ts));
        for (k, v) in [
            ("user", &m.user),
            ("bot_id", &m.bot_id),
            ("app_id", &m.app_id),
            ("username", &m.username),
            ("client_msg_id", &m.client_msg_id),
        ] {
            if let Some(v) = v {
                o.insert(k.into(), json!(v));
            }
        }
        o.insert("text".into(), json!(m.text));
        o.insert("team".into(), json!(team));
        if let Some(b) = &m.blocks {
            o.insert("blocks".into(), b.clone());
        }
        if !m.files.is_empty() {
            o.insert("files".into(), json!(m.files));
            o.insert("upload".into(), json!(m.upload));
            o.insert("display_as_bot".into(), json!(false));
        }
        if let Some((user, ts)) = &m.edited {
            o.insert("edited".into(), json!({"user": user, "ts": ts}));
        }
        if with_metadata {
            if let Some(md) = &m.metadata {
                o.insert("metadata".into(), md.clone());
            }
        }
        let replies: Vec<&Msg> = self
            .channels
            .get(channel)
            .map(|c| {
                c.messages
                    .iter()
                    .filter(|r| !r.deleted && r.ts != m.ts)
                    .filter(|r| r.thread_ts.as_deref() == Some(m.ts.as_str()))
                    .collect()
            })
            .unwrap_or_default();
        match &m.thread_ts {
            Some(parent) if *parent != m.ts => {
                o.insert("thread_ts".into(), json!(parent));
                let author = self.find_msg(channel, parent).and_then(|p| p.user.clone());
                if let Some(a) = author {
                    o.insert("parent_user_id".into(), json!(a));
                }
            }
            _ if !replies.is_empty() => {
                let mut users: Vec<String> = Vec::new();
                for r in &replies {
                    if let Some(u) = &r.user {
                        if !users.contains(u) {
                            users.push(u.clone());
                        }
                    }
                }
                o.insert("thread_ts".into(), json!(m.ts));
                o.insert("reply_count".into(), json!(replies.len()));
                o.insert("reply_users_count".into(), json!(users.len()));
                o.insert("reply_users".into(), json!(users));
                o.insert(
                    "latest_reply".into(),
                    json!(replies.last().map(|r| r.ts.clone())),
                );
                o.insert("is_locked".into(), json!(false));
                o.insert("subscribed".into(), json!(false));
            }
            _ => {}
        }
        Value::Object(o)
    }

    /// Whether the app hears `event` at all (its subscriptions).
    pub fn subscribed(&self, event: &str) -> bool {
        self.subscriptions.contains(event)
    }

    /// Monotonic instant and wall-clock epoch milliseconds of a record.
    pub fn stamp() -> (Instant, i64) {
        (Instant::now(), chrono::Utc::now().timestamp_millis())
    }
}
