//! The `[telegram]` and `[discord]` sections: tokens, endpoints, who may talk to the agent
//! and how groups, guilds and shards behave.
//!
//! Kept apart from the core sections because each platform's keys read as one block and grow
//! with its adapter. Only settings live here; the adapters are `crate::adapters`.

use serde::{Deserialize, Serialize};

use super::{ConfigUrl, Secret, ShardCount};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TelegramMode {
    Polling,
    Webhook,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelegramConfig {
    /// Bot token; also read from `TELEGRAM_BOT_TOKEN`. The adapter runs when it is set.
    pub token: Option<Secret>,
    /// Bot API base (a local Bot API server, or a fake in tests).
    pub api_url: ConfigUrl,
    pub mode: TelegramMode,
    /// Sender ids allowed to talk to the agent (deny by default).
    #[serde(deserialize_with = "super::load::strings_or_numbers")]
    pub allowed_users: Vec<String>,
    /// Explicitly allow everyone (warned about at start).
    pub allow_all_users: bool,
    /// Group chats where the agent answers every message, not only mentions and replies.
    #[serde(deserialize_with = "super::load::strings_or_numbers")]
    pub free_response_chats: Vec<String>,
    /// Secret checked on the webhook's `X-Telegram-Bot-Api-Secret-Token` header.
    pub webhook_secret: Option<Secret>,
    /// Public URL registered with setWebhook in webhook mode.
    pub webhook_url: Option<ConfigUrl>,
    /// Long-poll timeout in seconds.
    pub poll_timeout_secs: u32,
    /// Pace sends within Telegram's published limits. Off only against a local fake or Bot API
    /// server (benchmarks): the pacing queue adds up to 250 ms and caps at 30 messages/s.
    pub pacing: bool,
}

impl Default for TelegramConfig {
    fn default() -> Self {
        TelegramConfig {
            token: None,
            api_url: ConfigUrl::parse("https://api.telegram.org").expect("a URL"),
            mode: TelegramMode::Polling,
            allowed_users: Vec::new(),
            allow_all_users: false,
            free_response_chats: Vec::new(),
            webhook_secret: None,
            webhook_url: None,
            poll_timeout_secs: 25,
            pacing: true,
        }
    }
}

/// Discord adapter settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DiscordConfig {
    /// Bot token; also read from `DISCORD_BOT_TOKEN`. The adapter runs when it is set.
    pub token: Option<Secret>,
    /// REST base; the gateway URL is discovered from `<api_url>/api/v10/gateway`.
    pub api_url: ConfigUrl,
    /// User ids allowed to talk to the agent (deny by default).
    #[serde(deserialize_with = "super::load::strings_or_numbers")]
    pub allowed_users: Vec<String>,
    /// Role ids whose members may talk to the agent in guild channels (DMs carry no roles).
    #[serde(deserialize_with = "super::load::strings_or_numbers")]
    pub allowed_roles: Vec<String>,
    /// Explicitly allow everyone (warned about at start).
    pub allow_all_users: bool,
    /// In guild channels, answer only when mentioned or replied to (DMs always answer).
    pub require_mention: bool,
    /// Guild channel ids where every message is answered, mention or not.
    #[serde(deserialize_with = "super::load::strings_or_numbers")]
    pub free_response_channels: Vec<String>,
    /// serenity's REST ratelimiter (buckets, 429 retries). Keep it on against real Discord;
    /// it ignores `api_url`, so a non-default `api_url` requires turning it off.
    pub ratelimiter: bool,
    /// How long to wait after a 429 whose `retry_after` could not be read.
    pub rate_limit_wait_ms: u64,
    /// Register the `/new`, `/stop`, `/status`, `/usage`, `/wrapup` slash commands when connected.
    pub register_commands: bool,
    /// A shard that shows no sign of life (no heartbeat ack, no event) for this long is
    /// restarted; about three and a half of Discord's 41.25 s heartbeat intervals.
    pub gateway_watchdog_secs: u64,
    /// Gateway shards in total (`auto` or 0: Discord's recommendation). Each shard is run by
    /// one replica at a time, held by the `role:discord-shard-<n>` lease.
    pub shards: ShardCount,
    /// At most this many shards per replica (0: no cap beyond the fair share).
    pub max_shards_per_replica: u32,
}

impl Default for DiscordConfig {
    fn default() -> Self {
        DiscordConfig {
            token: None,
            api_url: ConfigUrl::parse("https://discord.com").expect("a URL"),
            allowed_users: Vec::new(),
            allowed_roles: Vec::new(),
            allow_all_users: false,
            require_mention: true,
            free_response_channels: Vec::new(),
            ratelimiter: true,
            rate_limit_wait_ms: 2_000,
            register_commands: true,
            gateway_watchdog_secs: 150,
            shards: ShardCount::Fixed(1),
            max_shards_per_replica: 0,
        }
    }
}
