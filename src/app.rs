//! Wiring and supervision: build every part from the config, start the tasks, stop them in
//! order.
//!
//! `App::start` is the testable core (tests start it on `127.0.0.1:0`); `run` adds waiting
//! for the shutdown signal. Every task is spawned on one `TaskTracker` and stops through one
//! root `CancellationToken`; shutdown drains turns within the grace period, then releases
//! leases, then closes the store. The steps of `start` are named builders in `build.rs`.

mod build;
mod live;
mod live_parts;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::agent::mcp::McpManager;
use crate::config::Config;
use crate::cron::Scheduler;
use crate::handoff::NightlyCloser;
use crate::hooks::Authorizer;
use crate::lanes::{Ingest, LaneRouter};
use crate::store::Store;
use build::Core;

/// A running Herald.
pub struct App {
    pub addr: SocketAddr,
    pub store: Arc<dyn Store>,
    pub router: Arc<LaneRouter>,
    /// Writes an event to the inbox and wakes its lane, as an adapter would.
    pub ingest: Ingest,
    pub replica_id: String,
    delivery_platforms: crate::domain::cron::Deliverable,
    /// Who may use the agent; a scheduler re-checks a chat job's maker with it.
    auth: Authorizer,
    /// The nightly handoff closer (its scheduled loop runs when `handoff.nightly` is set);
    /// tests and operators run a pass through it.
    pub nightly: Arc<NightlyCloser>,
    /// Takes a changed configuration in place (`crate::reload`; `herald reload`, SIGHUP).
    pub reload: Arc<crate::reload::Reloader>,
    cancel: CancellationToken,
    tracker: TaskTracker,
    grace: Duration,
}

/// Runs until `shutdown` is cancelled, then stops gracefully.
pub async fn run(config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    run_from(config, None, shutdown).await
}

/// [`run`], reloading from `source` on SIGHUP, `herald reload` and (with `reload.watch`) a
/// change of its file.
pub async fn run_from(
    config: Config,
    source: Option<crate::config::LoadOptions>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    crate::http::serve::raise_fd_limit();
    // Before the start: a SIGHUP while starting waits for the daemon instead of ending it.
    let hangups = source.is_some().then(crate::reload::watch::Hangups::listen);
    let app = App::start(config).await?;
    if let (Some(source), Some(hangups)) = (source, hangups) {
        app.watch_config(source, hangups);
    }
    shutdown.cancelled().await;
    app.shutdown().await;
    Ok(())
}

impl App {
    /// Builds every part and starts the tasks: store, model, tools, adapters' sending sides,
    /// the core's handles, lanes, delivery, HTTP, the scheduled loops, then the adapters'
    /// receiving sides.
    pub async fn start(config: Config) -> anyhow::Result<App> {
        let started = std::time::Instant::now();
        let mut config = config;
        crate::config::link_api_keys(&mut config);
        let config = Arc::new(config);
        let metrics = crate::telemetry::metrics();
        let replica_id = build::replica_id(&config);
        let store = build::open_store(&config).await?;
        let chain = build::model_chain(&config)?;
        let mut tools = build::tool_catalog(&config)?;
        let adapters = crate::adapters::configured(&config)?;
        for check in adapters.iter().filter_map(|a| a.preflight()) {
            check.await.map_err(anyhow::Error::msg)?;
        }
        let outbounds = build::outbounds(&config, &adapters);
        let (tracker, cancel) = (TaskTracker::new(), CancellationToken::new());
        // MCP servers connect in the background: readiness never waits for one.
        let mcp = McpManager::start(&config.mcp.servers, &tracker, &cancel);
        tools.source(mcp.clone());
        let (core, wakes) = Core::new(config, store, replica_id, outbounds, (tracker, cancel));
        let handoff = core.handoff(&chain)?;
        let shared = crate::agent::roster::Shared {
            store: core.store.clone(),
            events: core.budget.events().cloned(),
        };
        let agents = Arc::new(
            crate::agent::roster::LiveAgents::start(core.config.clone(), chain, shared)
                .map_err(anyhow::Error::msg)?,
        );
        core.add_builtins(&mut tools, &agents);
        let deps = core.lane_deps(agents.clone(), tools, &handoff);
        let router = LaneRouter::new(deps.clone(), &core.tracker, wakes, &core.cancel);
        let nightly = Arc::new(NightlyCloser::new(handoff, &core.config.handoff)?);
        let cron = core.scheduler().await?;
        let live = core.live(cron.clone(), mcp, &adapters, agents.clone())?;
        let (webhooks, reload) = (live.hooks.clone(), live.reload.clone());
        core.start_delivery(&router).await;
        let model = agents.current().default_agent().chain.primary_name();
        let addr = core
            .start_http(
                &router,
                model.clone(),
                metrics,
                &adapters,
                (webhooks, &reload),
            )
            .await?;
        core.start_schedules(cron, &nightly);
        live.adapters.start(adapters);
        tracing::info!(
            %addr,
            store = core.store.backend(),
            replica = %core.replica_id,
            model = %model,
            ready_ms = started.elapsed().as_millis() as u64,
            "herald is ready"
        );
        crate::telemetry::sdnotify::ready(&core.tracker, core.cancel.child_token());
        Ok(App {
            addr,
            delivery_platforms: core.config.deliverable(),
            grace: Duration::from_secs(core.config.server.shutdown_grace_secs),
            store: core.store,
            router,
            ingest: core.ingest,
            replica_id: core.replica_id,
            auth: core.auth,
            nightly,
            reload,
            cancel: core.cancel,
            tracker: core.tracker,
        })
    }

    /// Reloads from `source` at SIGHUP and `herald reload`, and with `reload.watch` when its
    /// file changes (tasks on the app's tracker).
    pub fn watch_config(
        &self,
        source: crate::config::LoadOptions,
        hangups: crate::reload::watch::Hangups,
    ) {
        use crate::reload::watch;
        self.reload.set_source(source);
        self.tracker.spawn(watch::on_sighup(
            self.reload.clone(),
            hangups,
            self.cancel.child_token(),
        ));
        if self.reload.current().reload.watch {
            self.tracker.spawn(watch::on_file_change(
                self.reload.clone(),
                Duration::from_secs(1),
                self.cancel.child_token(),
            ));
        }
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
