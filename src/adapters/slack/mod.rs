//! Slack adapter: Socket Mode (default) or the Events API in, the Web API out.
//!
//! `app` sees it as an [`Adapter`]: `from_config` (clients, no network; `None` without
//! `slack.bot_token`), `outbound` (chat.postMessage / chat.update / chat.delete and the file
//! upload), `routes` (the Events API's signed routes, in events mode) and `spawn` (auth.test,
//! then the Socket Mode connection, tracked and cancellable).
//!
//! Slack's types are slack-morphism's models (events, Block Kit, Web API answers); its HTTP
//! client stays off, the Web API goes through our reqwest (`api.rs`) and the socket through
//! tokio-tungstenite (`socket.rs`).
//!
//! Must not: log a token, the signing secret, a socket URL or a payload; acknowledge an
//! envelope or answer 200 before the event is in the inbox.

mod api;
mod ask;
pub mod config;
mod doctor;
mod events;
mod files_out;
mod history;
pub mod inbound;
pub mod interactions;
pub mod mrkdwn;
mod outbound;
mod receive;
mod signature;
mod socket;
pub mod spec;

#[cfg(test)]
mod inbound_tests;

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Context;
use slack_morphism::api::{SlackApiAppsConnectionOpenResponse, SlackApiAuthTestResponse};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Adapter, Edge};
use crate::config::Config;
use crate::delivery::Outbound;
use crate::domain::Platform;
use crate::tasks::Backoff;
use api::SlackApi;
use config::{SlackConfig, SlackMode};
use inbound::BotIdentity;
use outbound::SlackOutbound;
use receive::Receiver;

pub use doctor::{doctor, Check, BOT_SCOPES};
pub use spec::SPEC;

pub const SLACK: Platform = Platform::named("slack");

pub struct SlackAdapter {
    config: SlackConfig,
    api: SlackApi,
    outbound: Arc<SlackOutbound>,
    /// Filled once auth.test answered; the Events API routes wait for it.
    receiver: Arc<OnceLock<Arc<Receiver>>>,
}

impl SlackAdapter {
    /// Builds the clients from the section (no network yet).
    pub fn new(config: SlackConfig) -> anyhow::Result<SlackAdapter> {
        config.check()?;
        let api = SlackApi::new(config.api_url.as_str())?;
        if config.allow_all_users {
            tracing::warn!(
                "slack.allow_all_users is on: everyone in the workspace can talk to the agent"
            );
        }
        let outbound = SlackOutbound::new(api.clone(), config.bot().to_string());
        Ok(SlackAdapter {
            config,
            api,
            outbound: Arc::new(outbound),
            receiver: Arc::new(OnceLock::new()),
        })
    }
}

impl Adapter for SlackAdapter {
    fn from_config(config: &Config) -> anyhow::Result<Option<SlackAdapter>> {
        let Some(section) = config.section::<SlackConfig>("slack")? else {
            return Ok(None);
        };
        if section.bot_token.is_none() {
            return Ok(None);
        }
        SlackAdapter::new(section)
            .context("slack adapter")
            .map(Some)
    }

    fn platform(&self) -> Platform {
        SLACK
    }

    fn outbound(&self) -> Arc<dyn Outbound> {
        self.outbound.clone()
    }

    fn pace(&self, _config: &Config) -> Option<crate::delivery::pace::Limits> {
        self.config.pacing.then(spec::limits)
    }

    /// The tokens tried once before ready: a token Slack refuses stops the start naming its key.
    fn preflight(&self) -> Option<futures::future::BoxFuture<'static, Result<(), String>>> {
        let api = self.api.clone();
        let bot = self.config.bot().to_string();
        let app = (self.config.mode == SlackMode::Socket).then(|| self.config.app().to_string());
        Some(Box::pin(async move {
            let refused = |key: &str, e: &api::ApiError| {
                format!("{key} was refused by Slack ({e}); replace it (herald doctor checks it)")
            };
            match api
                .form::<SlackApiAuthTestResponse>("auth.test", &bot, &[])
                .await
            {
                Err(e) if e.is_auth() => return Err(refused("slack.bot_token", &e)),
                Err(e) => {
                    tracing::warn!(error = %e, "slack auth.test failed at start; the adapter retries")
                }
                Ok(_) => {}
            }
            if let Some(app) = app {
                let opened = api
                    .form::<SlackApiAppsConnectionOpenResponse>("apps.connections.open", &app, &[])
                    .await;
                match opened {
                    Err(e) if e.is_auth() => return Err(refused("slack.app_token", &e)),
                    Err(e) => {
                        tracing::warn!(error = %e, "slack apps.connections.open failed at start; the adapter retries")
                    }
                    Ok(_) => {}
                }
            }
            Ok(())
        }))
    }

    /// The Events API routes, in events mode.
    fn routes(&self) -> Option<axum::Router> {
        if self.config.mode != SlackMode::Events {
            return None;
        }
        let secret = self.config.signing_secret.as_ref()?.expose();
        Some(events::routes(secret, self.receiver.clone()))
    }

    fn spawn(self: Box<Self>, edge: Edge, tracker: &TaskTracker, cancel: CancellationToken) {
        let this = *self;
        let start = Start {
            config: this.config,
            api: this.api,
            receiver: this.receiver,
            edge,
        };
        tracker.spawn(start.run(cancel));
    }
}

/// The network side of starting: identify, then receive.
struct Start {
    config: SlackConfig,
    api: SlackApi,
    receiver: Arc<OnceLock<Arc<Receiver>>>,
    edge: Edge,
}

impl Start {
    async fn run(self, cancel: CancellationToken) {
        let Some(me) = self.identify(&cancel).await else {
            return;
        };
        tracing::info!(bot_user = %me.user_id, mode = ?self.config.mode, "slack adapter starting");
        let receiver = Arc::new(Receiver {
            ingest: self.edge.ingest.clone(),
            approvals: self.edge.approvals.clone(),
            api: self.api.clone(),
            bot_token: self.config.bot().to_string(),
            me,
            require_mention: self.config.require_mention,
            free_response_channels: self
                .config
                .free_response_channels
                .iter()
                .cloned()
                .collect::<HashSet<_>>(),
        });
        let _ = self.receiver.set(receiver.clone());
        if self.config.mode == SlackMode::Socket {
            let socket = socket::Socket {
                api: self.api.clone(),
                app_token: self.config.app().to_string(),
                receiver,
            };
            socket.run(cancel).await;
        }
    }

    /// auth.test, retried until it answers: mentions need the bot's user id. A refused token
    /// is logged with its key's name each time (a token revoked and replaced recovers here).
    async fn identify(&self, cancel: &CancellationToken) -> Option<BotIdentity> {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        loop {
            let res = self
                .api
                .form::<SlackApiAuthTestResponse>("auth.test", self.config.bot(), &[])
                .await;
            match res {
                Ok(me) => {
                    return Some(BotIdentity {
                        user_id: me.user_id.0,
                        bot_id: me.bot_id.map(|b| b.0),
                    })
                }
                Err(e) if e.is_auth() => {
                    tracing::error!(error = %e, "slack.bot_token was refused by auth.test; retrying")
                }
                Err(e) => tracing::warn!(error = %e, "slack auth.test failed; retrying"),
            }
            backoff.wait(cancel).await.ok()?;
        }
    }
}
