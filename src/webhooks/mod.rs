//! Inbound webhooks (`[[hooks]]`): a CI failure, a monitoring alert or a form starts a run.
//!
//! `POST /hooks/<name>` (`http/hooks.rs`) hands the raw request to [`Inbound::receive`],
//! which refuses — writing nothing — an unknown hook (404), a body over the hook's cap (413),
//! a missing or wrong signature (401), more than `rate_per_min` deliveries (429) and a body
//! that is no JSON (400); drops what the `filter` excludes (200, nothing written); and writes
//! the rest as one scheduled event in the hook's lane `cron:hook:<name>`, keyed by the
//! delivery id, so a redelivery is the inbox's duplicate and runs nothing (200). Only then
//! does the sender get 202: the run comes after. The lane worker runs it as a cron fire
//! (lease, the targets, a mirror into each target lane); `notify` runs skip the model. Each
//! run is a manual fire of the job `hook:<name>` in the cron ledger, so `herald hooks log`,
//! `herald cron log` and the admin page read its outcome where cron runs are read.
//!
//! Must not: log or store the secret; answer before the inbox write; run a turn itself.

pub mod rate;
pub mod render;
pub mod verify;

use std::collections::HashMap;
use std::sync::Arc;

use axum::http::HeaderMap;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::Notify;

use crate::config::{Config, HookSpec, Secret};
use crate::domain::cron::{parse_target, Target, HOOK_NOTIFY_SENDER};
use crate::domain::{MessageEvent, Origin, Platform};
use crate::lanes::Ingest;
use crate::store::{InboxInsert, NewFire, Store, StoreError};

/// How a delivery was answered; the HTTP status is [`Answer::status`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Written to the inbox; the run follows (202).
    Accepted {
        delivery: String,
    },
    /// This delivery id was written before: nothing runs again (200).
    Duplicate {
        delivery: String,
    },
    /// The filter excluded it (200); nothing written.
    Filtered {
        why: String,
    },
    UnknownHook,
    TooLarge {
        limit: usize,
    },
    Unauthorized {
        why: &'static str,
    },
    RateLimited,
    NotJson,
}

impl Answer {
    pub fn status(&self) -> u16 {
        match self {
            Answer::Accepted { .. } => 202,
            Answer::Duplicate { .. } | Answer::Filtered { .. } => 200,
            Answer::UnknownHook => 404,
            Answer::TooLarge { .. } => 413,
            Answer::Unauthorized { .. } => 401,
            Answer::RateLimited => 429,
            Answer::NotJson => 400,
        }
    }

    /// The word for the log line and the metric.
    pub fn outcome(&self) -> &'static str {
        match self {
            Answer::Accepted { .. } => "accepted",
            Answer::Duplicate { .. } => "duplicate",
            Answer::Filtered { .. } => "filtered",
            Answer::UnknownHook => "unknown",
            Answer::TooLarge { .. } => "too_large",
            Answer::Unauthorized { .. } => "unauthorized",
            Answer::RateLimited => "rate_limited",
            Answer::NotJson => "not_json",
        }
    }
}

/// One configured hook, its secret resolved and its targets parsed.
struct Hook {
    spec: HookSpec,
    secret: Secret,
    targets: Vec<Target>,
    rate: rate::Window,
}

/// The receiving side of every `[[hooks]]` table, built once at start.
pub struct Inbound {
    /// By name; a reload replaces the whole map ([`Inbound::replace`]).
    hooks: std::sync::RwLock<Arc<HashMap<String, Arc<Hook>>>>,
    ingest: Ingest,
    store: Arc<dyn Store>,
    holder: String,
    /// Wakes the cron scheduler, which reads the run's outcome into its ledger row.
    poke: Arc<Notify>,
}

impl Inbound {
    /// Resolves each hook's secret (`secret_env` is read here, once); the error names the key.
    pub fn new(
        config: &Config,
        ingest: Ingest,
        store: Arc<dyn Store>,
        holder: &str,
        poke: Arc<Notify>,
    ) -> Result<Inbound, String> {
        Ok(Inbound {
            hooks: std::sync::RwLock::new(Arc::new(build(config)?)),
            ingest,
            store,
            holder: holder.to_string(),
            poke,
        })
    }

    /// Takes the `[[hooks]]` of a reloaded `config`: deliveries from now on meet them (a
    /// delivery being checked finishes with the hooks it started with). Nothing changes when
    /// one is invalid.
    pub fn replace(&self, config: &Config) -> Result<(), String> {
        let fresh = Arc::new(build(config)?);
        *self.hooks.write().expect("hooks lock") = fresh;
        Ok(())
    }
}

/// Each hook of `config`, its secret resolved (`secret_env` is read here) and its targets
/// parsed; the error names the key.
fn build(config: &Config) -> Result<HashMap<String, Arc<Hook>>, String> {
    let known = config.deliverable();
    let mut hooks = HashMap::new();
    for (i, spec) in config.hooks.iter().enumerate() {
        let secret = spec
            .resolve_secret()
            .map_err(|e| format!("hooks[{i}].secret_env: {e}"))?;
        let targets = spec
            .deliver
            .iter()
            .map(|t| parse_target(t, &known).map_err(|e| format!("hooks[{i}].deliver: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        let hook = Hook {
            rate: rate::Window::per_minute(spec.rate_per_min),
            spec: spec.clone(),
            secret,
            targets,
        };
        hooks.insert(spec.name.clone(), Arc::new(hook));
    }
    Ok(hooks)
}

impl Inbound {
    /// Checks, filters and records one delivery; see the module's header for the order.
    pub async fn receive(
        &self,
        name: &str,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<Answer, StoreError> {
        let answer = self.decide(name, headers, body).await;
        let outcome = answer.as_ref().map_or("store_error", Answer::outcome);
        metrics::counter!("herald_webhook_deliveries_total", "outcome" => outcome).increment(1);
        match &answer {
            Ok(Answer::Accepted { delivery }) | Ok(Answer::Duplicate { delivery }) => {
                tracing::info!(hook = name, delivery, outcome, "webhook delivery")
            }
            Ok(Answer::Filtered { why }) => {
                tracing::info!(
                    hook = name,
                    outcome,
                    why,
                    "webhook delivery dropped by its filter"
                )
            }
            Ok(Answer::UnknownHook) => tracing::info!(outcome, "webhook for an unknown hook"),
            Ok(a) => tracing::warn!(hook = name, outcome, reason = ?a, "webhook delivery refused"),
            Err(e) => tracing::warn!(hook = name, error = %e, "webhook delivery not recorded"),
        }
        answer
    }

    async fn decide(
        &self,
        name: &str,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<Answer, StoreError> {
        let hooks = self.hooks.read().expect("hooks lock").clone();
        let Some(hook) = hooks.get(name) else {
            return Ok(Answer::UnknownHook);
        };
        if body.len() > hook.spec.max_body_bytes {
            return Ok(Answer::TooLarge {
                limit: hook.spec.max_body_bytes,
            });
        }
        if let Err(why) = verify::check(hook.spec.signature, &hook.secret, headers, body) {
            return Ok(Answer::Unauthorized { why: why.as_str() });
        }
        if !hook.rate.admit() {
            return Ok(Answer::RateLimited);
        }
        let Ok(payload) = serde_json::from_slice::<Value>(body) else {
            return Ok(Answer::NotJson);
        };
        if let Err(why) = render::passes(&hook.spec.filter, &payload, headers) {
            return Ok(Answer::Filtered { why });
        }
        let delivery = delivery_id(headers, body);
        let ev = event(hook, &delivery, &payload);
        match self.ingest.ingest(&ev).await? {
            InboxInsert::Duplicate(_) => Ok(Answer::Duplicate { delivery }),
            InboxInsert::Inserted(inbox) => {
                self.record(hook, &delivery, inbox).await;
                Ok(Answer::Accepted { delivery })
            }
        }
    }

    /// The run's row in the cron ledger (its outcome is read in by the scheduler). A failure
    /// here loses only the log line, never the run: the event is already in the inbox.
    async fn record(&self, hook: &Hook, delivery: &str, inbox: i64) {
        let now = crate::store::now_ms();
        for at in now..now + 8 {
            let fire = NewFire {
                job: hook.spec.job(),
                scheduled_at: at,
                manual: true,
                holder: self.holder.clone(),
                claim_until: at + crate::cron::scheduler::CLAIM_TTL_MS,
                missed_count: 0,
                note: Some(format!("delivery {delivery}")),
            };
            match self.store.cron_fire_claim(&fire).await {
                Ok(Some(id)) => {
                    if let Err(e) = self.store.cron_fire_set_inbox(id, inbox).await {
                        tracing::warn!(hook = %hook.spec.name, error = %e, "webhook run not linked to its log row");
                    }
                    self.poke.notify_one();
                    return;
                }
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(hook = %hook.spec.name, error = %e, "webhook run not logged");
                    return;
                }
            }
        }
    }
}

/// The sender's delivery id (`X-GitHub-Delivery`, `Idempotency-Key`), else a hash of the
/// body; an id that is long or holds other characters than `A-Z a-z 0-9 . _ : -` is hashed.
pub fn delivery_id(headers: &HeaderMap, body: &[u8]) -> String {
    let given = ["x-github-delivery", "idempotency-key"]
        .iter()
        .find_map(|h| headers.get(*h).and_then(|v| v.to_str().ok()))
        .map(str::trim)
        .filter(|s| !s.is_empty());
    let hash = |b: &[u8]| hex::encode(&Sha256::digest(b)[..16]);
    match given {
        Some(id)
            if id.len() <= 100
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')) =>
        {
            id.to_string()
        }
        Some(id) => format!("id-{}", hash(id.as_bytes())),
        None => format!("body-{}", hash(body)),
    }
}

/// The scheduled event of one delivery, in the hook's lane, keyed by its delivery id.
fn event(hook: &Hook, delivery: &str, payload: &Value) -> MessageEvent {
    let sender = match hook.spec.mode {
        crate::config::HookMode::Agent => "hook",
        crate::config::HookMode::Notify => HOOK_NOTIFY_SENDER,
    };
    let text = render::message(&hook.spec, payload);
    let mut ev = MessageEvent::text(Platform::CRON, &hook.spec.job(), sender, &text);
    ev.sender_name = format!("webhook {}", hook.spec.name);
    ev.platform_message_id = format!("{}:{delivery}", hook.spec.job());
    ev.origin = Origin::Scheduled {
        deliver_to: hook.targets.clone(),
    };
    ev
}
