//! Telegram adapter (teloxide): long polling or webhook in, `sendMessage` out.
//!
//! `app` sees it as an [`Adapter`]: `from_config` (clients, no network; `None` without
//! `telegram.token`), `outbound` (the paced sender), `routes` (the webhook, in webhook mode)
//! and `spawn` (getMe, setMyCommands, then the poller or setWebhook, all tracked and
//! cancellable).
//!
//! Must not: log the token (teloxide's request URLs contain it, and `Bot`'s `Debug` prints it:
//! every error goes through [`redact`] and no `Bot` is ever formatted), or acknowledge an update
//! before it is in the inbox.

mod ask;
pub mod format;
pub mod inbound;
mod media;
pub mod outbound;
pub mod poller;
mod receive;
pub mod spec;
mod upload;
pub mod webhook;

#[cfg(test)]
mod inbound_tests;
#[cfg(test)]
mod media_tests;

pub use spec::SPEC;

/// Telegram's name in lanes, rows and the platform registry.
pub const TELEGRAM: crate::domain::Platform = crate::domain::Platform::named("telegram");

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Context;
use teloxide::payloads::SetWebhookSetters;
use teloxide::requests::Requester;
use teloxide::types::BotCommand;
use teloxide::Bot;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Adapter, Edge};
use crate::config::{Config, TelegramConfig, TelegramMode};
use crate::delivery::Outbound;
use crate::domain::Platform;
use crate::tasks::Backoff;
use inbound::BotIdentity;
use outbound::TelegramOutbound;
use receive::Receiver;

pub struct TelegramAdapter {
    config: TelegramConfig,
    token: String,
    /// Short requests (getMe, setMyCommands, setWebhook).
    bot: Bot,
    /// Long polls: a client timeout above `poll_timeout_secs`.
    poll_bot: Bot,
    outbound: Arc<TelegramOutbound>,
    /// Filled once getMe answered; the webhook waits for it.
    receiver: Arc<OnceLock<Arc<Receiver>>>,
}

/// The commands shown in Telegram's menu (`setMyCommands`); the core handles all but
/// `/wrapup`, which belongs to the handoff hook.
pub const COMMANDS: &[(&str, &str)] = &[
    ("start", "Say hello and show what I can do"),
    ("new", "Start a fresh session"),
    ("stop", "Cancel the answer in progress"),
    ("status", "Show this conversation's state"),
    ("usage", "Show what you have spent"),
    ("help", "How to talk to me"),
    (
        "agent",
        "List the agents you can talk to, or switch: /agent NAME",
    ),
    ("wrapup", "Write a handoff note for the next session"),
];

impl TelegramAdapter {
    /// Builds the client from config (no network yet).
    fn new(config: &TelegramConfig) -> anyhow::Result<TelegramAdapter> {
        let token = config
            .token
            .as_ref()
            .context("telegram.token is not set")?
            .expose()
            .to_string();
        let api_url = url::Url::parse(config.api_url.as_str().trim_end_matches('/'))
            .context("telegram.api_url is not a URL")?;
        if config.mode == TelegramMode::Webhook {
            anyhow::ensure!(
                config.webhook_url.is_some(),
                "telegram.mode = \"webhook\" needs telegram.webhook_url"
            );
            anyhow::ensure!(
                config
                    .webhook_secret
                    .as_ref()
                    .is_some_and(|s| !s.expose().is_empty()),
                "telegram.mode = \"webhook\" needs telegram.webhook_secret"
            );
        }
        let client = |timeout: Duration| {
            teloxide::net::default_reqwest_settings()
                .timeout(timeout)
                .build()
                .context("building the Telegram HTTP client")
        };
        let bot = Bot::with_client(token.clone(), client(Duration::from_secs(30))?)
            .set_api_url(api_url.clone());
        let poll_timeout = Duration::from_secs(u64::from(config.poll_timeout_secs) + 15);
        let poll_bot = Bot::with_client(token.clone(), client(poll_timeout)?).set_api_url(api_url);
        if !config.pacing {
            tracing::warn!("telegram.pacing is off: sends are not paced within Telegram's limits");
        }
        let outbound = TelegramOutbound::new(bot.clone(), token.clone());
        Ok(TelegramAdapter {
            config: config.clone(),
            token,
            bot,
            poll_bot,
            outbound: Arc::new(outbound),
            receiver: Arc::new(OnceLock::new()),
        })
    }
}

impl Adapter for TelegramAdapter {
    fn from_config(config: &Config) -> anyhow::Result<Option<TelegramAdapter>> {
        if config.telegram.token.is_none() {
            return Ok(None);
        }
        TelegramAdapter::new(&config.telegram)
            .context("telegram adapter")
            .map(Some)
    }

    fn platform(&self) -> Platform {
        Platform::named("telegram")
    }

    fn outbound(&self) -> Arc<dyn Outbound> {
        self.outbound.clone()
    }

    fn pace(&self, config: &Config) -> Option<crate::delivery::pace::Limits> {
        config
            .telegram
            .pacing
            .then(crate::delivery::pace::Limits::telegram)
    }

    /// The webhook, in webhook mode.
    fn routes(&self) -> Option<axum::Router> {
        if self.config.mode != TelegramMode::Webhook {
            return None;
        }
        let secret = self.config.webhook_secret.as_ref()?.expose();
        let path = webhook::local_path(self.config.webhook_url.as_ref()?.url());
        tracing::info!(path = %path, "telegram webhook updates are received on this local path");
        Some(webhook::routes(&path, secret, self.receiver.clone()))
    }

    /// Starts receiving (poller or webhook registration) as tracked, cancellable tasks.
    fn spawn(self: Box<Self>, edge: Edge, tracker: &TaskTracker, cancel: CancellationToken) {
        let this = *self;
        let start = Start {
            config: this.config,
            token: this.token,
            bot: this.bot,
            poll_bot: this.poll_bot,
            receiver: this.receiver,
            edge,
        };
        tracker.spawn(start.run(cancel));
    }
}

/// The network side of starting: identify, register commands, then receive.
struct Start {
    config: TelegramConfig,
    token: String,
    bot: Bot,
    poll_bot: Bot,
    receiver: Arc<OnceLock<Arc<Receiver>>>,
    edge: Edge,
}

impl Start {
    async fn run(self, cancel: CancellationToken) {
        let Some(me) = self.identify(&cancel).await else {
            return;
        };
        tracing::info!(bot = %me.username, mode = ?self.config.mode, "telegram adapter starting");
        let receiver = Arc::new(Receiver {
            ingest: self.edge.ingest.clone(),
            approvals: self.edge.approvals.clone(),
            bot: self.poll_bot.clone(),
            token: self.token.clone(),
            me,
            free_response_chats: self
                .config
                .free_response_chats
                .iter()
                .cloned()
                .collect::<HashSet<_>>(),
        });
        let _ = self.receiver.set(receiver.clone());
        self.register_commands().await;
        match self.config.mode {
            TelegramMode::Polling => {
                let deps = &self.edge;
                let poller = poller::Poller {
                    bot: self.poll_bot.clone(),
                    token: self.token.clone(),
                    receiver,
                    store: deps.store.clone(),
                    holder: format!(
                        "{}/telegram-{}",
                        deps.replica_id,
                        uuid::Uuid::new_v4().simple()
                    ),
                    timeout_secs: self.config.poll_timeout_secs,
                    lease_ttl: crate::store::ROLE_LEASE_TTL,
                    renew_every: crate::store::ROLE_RENEW_EVERY,
                };
                poller.run(cancel).await;
            }
            TelegramMode::Webhook => self.set_webhook(&cancel).await,
        }
    }

    /// getMe, retried until it answers: group rules need the bot's username and id.
    async fn identify(&self, cancel: &CancellationToken) -> Option<BotIdentity> {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        loop {
            match self.bot.get_me().await {
                Ok(me) => return Some(BotIdentity::from(&me)),
                Err(e) => {
                    tracing::warn!(error = %redact(&e, &self.token), "Telegram getMe failed; retrying")
                }
            }
            backoff.wait(cancel).await.ok()?;
        }
    }

    /// Best effort: the menu is a convenience, commands work without it.
    async fn register_commands(&self) {
        let commands = COMMANDS
            .iter()
            .map(|(c, d)| BotCommand::new(*c, *d))
            .collect::<Vec<_>>();
        if let Err(e) = self.bot.set_my_commands(commands).await {
            tracing::warn!(error = %redact(&e, &self.token), "Telegram setMyCommands failed");
        }
    }

    async fn set_webhook(&self, cancel: &CancellationToken) {
        let (Some(url), Some(secret)) = (&self.config.webhook_url, &self.config.webhook_secret)
        else {
            return;
        };
        let url = url.url().clone();
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        loop {
            let req = self
                .bot
                .set_webhook(url.clone())
                .secret_token(secret.expose().to_string())
                .allowed_updates(vec![
                    teloxide::types::AllowedUpdate::Message,
                    teloxide::types::AllowedUpdate::EditedMessage,
                    teloxide::types::AllowedUpdate::CallbackQuery,
                ]);
            match req.await {
                Ok(_) => {
                    tracing::info!(url = %url, "telegram webhook set");
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %redact(&e, &self.token), "Telegram setWebhook failed; retrying")
                }
            }
            if backoff.wait(cancel).await.is_err() {
                return;
            }
        }
    }
}

/// An error's text with the bot token cut out, whatever teloxide put in it.
pub fn redact(e: &impl std::fmt::Display, token: &str) -> String {
    let text = e.to_string();
    if token.is_empty() {
        return text;
    }
    text.replace(token, "<token>")
}
