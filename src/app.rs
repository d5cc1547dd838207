//! Wiring and supervision: build every part from the config, start the tasks, stop them in
//! order.
//!
//! `App::start` is the testable core (tests start it on `127.0.0.1:0`); `run` adds waiting
//! for the shutdown signal. Every task is spawned on one `TaskTracker` and stops through one
//! root `CancellationToken`; shutdown drains turns within the grace period, then releases
//! leases, then closes the store.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::{broadcast, Notify};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::adapters::discord::DiscordAdapter;
use crate::adapters::telegram::TelegramAdapter;
use crate::adapters::web::WebOutbound;
use crate::adapters::Edge;
use crate::agent::mcp::McpManager;
use crate::agent::tools::{approval_policy, builtin_tools, ToolCatalog};
use crate::config::{Config, ProviderKind};
use crate::cron::Scheduler;
use crate::delivery::sender::Sender;
use crate::delivery::Outbounds;
use crate::handoff::{Builder, HandoffHook, HandoffInject, NightlyCloser};
use crate::hooks::{build_pre_dispatch, Authorizer, PreLlmChain};
use crate::http::{self, HttpState};
use crate::lanes::{Approvals, Deps, Ingest, LaneRouter};
use crate::llm::writer_chain;
use crate::store::{self, Store};

/// A running Herald.
pub struct App {
    pub addr: SocketAddr,
    pub store: Arc<dyn Store>,
    pub router: Arc<LaneRouter>,
    /// Writes an event to the inbox and wakes its lane, as an adapter would.
    pub ingest: Ingest,
    pub replica_id: String,
    delivery_platforms: Vec<crate::domain::Platform>,
    /// Who may use the agent; a scheduler re-checks a chat job's maker with it.
    auth: Authorizer,
    /// The nightly handoff closer (its scheduled loop runs when `handoff.nightly` is set);
    /// tests and operators run a pass through it.
    pub nightly: Arc<NightlyCloser>,
    cancel: CancellationToken,
    tracker: TaskTracker,
    grace: Duration,
}

/// Runs until `shutdown` is cancelled, then stops gracefully.
pub async fn run(config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    http::serve::raise_fd_limit();
    let app = App::start(config).await?;
    shutdown.cancelled().await;
    app.shutdown().await;
    Ok(())
}

impl App {
    pub async fn start(config: Config) -> anyhow::Result<App> {
        let started = std::time::Instant::now();
        let config = Arc::new(config);
        let metrics = crate::telemetry::metrics();
        let replica_id = config.server.replica_id.clone().unwrap_or_else(|| {
            format!("herald-{}", &uuid::Uuid::new_v4().simple().to_string()[..8])
        });
        let store_url = config.store_url();
        let store = store::connect(&store_url, config.store.max_connections)
            .await
            .with_context(|| {
                format!(
                    "opening the store ({})",
                    crate::config::redact_url(&store_url)
                )
            })?;
        store.migrate().await.context("applying migrations")?;

        let chain = crate::llm::main_chain(&config)?;
        if config.provider_kind() == ProviderKind::None {
            tracing::warn!("no model configured: chats will be answered with setup instructions");
        }
        // The approval policy is built here, once: nothing later can loosen it.
        let policy = approval_policy(&config)?;
        if policy.bypass() {
            tracing::warn!("approvals.bypass is on: tools that ask for approval run without asking (the hardline still asks)");
        }
        let mut tools = ToolCatalog::new(policy);
        for tool in builtin_tools(&config, store.clone()) {
            tools.builtin(tool);
        }
        for problem in config.agent.hint_problems() {
            tracing::warn!("{problem}");
        }
        let mut outbounds = Outbounds::default();
        if config.web.enabled {
            outbounds.register(Arc::new(WebOutbound));
        }
        let telegram = match &config.telegram.token {
            Some(_) => Some(TelegramAdapter::new(&config.telegram).context("telegram adapter")?),
            None => None,
        };
        let discord = match &config.discord.token {
            Some(_) => Some(DiscordAdapter::new(&config.discord).context("discord adapter")?),
            None => None,
        };
        for o in telegram.iter().filter_map(|a| a.outbound()) {
            outbounds.register(o);
        }
        for o in discord.iter().filter_map(|a| a.outbound()) {
            outbounds.register(o);
        }
        outbounds.edit_pace = Arc::new(crate::delivery::pace::EditPace::new(
            [
                crate::domain::Platform::Telegram,
                crate::domain::Platform::Discord,
            ]
            .into_iter()
            .map(|p| (p, config.streaming.edit_interval(p)))
            .collect(),
            crate::config::StreamingConfig::overall_edit_spacing(),
        ));
        let (finished, _) = broadcast::channel(1024);
        let cancel = CancellationToken::new();
        let tracker = TaskTracker::new();
        // MCP servers connect in the background: readiness never waits for one.
        tools.source(McpManager::start(&config.mcp.servers, &tracker, &cancel));
        let auth = Authorizer::from_config(&config);
        // The edges' one handle on the core; the router drains its wakes once it exists.
        let (ingest, wakes) = Ingest::new(store.clone(), auth.clone(), finished.clone());
        let handoff = Arc::new(Builder::new(
            store.clone(),
            writer_chain(&config, &chain).context("handoff writer")?,
            config.handoff.clone(),
            replica_id.clone(),
            ingest.clone(),
        ));
        let handoff_hook = HandoffHook::new(
            auth.clone(),
            handoff.clone(),
            tracker.clone(),
            cancel.child_token(),
        );
        let approvals = Approvals::new(
            store.clone(),
            outbounds.clone(),
            auth.clone(),
            Duration::from_secs(config.approvals.timeout_secs),
        )
        .only_requester(config.approvals.only_requester);
        let outbox_wake = Arc::new(Notify::new());
        let cron_poke = Arc::new(Notify::new());
        // The built-in tools that act beyond the conversation, each switchable in `[tools]`.
        let approval = |name: &str| config.tools.require_approval.iter().any(|t| t == name);
        if config.tools.cron {
            tools.builtin(Arc::new(crate::cron::CronTool {
                store: store.clone(),
                platforms: config.delivery_platforms(),
                approval: approval("cron"),
                approval_create: approval("cron.create"),
                min_interval: Duration::from_secs(config.cron.chat_min_interval_secs),
                poke: cron_poke.clone(),
            }));
        }
        if config.tools.send_message && !config.tools.send_message_routes.is_empty() {
            tools.builtin(Arc::new(crate::lanes::SendMessage {
                store: store.clone(),
                auth: auth.clone(),
                ingest: ingest.clone(),
                outbounds: outbounds.clone(),
                outbox_wake: outbox_wake.clone(),
                routes: config.tools.send_message_routes.clone(),
                approval: approval("send_message"),
            }));
        }
        let recall =
            crate::hooks::MemoryRecall::from_config(&config, tracker.clone(), cancel.child_token());
        let mut pre_llm: Vec<Arc<dyn crate::hooks::PreLlmHook>> = vec![Arc::new(
            HandoffInject::new(store.clone(), config.handoff.inject),
        )];
        if let Some(r) = &recall {
            pre_llm.push(r.clone());
        }
        let deps = Arc::new(Deps {
            config: config.clone(),
            store: store.clone(),
            chain,
            tools,
            pre_dispatch: build_pre_dispatch(&config, store.clone(), vec![Arc::new(handoff_hook)]),
            pre_llm: PreLlmChain::new(pre_llm),
            outbounds: outbounds.clone(),
            replica_id: replica_id.clone(),
            outbox_wake,
            finished,
            approvals: approvals.clone(),
            recall,
        });

        let router = LaneRouter::new(deps.clone(), &tracker, wakes, &cancel);
        let nightly = Arc::new(NightlyCloser::new(handoff.clone(), &config.handoff)?);
        let cron = if config.cron.enabled {
            let holder = format!("{replica_id}/cron");
            let s = Scheduler::new(
                store.clone(),
                ingest.clone(),
                config.delivery_platforms(),
                &holder,
            )
            .with_poke(cron_poke)
            .with_access(auth.clone());
            s.sync_config(&config.cron.jobs)
                .await
                .context("storing [[cron.jobs]]")?;
            Some(Arc::new(s))
        } else {
            None
        };

        tracker.spawn(
            router
                .clone()
                .rescan(Duration::from_secs(config.lanes.rescan_secs)),
        );
        let sender = Sender {
            store: store.clone(),
            outbounds,
            holder: replica_id.clone(),
            wake: deps.outbox_wake.clone(),
            poll: Duration::from_millis(config.outbox.poll_ms),
            batch: config.outbox.batch,
            max_attempts: config.outbox.max_attempts,
        };
        crate::delivery::liveness::start(
            store.clone(),
            &replica_id,
            &tracker,
            cancel.child_token(),
        )
        .await;
        tracker.spawn(sender.run(cancel.child_token()));

        let (listener, addr) = http::bind(config.server.listen)
            .await
            .with_context(|| format!("binding server.listen {}", config.server.listen))?;
        let mut extra_routes = Vec::new();
        extra_routes.extend(telegram.as_ref().and_then(|a| a.routes()));
        extra_routes.extend(discord.as_ref().and_then(|a| a.routes()));
        let state = HttpState {
            config: config.clone(),
            store: store.clone(),
            ingest: ingest.clone(),
            lanes: router.view(),
            replica_id: replica_id.clone(),
            model: deps.chain.primary_name(),
            metrics,
            access: Arc::new(http::Access::from_config(&config)),
            approvals: approvals.clone(),
        };
        let app = http::routes(state, &config, extra_routes);
        let limits = http::serve::Limits::from_config(&config);
        http::serve::start(listener, app, limits, &tracker, cancel.child_token());
        if let Some(cron) = cron {
            tracker.spawn(cron.run(cancel.child_token()));
        }
        if config.handoff.enabled {
            tracker.spawn(nightly.clone().run(cancel.child_token()));
        }
        let edge = Edge {
            ingest: ingest.clone(),
            approvals: approvals.clone(),
            store: store.clone(),
            replica_id: replica_id.clone(),
            config: config.clone(),
        };
        if let Some(a) = telegram {
            a.spawn(edge.clone(), &tracker, cancel.child_token());
        }
        if let Some(a) = discord {
            a.spawn(edge, &tracker, cancel.child_token());
        }
        tracing::info!(
            %addr,
            store = store.backend(),
            replica = %replica_id,
            model = %deps.chain.primary_name(),
            ready_ms = started.elapsed().as_millis() as u64,
            "herald is ready"
        );
        crate::telemetry::sdnotify::ready(&tracker, cancel.child_token());
        Ok(App {
            addr,
            store,
            router,
            ingest,
            replica_id,
            delivery_platforms: config.delivery_platforms(),
            auth: auth.clone(),
            nightly,
            cancel,
            tracker,
            grace: Duration::from_secs(config.server.shutdown_grace_secs),
        })
    }

    /// A cron scheduler on this app's store and inbox (tests drive one with their own clock).
    pub fn scheduler(&self, holder: &str) -> Scheduler {
        Scheduler::new(
            self.store.clone(),
            self.ingest.clone(),
            self.delivery_platforms.clone(),
            holder,
        )
        .with_access(self.auth.clone())
    }

    /// Stops taking work, lets running turns finish within the grace period, releases leases,
    /// stops the HTTP server and the sender, closes the store.
    pub async fn shutdown(self) {
        tracing::info!("shutting down");
        crate::telemetry::sdnotify::stopping();
        self.router.shutdown(self.grace).await;
        self.cancel.cancel();
        self.tracker.close();
        if tokio::time::timeout(Duration::from_secs(10), self.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!("some tasks did not stop within 10 s");
        }
        self.store.close().await;
        tracing::info!("stopped");
    }
}
