//! The approvers' side of budgets: when a cap is nearly spent each approver gets one plain
//! notice, and when a cap refuses a call each approver gets — once per cap and period — a
//! durable question with Approve / Deny buttons to spend up to the cap's own amount more.
//!
//! Approvers are `budget.approvers`: a `[[people]]` name (reached at each of its identities) or
//! a `platform:id` identity. A Telegram identity is asked in its private chat with the bot and
//! a web identity in its web conversation (`web:<name>`); a Discord user id names no channel
//! the bot can write to, so Discord approvers are not reached (the daemon logs it at start).
//! The question is an ordinary approval row (tool `budget`) answered through the approval desk
//! (`approvals/budget.rs`), which grants the extension. A reload replaces the approvers, the
//! currency and the time zone in place ([`BudgetNotices::replace`]).

use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use serde_json::json;
use tokio::sync::Notify;

use crate::budget::{BudgetEvents, Charge, Period};
use crate::config::{spec, BudgetConfig, Config};
use crate::delivery::{Ask, Outbounds};
use crate::domain::{Amount, Cap, LaneKey, Person, Platform};
use crate::store::{now_ms, CapHit, NewApproval, NewOutbox, OutboxKey, Store};

/// The `tool` of a budget extension's approval row.
pub const BUDGET_TOOL: &str = "budget";

/// The identities (`platform:id`) `budget.approvers` names: a `[[people]]` name stands for
/// each of its linked identities.
pub fn approver_identities(config: &Config) -> Vec<String> {
    let mut out = Vec::new();
    for a in &config.budget.approvers {
        match config.people.iter().find(|p| &p.name == a) {
            Some(p) => out.extend(p.ids.iter().cloned()),
            None => out.push(a.clone()),
        }
    }
    out.sort();
    out.dedup();
    out
}

/// An approver's chat.
struct Reach {
    identity: String,
    platform: Platform,
    chat_id: String,
}

impl Reach {
    fn lane(&self) -> LaneKey {
        LaneKey::from_parts(self.platform.as_str(), &self.chat_id, None)
    }
}

pub struct BudgetNotices {
    store: Arc<dyn Store>,
    outbounds: Outbounds,
    outbox_wake: Arc<Notify>,
    /// What a reload replaces: read once per event.
    live: RwLock<Arc<Live>>,
}

/// The configuration a notice reads.
struct Live {
    budget: BudgetConfig,
    tz: chrono_tz::Tz,
    approvers: Vec<Reach>,
}

impl Live {
    fn of(config: &Config) -> Live {
        let mut approvers = Vec::new();
        for identity in approver_identities(config) {
            let person = Person::parse(&identity);
            match person.filter(|p| spec(p.platform).is_some_and(|s| s.dm_by_person_id)) {
                Some(Person { platform, id }) => approvers.push(Reach {
                    chat_id: id,
                    platform,
                    identity: identity.clone(),
                }),
                _ => tracing::warn!(approver = %identity,
                    "a budget approver Herald cannot write to (use an identity whose platform has private chats by person id, such as telegram:<id> or web:<name>); not asked"),
            }
        }
        Live {
            tz: config.budget.timezone.parse().unwrap_or(chrono_tz::UTC),
            budget: config.budget.clone(),
            approvers,
        }
    }

    fn money(&self, nanos: i64) -> String {
        Amount(nanos).in_currency(&self.budget.currency)
    }
}

impl BudgetNotices {
    pub fn new(
        config: &Config,
        store: Arc<dyn Store>,
        outbounds: Outbounds,
        outbox_wake: Arc<Notify>,
    ) -> BudgetNotices {
        BudgetNotices {
            store,
            outbounds,
            outbox_wake,
            live: RwLock::new(Arc::new(Live::of(config))),
        }
    }

    /// Takes `budget.approvers` (and the `[[people]]` they name), the currency and the time
    /// zone of a reloaded configuration; the next notice uses them. A reload part that makes
    /// the budget's own keys live calls it too.
    pub fn replace(&self, config: &Config) {
        *self.live.write().expect("budget notices") = Arc::new(Live::of(config));
    }

    fn live(&self) -> Arc<Live> {
        self.live.read().expect("budget notices").clone()
    }

    /// The question, opened once per approver (a second call finds the same row).
    async fn ask(&self, r: &Reach, hit: &CapHit, amount: i64, text: &str) {
        let now = now_ms();
        let period = Period::at(chrono::Utc::now(), self.live().tz);
        let ends = if hit.cap == Cap::Monthly {
            period.month_ends
        } else {
            period.day_ends
        };
        let new = NewApproval {
            id: uuid::Uuid::new_v4().simple().to_string(),
            lane: r.lane(),
            inbox_id: 0,
            call_index: 0,
            call_hash: format!("budget:{}:{}", hit.cap, hit.period),
            tool: BUDGET_TOOL.into(),
            arguments: json!({"cap": hit.cap, "period": hit.period, "amount": amount}).to_string(),
            person: r.identity.clone(),
            platform: r.platform.as_str().into(),
            chat_id: r.chat_id.clone(),
            thread_id: None,
            deadline: ends.timestamp_millis(),
            now,
        };
        let row = match self.store.approval_open(&new).await {
            Ok(row) if row.prompt_message_id.is_none() => row,
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(error = %e, approver = %r.identity, "cannot record a budget extension question");
                return;
            }
        };
        let Some(out) = self.outbounds.get(r.platform) else {
            return;
        };
        let ask = Ask {
            chat_id: &row.chat_id,
            thread_id: None,
            approval_id: &row.id,
            text,
        };
        match out.ask(&ask).await {
            Ok(msg) => {
                if let Err(e) = self.store.approval_prompted(&row.id, &msg).await {
                    tracing::warn!(error = %e, "cannot record the budget question's message id");
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, approver = %r.identity, "cannot ask a budget approver")
            }
        }
    }
}

/// Whose spending the cap limits, as an approver reads it, and over what time.
fn subject(cap: &Cap) -> (String, &'static str) {
    match cap {
        Cap::PersonDaily(person) => (person.clone(), "today"),
        Cap::CronRun(job) => (format!("the cron job {job}"), "today"),
        Cap::Monthly => ("all spending".into(), "this month"),
        Cap::Daily => ("all spending".into(), "today"),
        Cap::AgentDaily(agent) => (format!("the agent {agent}"), "today"),
        Cap::AgentPersonDaily { agent, person } => {
            (format!("{person} with the agent {agent}"), "today")
        }
    }
}

#[async_trait]
impl BudgetEvents for BudgetNotices {
    async fn cap_reached(&self, hit: &CapHit, _charge: &Charge) {
        let live = self.live();
        if live.approvers.is_empty() {
            return;
        }
        match self
            .store
            .budget_notice_once(&hit.cap, &hit.period, "reached")
            .await
        {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                tracing::warn!(error = %e, cap = %hit.cap, "cannot mark a budget question; approvers not asked");
                return;
            }
        }
        let amount = hit.base;
        let (who, when) = subject(&hit.cap);
        let text = format!(
            "The budget for {who} is reached ({} of {} spent {when}). Spend up to {} more {when} on {who}?",
            live.money(hit.spent),
            live.money(hit.limit),
            live.money(amount)
        );
        for r in &live.approvers {
            self.ask(r, hit, amount, &text).await;
        }
    }

    async fn cap_near(&self, hit: &CapHit, _charge: &Charge) {
        let (who, when) = subject(&hit.cap);
        let live = self.live();
        let text = format!(
            "{who} has spent {} of {} {when}.",
            live.money(hit.spent),
            live.money(hit.limit)
        );
        let rows: Vec<NewOutbox> = live
            .approvers
            .iter()
            .map(|r| NewOutbox {
                key: OutboxKey::Single(format!(
                    "budget-near:{}:{}:{}",
                    hit.cap, hit.period, r.identity
                )),
                lane: r.lane(),
                platform: r.platform,
                chat_id: r.chat_id.clone(),
                thread_id: None,
                reply_to: None,
                inbox_id: None,
                chunk_index: 0,
                text: text.clone(),
                media: None,
            })
            .collect();
        if rows.is_empty() {
            return;
        }
        match self.store.outbox_enqueue(&rows).await {
            Ok(()) => self.outbox_wake.notify_one(),
            Err(e) => tracing::warn!(error = %e, cap = %hit.cap, "cannot queue a budget notice"),
        }
    }
}
