//! Budgets: every model call priced, reserved at its worst case before it is sent, settled to
//! its bill after, and refused when it would pass a cap — all day, all month, one person's day,
//! one cron run.
//!
//! The ledger lives in the store (`store::spend`), so replicas and restarts share it; this
//! module decides prices, which caps apply to whom, and what a person is told. It plugs into
//! every model call through [`crate::llm::Meter`] ([`TurnMeter`]). Caps are read from the
//! config loaded at start, never from the environment on a hot path.

mod meter;
mod period;
mod prices;
pub mod report;

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use crate::config::{person_key, to_nanos, AgentBudget, BudgetConfig, Config, Person};
use crate::domain::{Amount, Cap, Payer};
use crate::store::{CapHit, CapLimit, CronJobRow, SpendScope, Store};

pub use meter::{Spent, TurnMeter};
pub use period::Period;
pub use prices::{PriceTable, Rates};

/// Whose spending a call is, and under which caps of its own.
#[derive(Debug, Clone, PartialEq)]
pub struct Charge {
    pub lane: String,
    /// Who pays: a person (their caps apply) or the system. Never absent: a scheduled run of
    /// a job made in a chat is its maker's ([`Budget::job_payer`]).
    pub payer: Payer,
    /// The cron job of a scheduled run, with its run key and its own cap (if any).
    pub job: Option<String>,
    pub run: Option<String>,
    pub job_cap: Option<f64>,
    /// `turn`, `capsule`, `child`.
    pub cause: &'static str,
    /// The agent whose calls these are (its rows carry it; its own caps count its rows only).
    pub agent: String,
    /// That agent's caps, read from the live roster for this turn (none for the default).
    pub agent_caps: AgentBudget,
}

impl Charge {
    /// A call of `cause` in `lane`, paid by `payer`, outside any cron run.
    pub fn new(lane: impl Into<String>, payer: Payer, cause: &'static str) -> Charge {
        Charge {
            lane: lane.into(),
            payer,
            job: None,
            run: None,
            job_cap: None,
            cause,
            agent: crate::config::DEFAULT_AGENT.to_string(),
            agent_caps: AgentBudget::default(),
        }
    }

    /// The same charge, made by agent `name` under its own caps `caps`.
    pub fn by_agent(self, name: &str, caps: AgentBudget) -> Charge {
        Charge {
            agent: name.to_string(),
            agent_caps: caps,
            ..self
        }
    }
}

/// Told when a cap is reached or nearly spent, so the approvers can hear of it (the lanes layer
/// sends the notices and the extension questions).
#[async_trait]
pub trait BudgetEvents: Send + Sync {
    /// A call was refused by `hit`.
    async fn cap_reached(&self, hit: &CapHit, charge: &Charge);
    /// `hit.spent` has passed `budget.warn_at` of `hit.limit` (once per cap and period).
    async fn cap_near(&self, hit: &CapHit, charge: &Charge);
}

/// The budget of one daemon: its config, price table and the shared ledger.
pub struct Budget {
    pub config: BudgetConfig,
    pub prices: PriceTable,
    pub tz: Tz,
    /// Most tokens one answer may have (`llm.max_tokens`): the worst case's output.
    pub max_output: u64,
    /// `[[people]]`: a person's identities share one payer key.
    people: Vec<Person>,
    store: Arc<dyn Store>,
    events: std::sync::OnceLock<Arc<dyn BudgetEvents>>,
}

impl Budget {
    pub fn new(config: &Config, store: Arc<dyn Store>) -> Arc<Budget> {
        let budget = &config.budget;
        Arc::new(Budget {
            prices: PriceTable::new(&budget.prices),
            tz: budget.timezone.parse().unwrap_or(chrono_tz::UTC),
            config: budget.clone(),
            max_output: u64::from(config.llm.max_tokens),
            people: config.people.clone(),
            store,
            events: std::sync::OnceLock::new(),
        })
    }

    /// Who hears of caps reached and nearly spent (set once, when the daemon is wired).
    pub fn set_events(&self, events: Arc<dyn BudgetEvents>) {
        let _ = self.events.set(events);
    }

    /// Who hears of caps (the same for every agent's budget).
    pub fn events(&self) -> Option<&Arc<dyn BudgetEvents>> {
        self.events.get()
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// A cap applies to `charge`: an unpriced model is refused rather than spent blind.
    pub fn capped(&self, charge: &Charge) -> bool {
        self.config.has_caps()
            || charge.job_cap.is_some()
            || charge.agent_caps.daily.is_some()
            || charge.agent_caps.person_daily.is_some()
    }

    /// The meter of one turn (or one capsule) charged as `charge`.
    pub fn meter(self: &Arc<Budget>, charge: Charge) -> TurnMeter {
        TurnMeter::new(self.clone(), charge)
    }

    /// Who pays for what the sender `platform:sender` asked (see [`payer_of`]).
    pub fn payer_of(&self, platform: &str, sender: &str) -> Payer {
        payer_of(&self.people, platform, sender)
    }

    /// Who pays for a run of `job` (see [`job_payer`]).
    pub fn job_payer(&self, job: &CronJobRow) -> Payer {
        job_payer(&self.people, job)
    }

    pub fn period(&self, now: DateTime<Utc>) -> Period {
        Period::at(now, self.tz)
    }

    /// The caps that apply to `charge` in `period`, with the names their grants are filed
    /// under.
    pub fn caps(&self, charge: &Charge, period: &Period) -> Vec<CapLimit> {
        let c = &self.config;
        let mut out = Vec::new();
        if let Some(v) = c.daily {
            out.push(cap(
                Cap::Daily,
                &period.day,
                SpendScope::Day(period.day.clone()),
                v,
            ));
        }
        if let Some(v) = c.monthly {
            out.push(cap(
                Cap::Monthly,
                &period.month,
                SpendScope::Month(period.month.clone()),
                v,
            ));
        }
        if let (Some(v), Payer::Person(person)) = (c.person_daily, &charge.payer) {
            out.push(cap(
                Cap::PersonDaily(person.clone()),
                &period.day,
                SpendScope::PersonDay {
                    person: person.clone(),
                    day: period.day.clone(),
                },
                v,
            ));
        }
        if let (Some(job), Some(run)) = (&charge.job, &charge.run) {
            if let Some(v) = charge.job_cap.or(c.cron_run) {
                out.push(cap(
                    Cap::CronRun(job.clone()),
                    &period.day,
                    SpendScope::Run(run.clone()),
                    v,
                ));
            }
        }
        out.extend(agent_caps(charge, period));
        out
    }

    /// The one line a person reads when `hit` refused a call of `charge` (for a cron run, the
    /// line `herald cron log` shows).
    pub fn refusal(&self, hit: &CapHit, period: &Period, charge: &Charge) -> String {
        let cur = &self.config.currency;
        let spent = Amount(hit.spent).in_currency(cur);
        let limit = Amount(hit.limit).in_currency(cur);
        let day_reset = self.reset_line(period.day_ends);
        match &hit.cap {
            Cap::PersonDaily(person) if charge.job.is_some() => format!(
                "This scheduled run is paid by {person}, who has reached their daily budget \
                 ({spent} of {limit} spent today); skipped. It resets {day_reset}."
            ),
            Cap::PersonDaily(_) => format!(
                "You have reached your daily budget ({spent} of {limit} spent today), so I \
                 stopped before asking the model. It resets {day_reset}."
            ),
            Cap::Monthly => format!(
                "This month's budget is spent ({spent} of {limit}), so I stopped before asking \
                 the model. It resets {}.",
                self.reset_line(period.month_ends)
            ),
            Cap::CronRun(_) => format!(
                "This scheduled run would pass its budget ({spent} of {limit} spent); skipped."
            ),
            Cap::Daily => format!(
                "Today's budget is spent ({spent} of {limit}), so I stopped before asking the \
                 model. It resets {day_reset}."
            ),
            Cap::AgentDaily(agent) => format!(
                "The agent {agent} has spent its budget for today ({spent} of {limit}), so I \
                 stopped before asking the model. It resets {day_reset}."
            ),
            Cap::AgentPersonDaily { agent, .. } => format!(
                "You have reached your daily budget with the agent {agent} ({spent} of {limit} \
                 spent today), so I stopped before asking the model. It resets {day_reset}."
            ),
        }
    }

    /// The line for a model without a price while caps are on (fail closed).
    pub fn unpriced(&self, model: &str) -> String {
        format!(
            "The model {model} has no price in [[budget.prices]] while spending caps are on, so \
             I did not use it; the operator needs to add its price."
        )
    }

    fn reset_line(&self, at: DateTime<Utc>) -> String {
        let local = at.with_timezone(&self.tz);
        format!("at {} ({})", local.format("%Y-%m-%d %H:%M"), self.tz.name())
    }
}

/// Who pays for what the sender `platform:sender` asked: that person, across their linked
/// identities in `people`; the system when nobody sent it (an internal event).
pub fn payer_of(people: &[Person], platform: &str, sender: &str) -> Payer {
    person_key(people, platform, sender).map_or(Payer::System, Payer::Person)
}

/// Who pays for a run of `job`: the person who made it in a chat, whose caps apply whether or
/// not they may still use the agent; the system for the operator's config and CLI jobs.
pub fn job_payer(people: &[Person], job: &CronJobRow) -> Payer {
    job.owner_person
        .as_deref()
        .and_then(crate::domain::Person::parse)
        .map_or(Payer::System, |p| {
            payer_of(people, p.platform.as_str(), &p.id)
        })
}

/// The caps of `charge`'s own agent (`[[agents]] budget`), counted over that agent's rows only.
fn agent_caps(charge: &Charge, period: &Period) -> Vec<CapLimit> {
    let agent = &charge.agent;
    let mut out = Vec::new();
    if let Some(v) = charge.agent_caps.daily {
        out.push(cap(
            Cap::AgentDaily(agent.clone()),
            &period.day,
            SpendScope::AgentDay {
                agent: agent.clone(),
                day: period.day.clone(),
            },
            v,
        ));
    }
    if let (Some(v), Payer::Person(person)) = (charge.agent_caps.person_daily, &charge.payer) {
        out.push(cap(
            Cap::AgentPersonDaily {
                agent: agent.clone(),
                person: person.clone(),
            },
            &period.day,
            SpendScope::AgentPersonDay {
                agent: agent.clone(),
                person: person.clone(),
                day: period.day.clone(),
            },
            v,
        ));
    }
    out
}

fn cap(cap: Cap, period: &str, scope: SpendScope, limit: f64) -> CapLimit {
    CapLimit {
        cap,
        period: period.to_string(),
        scope,
        limit: to_nanos(limit),
    }
}
