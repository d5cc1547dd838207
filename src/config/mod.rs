//! Typed configuration: defaults → TOML file → `HERALD_<SECTION>__<KEY>` environment.
//!
//! Loaded and validated once at start; nothing that guards safety is re-read from the
//! environment later. Every key has a default so that `herald serve` runs with no file at all.
//! `config/herald.example.toml` documents every key and a test parses it.

mod address;
mod agent;
mod agents;
mod api;
mod budget;
mod eval;
mod handoff;
mod hooks;
mod llm;
mod load;
mod mcp;
mod media;
mod memory;
mod mid_turn;
mod platforms;
mod providers;
mod queues;
pub mod registry;
mod reload;
mod secret;
mod shards;
mod streaming;
mod tools;
mod validate;
mod voice;
mod web_tools;

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use address::ConfigUrl;
pub use agent::{AgentConfig, HintEntry, HintMode, HintTable, PlatformHint};
pub use agents::{
    agent_dir, check_agents, AgentBudget, AgentSpec, Binding, ToolFilter, DEFAULT_AGENT,
};
pub use api::{link_api_keys, ApiConfig, ApiKey, ApiKeyConfig};
pub use budget::{to_nanos, BudgetConfig, PriceConfig, NANOS_PER_UNIT};
pub use eval::EvalConfig;
pub use handoff::HandoffConfig;
pub use hooks::{check_hooks, job_name as hook_job, FilterRule, HookMode, HookSpec, SignatureKind};
pub use llm::LlmConfig;
pub use load::{from_toml, load, ConfigError, LoadOptions, CLI_ENV};
pub use mcp::{valid_server_name, McpConfig, McpServer, RequireApproval};
pub use media::MediaConfig;
pub use memory::{
    check_people, person_key, safe_segment, MemoryConfig, MemoryProviderConfig, PeopleError, Person,
};
pub use mid_turn::MidTurn;
pub use platforms::{DiscordConfig, TelegramConfig, TelegramMode};
pub use providers::{Endpoint, Preset, ProviderKind, Transport, WindowSource, PRESETS};
pub use queues::{InboxConfig, OutboxConfig};
pub use registry::{spec, specs, Access, Admit, Capabilities, FileAuth, PlatformSpec, Section};
pub use reload::ReloadConfig;
pub use secret::{comparing_secrets, redact_url, same_secret, Secret};
pub use shards::ShardCount;
pub use streaming::{StreamChats, StreamingConfig, MIN_EDIT_INTERVAL_MS};
pub use tools::{ApprovalsConfig, SendRoute, ToolsConfig, DEFAULT_HARDLINE};
pub use validate::validate;
pub use voice::{ReplyWithVoice, VoiceConfig};
pub use web_tools::{SearchProvider, WebToolsConfig};

/// The whole configuration. Unknown fields are refused section by section; a table that is no
/// core section is kept in `sections` for the platform that owns it (`registry`), and one that
/// no platform owns is refused by `validate`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    pub server: ServerConfig,
    pub store: StoreConfig,
    pub llm: LlmConfig,
    pub agent: AgentConfig,
    pub context: ContextConfig,
    pub lanes: LanesConfig,
    pub inbox: InboxConfig,
    pub outbox: OutboxConfig,
    pub web: WebConfig,
    pub telegram: TelegramConfig,
    pub discord: DiscordConfig,
    pub pairing: PairingConfig,
    pub handoff: HandoffConfig,
    pub cron: CronConfig,
    pub memory: MemoryConfig,
    /// Named people and the sender identities linked to each (one memory across platforms).
    pub people: Vec<Person>,
    pub log: LogConfig,
    pub telemetry: TelemetryConfig,
    pub tools: ToolsConfig,
    pub approvals: ApprovalsConfig,
    pub streaming: StreamingConfig,
    pub mcp: McpConfig,
    pub media: MediaConfig,
    /// The OpenAI-compatible API (`api.rs`).
    pub api: ApiConfig,
    pub budget: BudgetConfig,
    /// The built-in web tools' limits and search provider (`web_tools.rs`).
    pub web_tools: WebToolsConfig,
    /// Spoken replies through a speech API (`voice.rs`).
    pub voice: VoiceConfig,
    /// `herald eval`'s judge model (`eval.rs`).
    pub eval: EvalConfig,
    /// Inbound webhooks, one `[[hooks]]` table each (`hooks.rs`, `crate::webhooks`).
    pub hooks: Vec<HookSpec>,
    /// How a running daemon takes a changed configuration (`reload.rs`, `crate::reload`).
    pub reload: ReloadConfig,
    /// More agents beside the default one (`agents.rs`, `crate::agent::roster`).
    pub agents: Vec<AgentSpec>,
    /// Which conversations go to which agent (`agents.rs`).
    pub bindings: Vec<Binding>,
    /// The tables platforms own (`[slack]`), read by their adapters ([`Config::section`]).
    #[serde(flatten)]
    pub sections: std::collections::BTreeMap<String, figment::value::Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Address of the HTTP server (web chat, API, health, metrics).
    pub listen: SocketAddr,
    /// Folder for the SQLite database and other local state.
    pub data_dir: PathBuf,
    /// How long in-flight turns may run after SIGTERM before their leases are released.
    pub shutdown_grace_secs: u64,
    /// Name of this replica in leases and logs; a random one is made when unset.
    pub replica_id: Option<String>,
    /// A connection must deliver a complete request head within this many seconds: from
    /// accept for its first request, from its first byte for a later one. Slow-header clients
    /// (slowloris) are closed after it.
    pub header_timeout_secs: u64,
    /// A kept-alive connection with no request in flight and no byte moving either way is
    /// closed after this many seconds (also a client that stops reading its answer).
    pub idle_timeout_secs: u64,
    /// A request's body must arrive within this many seconds of its head; a slower one is
    /// answered 408 (or closed). While it is still coming the request may be closed for a
    /// newcomer at the connection cap, like an idle connection.
    pub body_timeout_secs: u64,
    /// Connections open at once. At the cap a new connection closes the one that has waited
    /// longest without a request in flight; when every one has a request running, new ones
    /// wait in the kernel's backlog. Kept well under the open-file limit so the store, model
    /// and platform clients always have descriptors.
    pub max_connections: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            data_dir: PathBuf::from("./data"),
            shutdown_grace_secs: 20,
            replica_id: None,
            header_timeout_secs: 5,
            idle_timeout_secs: 60,
            body_timeout_secs: 30,
            max_connections: 1024,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// `sqlite://path` or `postgres://…`; default `sqlite://<data_dir>/herald.db`.
    pub url: Option<Secret>,
    pub max_connections: u32,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            url: None,
            max_connections: 8,
        }
    }
}

/// Context budget and compaction (`[context]`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ContextConfig {
    /// Compact before a turn when the projected prompt passes this share of the window.
    pub threshold: f64,
    /// Tool results longer than this many characters reach the model as a preview, the size,
    /// and how to page the whole (kept in the store) back in.
    pub spill_chars: usize,
    /// Tokens of newest messages kept verbatim after a compaction (at most half the window).
    pub tail_tokens: usize,
    /// Between the tool calls of one long turn, compact the in-flight request when its
    /// estimate passes this share of the window (the opening request and whole tool groups
    /// are kept).
    pub in_turn_threshold: f64,
}

impl Default for ContextConfig {
    fn default() -> Self {
        ContextConfig {
            threshold: 0.75,
            spill_chars: 8_000,
            tail_tokens: 6_000,
            in_turn_threshold: 0.85,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LanesConfig {
    /// Lane workers alive at once; further lanes wait for a slot.
    pub max_workers: usize,
    /// A worker with nothing to do for this long releases its lease and exits.
    pub idle_secs: u64,
    /// Turn lease time to live; renewed every `heartbeat_secs`.
    pub lease_ttl_secs: u64,
    pub heartbeat_secs: u64,
    /// Deprecated alias of `inbox.max_attempts`: when set, it is used in its place (folded in
    /// at load, so the loaded config holds it unset).
    pub max_attempts: Option<i64>,
    /// How often the store is scanned for pending work (crash leftovers, other replicas).
    pub rescan_secs: u64,
    /// A message that arrives mid-turn: `steer` (joins the turn), `queue`, `interrupt`.
    pub mid_turn: MidTurn,
}

impl Default for LanesConfig {
    fn default() -> Self {
        LanesConfig {
            max_workers: 256,
            idle_secs: 60,
            lease_ttl_secs: 30,
            heartbeat_secs: 10,
            max_attempts: None,
            rescan_secs: 5,
            mid_turn: MidTurn::Steer,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebConfig {
    /// The web chat: the page at `/` and `POST /api/v1/chat`. Off, those routes do not exist;
    /// the admin API stays (behind the same access rule).
    pub enabled: bool,
    /// Bearer token for the API and the admin routes; required when `server.listen` is not
    /// loopback, whatever `enabled` says. When set, every API request must carry it.
    pub token: Option<Secret>,
    /// Whether a request from 127.0.0.1/::1 without a token is the operator. Unset means: yes
    /// when `server.listen` is loopback. Even then a request that carries a proxy header
    /// (`Forwarded`, `X-Forwarded-For`, `X-Real-IP`) is not trusted: behind a reverse proxy on
    /// the same host every client would otherwise look local.
    pub trust_loopback: Option<bool>,
    /// Longest accepted message, in characters.
    pub max_message_chars: usize,
    /// How long `POST /api/v1/chat` waits for the reply before answering 202.
    pub reply_timeout_secs: u64,
    /// Requests in flight at once per web credential (the bearer token, or the trusted local
    /// operator); one more is answered 429 with `Retry-After`. An open page holds one (its
    /// live view) and one per message being answered.
    pub max_concurrent_requests: usize,
}

impl Default for WebConfig {
    fn default() -> Self {
        WebConfig {
            enabled: true,
            token: None,
            trust_loopback: None,
            max_message_chars: 32_000,
            reply_timeout_secs: 330,
            max_concurrent_requests: 32,
        }
    }
}

/// Pairing: unknown users who write to the bot in a private chat get a one-time code that an
/// operator approves (`herald pairing approve <platform> <code>`). Allowlists stay the base.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PairingConfig {
    pub enabled: bool,
    /// How long a code stays valid.
    pub code_ttl_secs: u64,
    /// A sender who keeps writing is reminded of their code at most this often.
    pub remind_every_secs: u64,
    /// Codes pending at once per platform; at the cap a new sender's code replaces the
    /// platform's oldest pending one (logged), so onboarding never stops. 0: no codes.
    pub max_pending: i64,
}

impl Default for PairingConfig {
    fn default() -> Self {
        PairingConfig {
            enabled: true,
            code_ttl_secs: 3600,
            remind_every_secs: 600,
            max_pending: 20,
        }
    }
}

/// Scheduled agent runs (`[[cron.jobs]]`); jobs added with `herald cron add` live in the store.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CronConfig {
    /// Run the scheduler in this process (every replica may: each fire is claimed once).
    pub enabled: bool,
    pub jobs: Vec<crate::domain::cron::JobSpec>,
    /// The shortest interval between runs of a job made from a conversation (the `cron`
    /// tool); config and CLI jobs keep the schedule's own floor.
    pub chat_min_interval_secs: u64,
}

impl Default for CronConfig {
    fn default() -> Self {
        CronConfig {
            enabled: true,
            jobs: Vec::new(),
            chat_min_interval_secs: 300,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Human,
    Json,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    pub format: LogFormat,
    /// A tracing filter, e.g. `info,herald=debug`; `RUST_LOG` wins when set.
    pub level: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            format: LogFormat::Human,
            level: "info".into(),
        }
    }
}

/// OpenTelemetry traces; off unless an endpoint is set.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// Base URL of an OTLP/HTTP collector, e.g. `http://127.0.0.1:4318`; traces go to
    /// `<endpoint>/v1/traces` as protobuf.
    pub otlp_endpoint: Option<ConfigUrl>,
    /// `service.name` of the exported spans.
    pub service_name: String,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            otlp_endpoint: None,
            service_name: "herald".into(),
        }
    }
}

impl Config {
    pub fn store_url(&self) -> String {
        match &self.store.url {
            Some(u) => u.expose().to_string(),
            None => format!(
                "sqlite://{}",
                self.server.data_dir.join("herald.db").display()
            ),
        }
    }

    /// The memory folder name of a sender (`None` for scheduled runs); see [`person_key`].
    pub fn person(&self, platform: &str, sender: &str) -> Option<String> {
        person_key(&self.people, platform, sender)
    }

    /// The provider actually used after `auto` is resolved.
    pub fn provider_kind(&self) -> ProviderKind {
        match self.llm.provider {
            ProviderKind::Auto if self.llm.base_url.is_some() || self.llm.model.is_some() => {
                ProviderKind::Openai
            }
            ProviderKind::Auto => ProviderKind::None,
            other => other,
        }
    }

    /// The wire format of the main provider (after `auto` is resolved).
    pub fn transport(&self) -> Transport {
        self.provider_kind().transport()
    }
}
