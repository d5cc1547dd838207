//! Platform adapters: the only place platform crates (teloxide, serenity, slack-morphism, the mail
//! crates) appear. Each turns platform updates into `MessageEvent`s and registers an `Outbound`
//! for its replies.
//!
//! `app` sees a platform only as an [`Adapter`]: [`configured`] builds the ones the config
//! turns on, and `App::start` registers, routes and starts them in one loop.

pub mod api;
pub mod discord;
pub mod email;
pub mod matrix;
pub mod running;
pub mod signal;
pub mod slack;
pub mod split;
pub mod telegram;
pub mod web;
pub mod whatsapp;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{Config, PlatformSpec};
use crate::delivery::Outbound;
use crate::domain::Platform;
use crate::lanes::{Approvals, Ingest};
use crate::store::Store;

/// What `App::start` needs of a chat platform. Building one touches no network; the platform's
/// own types stay behind it.
pub trait Adapter: Send {
    /// The adapter this configuration asks for, or `None` when the platform is not configured
    /// (no token; the web chat switched off).
    fn from_config(config: &Config) -> anyhow::Result<Option<Self>>
    where
        Self: Sized;

    fn platform(&self) -> Platform;

    /// The sending side, registered before the lane router is built.
    fn outbound(&self) -> Arc<dyn Outbound>;

    /// The pace the platform's published limits ask for (per chat, per group, overall);
    /// `None`: the platform client paces itself, or nothing needs pacing.
    fn pace(&self, _config: &Config) -> Option<crate::delivery::pace::Limits> {
        None
    }

    /// A check run once before the daemon reports ready: a token the platform refuses stops
    /// the start with the key's name. Only a refusal fails it; a platform that cannot be
    /// reached is retried by the adapter once it runs.
    fn preflight(&self) -> Option<futures::future::BoxFuture<'static, Result<(), String>>> {
        None
    }

    /// Extra HTTP routes merged into the daemon's server (Telegram's webhook).
    fn routes(&self) -> Option<axum::Router> {
        None
    }

    /// Starts receiving as tasks on `tracker` that stop with `cancel`.
    fn spawn(self: Box<Self>, edge: Edge, tracker: &TaskTracker, cancel: CancellationToken);
}

/// Every platform this binary knows, with its facts (`config::registry`): the one list that
/// names them all. A new platform adds its module's `SPEC` here and its adapter to
/// [`configured`].
pub static PLATFORMS: &[&PlatformSpec] = &[
    &web::SPEC,
    &telegram::SPEC,
    &discord::SPEC,
    &slack::SPEC,
    &matrix::SPEC,
    &email::SPEC,
    &signal::SPEC,
    &whatsapp::SPEC,
    &api::SPEC,
    &crate::cron::SPEC,
];

/// The adapters this configuration turns on, in a fixed order: web, Telegram, Discord, Slack,
/// email.
pub fn configured(config: &Config) -> anyhow::Result<Vec<Box<dyn Adapter>>> {
    fn build<A: Adapter + 'static>(config: &Config) -> anyhow::Result<Option<Box<dyn Adapter>>> {
        Ok(A::from_config(config)?.map(|a| Box::new(a) as Box<dyn Adapter>))
    }
    let builders = [
        build::<web::WebAdapter>,
        build::<telegram::TelegramAdapter>,
        build::<discord::DiscordAdapter>,
        build::<slack::SlackAdapter>,
        build::<matrix::MatrixAdapter>,
        build::<email::EmailAdapter>,
        build::<signal::SignalAdapter>,
        build::<whatsapp::WhatsAppAdapter>,
        build::<api::ApiAdapter>,
    ];
    let mut adapters = Vec::new();
    for build in builders {
        adapters.extend(build(config)?);
    }
    Ok(adapters)
}

/// What an adapter gets of the core when it starts, and nothing more: the inbox handle, the
/// store for its own leases and offsets (poller role, shard leases), this replica's name and
/// the configuration (lease timing, authorization).
#[derive(Clone)]
pub struct Edge {
    pub ingest: Ingest,
    /// Where approval button presses go.
    pub approvals: Approvals,
    pub store: Arc<dyn Store>,
    pub replica_id: String,
    pub config: Arc<Config>,
    /// The app's one authorizer, whose rules a reload replaces (interaction pre-checks).
    pub auth: crate::hooks::Authorizer,
}
