//! Discord adapter (serenity): gateway in, channel messages out.
//!
//! `app` sees it as an [`Adapter`] (`None` without `discord.token`). Inbound messages and slash
//! commands become `MessageEvent`s stored through `LaneRouter::ingest`; replies leave through
//! [`outbound::DiscordOutbound`] driven by the outbox sender. This module wires serenity's
//! client, handler, watchdog and shutdown; it must not decide what the agent answers, nor log
//! the token.
//!
//! Gateway shards are spread across replicas by store leases (`shards.rs`): this process runs
//! one serenity client per shard it holds (`start_shard(n, total)`), and stops a client before
//! letting its lease go. Sending is REST and needs no shard: every replica sends.

mod ask;
mod inbound;
mod interactions;
mod outbound;
mod shards;
pub mod spec;
mod watchdog;

pub use spec::SPEC;

/// Discord's name in lanes, rows and the platform registry.
pub const DISCORD: crate::domain::Platform = crate::domain::Platform::named("discord");

pub use shards::SHARD_LEASE_PREFIX;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use serenity::all::{
    Channel, ChannelId, ChannelType, Client, ClientBuilder, Context, EventHandler, GatewayError,
    GatewayIntents, GuildId, Http, HttpBuilder, Interaction, Message, Ready,
};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use self::inbound::{Gate, Place};
use self::outbound::DiscordOutbound;
use super::{Adapter, Edge};
use crate::config::{Config, DiscordConfig};
use crate::delivery::Outbound;
use crate::domain::Platform;
use crate::hooks::Authorizer;
use crate::tasks::Backoff;

const DISCORD_API: &str = "https://discord.com";

/// Guild channel and thread structure (`GUILDS`, for the cache that tells a thread from a
/// channel), guild and DM messages, and their text.
fn intents() -> GatewayIntents {
    GatewayIntents::GUILDS
        | GatewayIntents::GUILD_MESSAGES
        | GatewayIntents::DIRECT_MESSAGES
        | GatewayIntents::MESSAGE_CONTENT
}

pub struct DiscordAdapter {
    config: DiscordConfig,
    outbound: Arc<DiscordOutbound>,
}

/// serenity's REST client for our config. serenity's ratelimiter ignores the proxy setting,
/// so a non-default `api_url` with the ratelimiter on would send requests to discord.com
/// behind the operator's back: refused.
fn build_http(config: &DiscordConfig) -> anyhow::Result<Http> {
    let token = config.token.as_ref().context("discord.token is not set")?;
    let api = config.api_url.as_str().trim_end_matches('/');
    let mut builder = HttpBuilder::new(token.expose());
    if api != DISCORD_API {
        anyhow::ensure!(
            !config.ratelimiter,
            "discord.api_url = {api:?} needs discord.ratelimiter = false: serenity's ratelimiter \
             ignores the proxy and would talk to {DISCORD_API} directly"
        );
        builder = builder.proxy(api);
    }
    Ok(builder.ratelimiter_disabled(!config.ratelimiter).build())
}

impl DiscordAdapter {
    /// Builds the client from config (no network yet).
    fn new(config: &DiscordConfig) -> anyhow::Result<DiscordAdapter> {
        let http = Arc::new(build_http(config)?);
        Ok(DiscordAdapter {
            config: config.clone(),
            outbound: Arc::new(DiscordOutbound {
                http,
                rate_limit_wait: Duration::from_millis(config.rate_limit_wait_ms),
                interactions: Default::default(),
            }),
        })
    }
}

/// Discord talks to us over the gateway only: no extra HTTP routes.
impl Adapter for DiscordAdapter {
    fn from_config(config: &Config) -> anyhow::Result<Option<DiscordAdapter>> {
        if config.discord.token.is_none() {
            return Ok(None);
        }
        DiscordAdapter::new(&config.discord)
            .context("discord adapter")
            .map(Some)
    }

    fn platform(&self) -> Platform {
        Platform::named("discord")
    }

    fn outbound(&self) -> Arc<dyn Outbound> {
        self.outbound.clone()
    }

    fn pace(&self, _config: &Config) -> Option<crate::delivery::pace::Limits> {
        Some(crate::delivery::pace::Limits::discord())
    }

    /// Starts receiving: this replica's share of the gateway shards, as tracked, cancellable
    /// tasks.
    fn spawn(self: Box<Self>, edge: Edge, tracker: &TaskTracker, cancel: CancellationToken) {
        let owner = shards::Owner {
            holder: format!("{}/discord", edge.replica_id),
            config: self.config,
            edge,
            tracker: tracker.clone(),
            interactions: self.outbound.interactions.clone(),
        };
        tracker.spawn(owner.run(cancel));
    }
}

/// Builds the client for shard `(id, total)` and keeps it running until cancelled. A client
/// that stops for a reason other than a bad token is built again after a pause.
async fn run(
    config: DiscordConfig,
    edge: Edge,
    tracker: TaskTracker,
    cancel: CancellationToken,
    shard: (u32, u32),
    interactions: Arc<interactions::InteractionTokens>,
) {
    let mut pause = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
    while !cancel.is_cancelled() {
        let delay = pause.next_delay();
        match run_once(&config, &edge, &tracker, &cancel, shard, &interactions).await {
            Ok(()) => return,
            Err(Fatal(e)) => {
                tracing::error!(error = %e, shard = shard.0, "discord shard stopped; its messages will not be received");
                return;
            }
            Err(Retry(e)) => {
                tracing::warn!(error = %e, shard = shard.0, pause_secs = delay.as_secs(), "discord client stopped; starting it again");
            }
        }
        if crate::tasks::sleep_or_cancel(delay, &cancel).await.is_err() {
            return;
        }
    }
}

enum Stop {
    Fatal(String),
    Retry(String),
}
use Stop::{Fatal, Retry};

async fn run_once(
    config: &DiscordConfig,
    edge: &Edge,
    tracker: &TaskTracker,
    cancel: &CancellationToken,
    (shard, total): (u32, u32),
    interactions: &Arc<interactions::InteractionTokens>,
) -> Result<(), Stop> {
    let http = build_http(config).map_err(|e| Fatal(e.to_string()))?;
    // serenity asks for the gateway URL once, when the client is built, and on failure dials
    // its built-in host for good (its shard manager reconnects there forever). Asked here
    // first, from the configured `api_url`: a failure restarts the client after a pause,
    // which asks again, and the answer is what the shards dial.
    let gateway = http
        .get_gateway()
        .await
        .map_err(|e| {
            Retry(format!(
                "cannot read the gateway URL from {}: {e}",
                config.api_url
            ))
        })?
        .url;
    let signs = Arc::new(watchdog::LifeSigns::default());
    let handler = Handler {
        edge: edge.clone(),
        gate: Gate::from_config(config),
        auth: edge.auth.clone(),
        // Commands are global: one shard (shard 0, on whichever replica) registers them.
        register_commands: config.register_commands && shard == 0,
        registered: AtomicBool::new(false),
        places: Mutex::new(HashMap::new()),
        interactions: interactions.clone(),
    };
    let mut client: Client = ClientBuilder::new_with_http(http, intents())
        .event_handler(handler)
        .raw_event_handler(ArcSigns(signs.clone()))
        .await
        .map_err(|e| Retry(format!("building the client: {e}")))?;
    *client.ws_url.lock().await = gateway;
    let manager = client.shard_manager.clone();
    let watch_cancel = cancel.child_token();
    tracker.spawn(watchdog::run(
        manager.clone(),
        signs,
        Duration::from_secs(config.gateway_watchdog_secs.max(1)),
        watch_cancel.clone(),
    ));
    let result = tokio::select! {
        r = client.start_shard(shard, total) => r,
        _ = cancel.cancelled() => {
            manager.shutdown_all().await;
            watch_cancel.cancel();
            return Ok(());
        }
    };
    watch_cancel.cancel();
    manager.shutdown_all().await;
    match result {
        Ok(()) => Err(Retry("the gateway connection ended".into())),
        Err(serenity::Error::Gateway(
            e @ (GatewayError::InvalidAuthentication
            | GatewayError::InvalidGatewayIntents
            | GatewayError::DisallowedGatewayIntents),
        )) => Err(Fatal(format!(
            "{e} (check discord.token and the bot's privileged intents: message content)"
        ))),
        Err(e) => Err(Retry(e.to_string())),
    }
}

/// serenity takes raw handlers by value; the watchdog keeps the other reference.
struct ArcSigns(Arc<watchdog::LifeSigns>);

#[serenity::async_trait]
impl serenity::all::RawEventHandler for ArcSigns {
    async fn raw_event(&self, ctx: Context, ev: serenity::all::Event) {
        self.0.raw_event(ctx, ev).await;
    }
}

struct Handler {
    edge: Edge,
    gate: Gate,
    auth: Authorizer,
    register_commands: bool,
    registered: AtomicBool,
    /// Channel kinds never change, so a lookup is remembered (bounded below).
    places: Mutex<HashMap<ChannelId, Place>>,
    /// Shared with the outbound side, which answers the deferred commands.
    interactions: Arc<interactions::InteractionTokens>,
}

const PLACES_CAP: usize = 10_000;

impl Handler {
    /// Whether `channel` is a DM, a guild channel or a thread (and its parent): the cache
    /// first, then one REST lookup per channel.
    async fn place(&self, ctx: &Context, guild: Option<GuildId>, channel: ChannelId) -> Place {
        let Some(guild) = guild else {
            return Place::Dm;
        };
        if let Some(p) = self.lock_places().get(&channel) {
            return *p;
        }
        let cached = ctx.cache.guild(guild).and_then(|g| {
            if let Some(t) = g.threads.iter().find(|t| t.id == channel) {
                return t.parent_id.map(|parent| Place::Thread { parent });
            }
            g.channels
                .get(&channel)
                .map(|c| place_of(c.kind, c.parent_id))
        });
        let place = match cached {
            Some(p) => p,
            None => match ctx.http.get_channel(channel).await {
                Ok(Channel::Guild(c)) => place_of(c.kind, c.parent_id),
                Ok(_) => Place::Channel,
                Err(e) => {
                    // Not remembered: the next message asks again.
                    tracing::warn!(error = %e, channel = %channel, "discord channel lookup failed; treating it as a channel");
                    return Place::Channel;
                }
            },
        };
        let mut places = self.lock_places();
        if places.len() >= PLACES_CAP {
            places.clear();
        }
        places.insert(channel, place);
        place
    }

    fn lock_places(&self) -> std::sync::MutexGuard<'_, HashMap<ChannelId, Place>> {
        self.places.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn place_of(kind: ChannelType, parent: Option<ChannelId>) -> Place {
    match (kind, parent) {
        (
            ChannelType::PublicThread | ChannelType::PrivateThread | ChannelType::NewsThread,
            Some(parent),
        ) => Place::Thread { parent },
        _ => Place::Channel,
    }
}

#[serenity::async_trait]
impl EventHandler for Handler {
    async fn ready(&self, ctx: Context, ready: Ready) {
        tracing::info!(bot = %ready.user.name, shard = ?ready.shard.map(|s| s.id.0), guilds = ready.guilds.len(), "discord gateway ready");
        if self.register_commands && !self.registered.swap(true, Ordering::SeqCst) {
            interactions::register(&ctx.http).await;
        }
    }

    async fn message(&self, ctx: Context, msg: Message) {
        let bot = ctx.cache.current_user().id;
        // Cheap checks first: most guild traffic is not for us and needs no channel lookup.
        if msg.author.bot || msg.author.id == bot {
            return;
        }
        let place = self.place(&ctx, msg.guild_id, msg.channel_id).await;
        let Some(ev) = inbound::translate(&msg, place, bot, &self.gate) else {
            return;
        };
        tracing::debug!(lane = %ev.lane(), message_id = %ev.platform_message_id, "discord message received");
        inbound::ingest_with_retry(&self.edge.ingest, &ev).await;
    }

    async fn interaction_create(&self, ctx: Context, interaction: Interaction) {
        let cmd = match interaction {
            Interaction::Command(cmd) => cmd,
            Interaction::Component(c) => {
                return ask::answer(&ctx, &c, &self.edge.approvals).await;
            }
            _ => return,
        };
        interactions::defer(&ctx, &cmd, &self.interactions).await;
        let place = match &cmd.channel {
            Some(c) if cmd.guild_id.is_some() => match place_of(c.kind, c.parent_id) {
                Place::Channel => self.place(&ctx, cmd.guild_id, cmd.channel_id).await,
                thread => thread,
            },
            _ => self.place(&ctx, cmd.guild_id, cmd.channel_id).await,
        };
        interactions::finish(&ctx, &cmd, place, &self.edge, &self.auth).await;
    }
}
