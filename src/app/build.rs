//! The named steps of `App::start`: each builds one part from the config, or starts one group
//! of tasks, and returns what the next steps need. `App::start` calls them in order; the order
//! is the order of start (and the reverse of what shutdown drains).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::{broadcast, Notify};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::adapters::{Adapter, Edge};
use crate::agent::tools::{approval_policy, ToolCatalog};
use crate::config::{spec, Config, ProviderKind};
use crate::cron::Scheduler;
use crate::delivery::pace::Pace;
use crate::delivery::sender::Sender;
use crate::delivery::Outbounds;

use crate::handoff::{Builder, HandoffHook, HandoffInject};
use crate::hooks::{build_pre_dispatch, Authorizer, MemoryRecall, PreLlmChain, PreLlmHook};
use crate::http::{self, HttpState};
use crate::lanes::budget_events::{approver_identities, BudgetNotices};
use crate::lanes::{Approvals, Deps, Ingest, LaneRouter, Wakes};
use crate::llm::{writer_chain, ProviderChain};
use crate::store::{self, Store};
use crate::toolset::{builtins, ToolDeps};

/// This replica's name: `server.replica_id`, or a fresh `herald-xxxxxxxx`.
pub(super) fn replica_id(config: &Config) -> String {
    config
        .server
        .replica_id
        .clone()
        .unwrap_or_else(|| format!("herald-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]))
}

/// The store, connected and migrated.
pub(super) async fn open_store(config: &Config) -> anyhow::Result<Arc<dyn Store>> {
    let url = config.store_url();
    let store = store::connect(&url, config.store.max_connections)
        .await
        .with_context(|| format!("opening the store ({})", crate::config::redact_url(&url)))?;
    store.migrate().await.context("applying migrations")?;
    Ok(store)
}

/// The model chain of `[llm]` (its fallbacks included).
pub(super) fn model_chain(config: &Config) -> anyhow::Result<ProviderChain> {
    let chain = crate::llm::main_chain(config)?;
    if config.provider_kind() == ProviderKind::None {
        tracing::warn!("no model configured: chats will be answered with setup instructions");
    }
    Ok(chain)
}

/// An empty tool catalog under the approval policy. The policy is built here, once: nothing
/// later can loosen it.
pub(super) fn tool_catalog(config: &Config) -> anyhow::Result<ToolCatalog> {
    let policy = approval_policy(config)?;
    if policy.bypass() {
        tracing::warn!("approvals.bypass is on: tools that ask for approval run without asking (the hardline still asks)");
    }
    for problem in config.agent.hint_problems() {
        tracing::warn!("{problem}");
    }
    Ok(ToolCatalog::new(policy))
}

/// The adapters' sending sides, and the pace of sends and edits per chat they share.
pub(super) fn outbounds(config: &Config, adapters: &[Box<dyn Adapter>]) -> Outbounds {
    let mut outbounds = Outbounds::default();
    for adapter in adapters {
        outbounds.register(adapter.outbound());
    }
    let limits: HashMap<_, _> = adapters
        .iter()
        .filter_map(|a| Some((a.platform(), a.pace(config)?)))
        .collect();
    let previews = adapters
        .iter()
        .filter(|a| spec(a.platform()).is_some_and(|s| s.caps.edits))
        .map(|a| (a.platform(), config.edit_interval(a.platform())))
        .collect();
    outbounds.pace = Arc::new(Pace::new(limits, previews));
    outbounds
}

/// The handles most parts are built from, made once the store, the outbounds and the task
/// tracker exist. The steps below are its methods, each taking what it needs from here.
pub(super) struct Core {
    pub config: Arc<Config>,
    pub store: Arc<dyn Store>,
    pub replica_id: String,
    pub auth: Authorizer,
    /// The edges' one handle on the core; the router drains its wakes once it exists.
    pub ingest: Ingest,
    pub outbounds: Outbounds,
    pub approvals: Approvals,
    /// Poked after a commit that queued outbox rows.
    pub outbox_wake: Arc<Notify>,
    /// Poked after the `cron` tool changed a job.
    pub cron_poke: Arc<Notify>,
    /// Inbox ids whose processing finished.
    pub finished: broadcast::Sender<i64>,
    /// Prices every model call and enforces the spending caps (the ledger is in the store).
    pub budget: Arc<crate::budget::Budget>,
    /// The approvers' notices and questions (a reload replaces their approvers).
    pub budget_notices: Arc<BudgetNotices>,
    pub tracker: TaskTracker,
    pub cancel: CancellationToken,
}

impl Core {
    pub(super) fn new(
        config: Arc<Config>,
        store: Arc<dyn Store>,
        replica_id: String,
        outbounds: Outbounds,
        (tracker, cancel): (TaskTracker, CancellationToken),
    ) -> (Core, Wakes) {
        let (finished, _) = broadcast::channel(1024);
        let auth = Authorizer::from_config(&config);
        let (ingest, wakes) = Ingest::new(store.clone(), auth.clone(), finished.clone());
        let approvals = Approvals::new(
            store.clone(),
            outbounds.clone(),
            auth.clone(),
            Duration::from_secs(config.approvals.timeout_secs),
        )
        .only_requester(config.approvals.only_requester)
        .people(config.people.clone())
        .budget_approvers(approver_identities(&config))
        .tracker(tracker.clone());
        let budget = crate::budget::Budget::new(&config, store.clone());
        let outbox_wake = Arc::new(Notify::new());
        let budget_notices = Arc::new(BudgetNotices::new(
            &config,
            store.clone(),
            outbounds.clone(),
            outbox_wake.clone(),
        ));
        budget.set_events(budget_notices.clone());
        let core = Core {
            budget,
            budget_notices,
            config,
            store,
            replica_id,
            auth,
            ingest,
            outbounds,
            approvals,
            outbox_wake,
            cron_poke: Arc::new(Notify::new()),
            finished,
            tracker,
            cancel,
        };
        (core, wakes)
    }

    /// The capsule builder the handoff hook and the nightly closer share.
    pub(super) fn handoff(&self, chain: &ProviderChain) -> anyhow::Result<Arc<Builder>> {
        Ok(Arc::new(
            Builder::new(
                self.store.clone(),
                writer_chain(&self.config, chain).context("handoff writer")?,
                self.config.handoff.clone(),
                self.replica_id.clone(),
                self.ingest.clone(),
            )
            .with_budget(self.budget.clone()),
        ))
    }

    /// The built-in tools this configuration offers, added to `tools` (MCP is its source).
    pub(super) fn add_builtins(
        &self,
        tools: &mut ToolCatalog,
        agents: &Arc<crate::agent::roster::LiveAgents>,
    ) {
        let deps = ToolDeps {
            store: self.store.clone(),
            auth: self.auth.clone(),
            ingest: self.ingest.clone(),
            outbounds: self.outbounds.clone(),
            outbox_wake: self.outbox_wake.clone(),
            cron_poke: self.cron_poke.clone(),
            agents: Some(agents.clone()),
        };
        for tool in builtins(&self.config, &deps) {
            tools.builtin(tool);
        }
    }

    /// What every lane worker shares: the model, the tools, both hook chains.
    pub(super) fn lane_deps(
        &self,
        agents: Arc<crate::agent::roster::LiveAgents>,
        tools: ToolCatalog,
        handoff: &Arc<Builder>,
    ) -> Arc<Deps> {
        let handoff_hook = HandoffHook::new(
            self.auth.clone(),
            handoff.clone(),
            self.tracker.clone(),
            self.cancel.child_token(),
        );
        let recall = MemoryRecall::from_config(
            &self.config,
            self.tracker.clone(),
            self.cancel.child_token(),
        );
        let mut pre_llm: Vec<Arc<dyn PreLlmHook>> = vec![Arc::new(HandoffInject::new(
            self.store.clone(),
            self.config.handoff.inject,
        ))];
        if let Some(r) = &recall {
            pre_llm.push(r.clone());
        }
        let pre_dispatch = build_pre_dispatch(
            &self.config,
            self.auth.clone(),
            self.store.clone(),
            vec![Arc::new(handoff_hook)],
        );
        let media_cache = crate::media::MediaCache::under(
            &self.config.server.data_dir,
            self.config.media.cache_hours,
        );
        Arc::new(Deps {
            config: self.config.clone(),
            store: self.store.clone(),
            agents,
            tools,
            pre_dispatch,
            pre_llm: PreLlmChain::new(pre_llm),
            outbounds: self.outbounds.clone(),
            replica_id: self.replica_id.clone(),
            outbox_wake: self.outbox_wake.clone(),
            finished: self.finished.clone(),
            approvals: self.approvals.clone(),
            auth: self.auth.clone(),
            budget: self.budget.clone(),
            committer: Arc::new(crate::lanes::committer::Committer::new(self.store.clone())),
            carry_over: Some(handoff.clone()),
            recall,
            media: Arc::new(crate::media::MediaReader::from_config(
                &self.config,
                media_cache.clone(),
            )),
            media_cache,
        })
    }

    /// The cron scheduler with `[[cron.jobs]]` stored, when `cron.enabled` (not started yet).
    pub(super) async fn scheduler(&self) -> anyhow::Result<Option<Arc<Scheduler>>> {
        if !self.config.cron.enabled {
            return Ok(None);
        }
        let holder = format!("{}/cron", self.replica_id);
        let s = Scheduler::new(
            self.store.clone(),
            self.ingest.clone(),
            self.config.deliverable(),
            &holder,
        )
        .with_poke(self.cron_poke.clone())
        .with_access(self.auth.clone());
        s.sync_config(&self.config.cron.jobs)
            .await
            .context("storing [[cron.jobs]]")?;
        Ok(Some(Arc::new(s)))
    }

    /// Starts the router's rescan and replica signals, this replica's liveness beat and the
    /// outbox sender.
    pub(super) async fn start_delivery(&self, router: &Arc<LaneRouter>) {
        let config = &self.config;
        router.start_signals().await;
        self.tracker.spawn(
            router
                .clone()
                .rescan(Duration::from_secs(config.lanes.rescan_secs)),
        );
        let sender = Sender {
            store: self.store.clone(),
            outbounds: self.outbounds.clone(),
            holder: self.replica_id.clone(),
            wake: self.outbox_wake.clone(),
            poll: Duration::from_millis(config.outbox.poll_ms),
            batch: config.outbox.batch,
            max_attempts: config.outbox.max_attempts,
            media: crate::media::MediaCache::under(
                &config.server.data_dir,
                config.media.cache_hours,
            ),
        };
        crate::delivery::liveness::start(
            self.store.clone(),
            &self.replica_id,
            &self.tracker,
            self.cancel.child_token(),
        )
        .await;
        self.tracker.spawn(sender.run(self.cancel.child_token()));
    }

    /// Binds `server.listen` and starts serving, the adapters' own routes merged in.
    pub(super) async fn start_http(
        &self,
        router: &Arc<LaneRouter>,
        model: String,
        metrics: PrometheusHandle,
        adapters: &[Box<dyn Adapter>],
        (webhooks, reload): (Arc<crate::webhooks::Inbound>, &Arc<crate::reload::Reloader>),
    ) -> anyhow::Result<SocketAddr> {
        let config = &self.config;
        let (listener, addr) = http::bind(config.server.listen)
            .await
            .with_context(|| format!("binding server.listen {}", config.server.listen))?;
        let extra_routes = adapters.iter().filter_map(|a| a.routes()).collect();
        let api_keys = match config.api.enabled {
            true => config
                .api
                .resolve()
                .map_err(|(key, message)| anyhow::anyhow!("{key}: {message}"))?,
            false => Vec::new(),
        };
        let state = HttpState {
            config: config.clone(),
            store: self.store.clone(),
            ingest: self.ingest.clone(),
            lanes: router.view(),
            replica_id: self.replica_id.clone(),
            model,
            metrics,
            access: Arc::new(http::Access::from_config(config)),
            approvals: self.approvals.clone(),
            api_keys: http::openai::ApiKeys::new(api_keys, config.api.max_concurrent_per_key),
            webhooks,
            reload: reload.clone(),
        };
        let app = http::routes(state, config, extra_routes);
        let limits = http::serve::Limits::from_config(config);
        http::serve::start(
            listener,
            app,
            limits,
            &self.tracker,
            self.cancel.child_token(),
        );
        Ok(addr)
    }

    /// Starts the scheduled loops: the cron scheduler, and the nightly handoff closer when
    /// `handoff.enabled`.
    pub(super) fn start_schedules(
        &self,
        cron: Option<Arc<Scheduler>>,
        nightly: &Arc<crate::handoff::NightlyCloser>,
    ) {
        if let Some(cron) = cron {
            self.tracker.spawn(cron.run(self.cancel.child_token()));
        }
        if self.config.handoff.enabled {
            self.tracker
                .spawn(nightly.clone().run(self.cancel.child_token()));
        }
    }

    /// What each adapter gets of the core when it starts.
    pub(super) fn edge(&self) -> Edge {
        Edge {
            ingest: self.ingest.clone(),
            approvals: self.approvals.clone(),
            store: self.store.clone(),
            replica_id: self.replica_id.clone(),
            config: self.config.clone(),
            auth: self.auth.clone(),
        }
    }
}
