//! The meter of one turn: before each model call it reserves the call's worst case under every
//! cap that applies to the payer (refusing the call when one would pass), after the call it
//! settles the hold to the bill, and it sums what the turn spent for the turn's row.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::{Budget, Charge};
use crate::llm::{ChatRequest, Hold, LlmError, Meter, Usage};
use crate::store::{Billed, CapHit, NewHold, Reserved};

/// How long a hold counts when its call never settles (the process died mid-call).
const HOLD_TTL_MS: i64 = 15 * 60 * 1000;

/// What a turn's calls billed and cost (`cost` is `None` once any call's cost was unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spent {
    pub billed: Billed,
    pub cost: Option<i64>,
    pub calls: u32,
}

impl Default for Spent {
    fn default() -> Self {
        Spent {
            billed: Billed::default(),
            cost: Some(0),
            calls: 0,
        }
    }
}

pub struct TurnMeter {
    budget: Arc<Budget>,
    charge: Charge,
    /// Shared with the turn's child agents: their calls count in the turn's row.
    spent: Arc<Mutex<Spent>>,
    /// Holds reserved and not yet settled: a call cut off (`/stop`, the turn's deadline, a
    /// lost lease) never settles, and [`TurnMeter::release_open`] lets them go. Shared with
    /// the children too, so the turn's end lets theirs go.
    open: Arc<Mutex<Vec<Reserved>>>,
}

impl TurnMeter {
    pub(super) fn new(budget: Arc<Budget>, charge: Charge) -> TurnMeter {
        TurnMeter {
            budget,
            charge,
            spent: Arc::new(Mutex::new(Spent::default())),
            open: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Releases the holds of calls that were cut off before they settled (the turn is over).
    /// What such a call billed is not known; it counts as nothing rather than as its worst case.
    pub async fn release_open(&self) {
        let open = std::mem::take(&mut *self.open.lock().expect("open lock"));
        for r in open {
            if let Err(e) = self.budget.store().spend_release(r.id).await {
                tracing::warn!(error = %e, "releasing a cut-off call's hold failed; it expires on its own");
            }
        }
    }

    /// What the turn's calls have billed so far.
    pub fn spent(&self) -> Spent {
        *self.spent.lock().expect("spent lock")
    }

    /// The same charge, for a child agent's calls: they count with the parent's turn.
    pub fn child(&self) -> TurnMeter {
        TurnMeter {
            budget: self.budget.clone(),
            charge: Charge {
                cause: "child",
                ..self.charge.clone()
            },
            spent: self.spent.clone(),
            open: self.open.clone(),
        }
    }

    fn refuse(&self, hit: &CapHit, period: &super::Period) -> LlmError {
        metrics::counter!("herald_budget_cap_hits_total", "cap" => hit.cap.kind()).increment(1);
        tracing::info!(cap = %hit.cap, agent = %self.charge.agent, spent = hit.spent, limit = hit.limit, lane = %self.charge.lane,
            "a spending cap refused a model call");
        LlmError::OverBudget(self.budget.refusal(hit, period, &self.charge))
    }

    /// The ledger row of a call to `model` in `period`, holding `held`.
    fn row(&self, model: &str, period: &super::Period, held: i64) -> NewHold {
        NewHold {
            lane: self.charge.lane.clone(),
            agent: self.charge.agent.clone(),
            payer: self.charge.payer.clone(),
            job: self.charge.job.clone(),
            run: self.charge.run.clone(),
            cause: self.charge.cause.to_string(),
            model: model.to_string(),
            day: period.day.clone(),
            month: period.month.clone(),
            held,
            expires_at: chrono::Utc::now().timestamp_millis() + HOLD_TTL_MS,
        }
    }

    /// After a settle: tells the approvers once when this call took a cap past `warn_at`
    /// (where the caps stood at its reservation, plus what it cost). No extra reads.
    async fn warn_if_near(&self, caps: Vec<CapHit>, cost: i64) {
        let Some(events) = self.budget.events() else {
            return;
        };
        let warn_at = self.budget.config.warn_at;
        for mut cap in caps {
            let threshold = cap.limit as f64 * warn_at;
            let after = cap.spent.saturating_add(cost);
            if (cap.spent as f64) >= threshold || (after as f64) < threshold {
                continue;
            }
            cap.spent = after;
            if let Ok(true) = self
                .budget
                .store()
                .budget_notice_once(&cap.cap, &cap.period, "near")
                .await
            {
                events.cap_near(&cap, &self.charge).await;
            }
        }
    }
}

/// A worst-case guess of the request's prompt tokens: a token per three bytes of text (no
/// script packs more), each image or audio part at its own estimate, the tool schemas included.
fn prompt_bound(req: &ChatRequest) -> u64 {
    let mut bytes = serde_json::to_string(&req.tools).map_or(0, |s| s.len());
    let mut parts = 0usize;
    for m in &req.messages {
        bytes += m.content.as_deref().map_or(0, str::len) + 8;
        for c in &m.tool_calls {
            bytes += c.name.len() + c.arguments.len();
        }
        parts += m.parts.iter().map(crate::llm::Part::tokens).sum::<usize>();
    }
    (bytes.div_ceil(3) + parts) as u64
}

#[async_trait]
impl Meter for TurnMeter {
    fn child(&self) -> Option<Box<dyn Meter>> {
        Some(Box::new(TurnMeter::child(self)))
    }

    async fn reserve(&self, model: &str, req: &ChatRequest) -> Result<Hold, LlmError> {
        let budget = &self.budget;
        let capped = budget.capped(&self.charge);
        if capped && !budget.prices.priced(model) {
            metrics::counter!("herald_budget_cap_hits_total", "cap" => "unpriced").increment(1);
            tracing::warn!(
                model,
                "a spending cap is on and the model has no price; call refused"
            );
            return Err(LlmError::OverBudget(budget.unpriced(model)));
        }
        let period = budget.period(chrono::Utc::now());
        let caps = budget.caps(&self.charge, &period);
        if caps.is_empty() {
            // Nothing to hold against: the call is written once, when it is billed (and the
            // request is not measured for a worst case nobody reads).
            return Ok(Hold(0));
        }
        let worst = budget
            .prices
            .rates(model)
            .and_then(|r| r.worst_case(prompt_bound(req), budget.max_output));
        let hold = self.row(model, &period, worst.unwrap_or(0));
        match budget.store().spend_reserve(&hold, &caps).await {
            Ok(Ok(reserved)) => {
                let id = reserved.id;
                self.open.lock().expect("open lock").push(reserved);
                Ok(Hold(id))
            }
            Ok(Err(hit)) => {
                if let Some(events) = budget.events() {
                    events.cap_reached(&hit, &self.charge).await;
                }
                Err(self.refuse(&hit, &period))
            }
            Err(e) if capped => {
                tracing::warn!(error = %e, "the spend ledger is unavailable; call refused");
                Err(LlmError::Transient(format!(
                    "spend ledger unavailable: {e}"
                )))
            }
            Err(e) => {
                // Without caps the ledger is bookkeeping: a turn does not fail over it.
                tracing::warn!(error = %e, "the spend ledger is unavailable; call not recorded");
                Ok(Hold(0))
            }
        }
    }

    async fn settle(&self, hold: Hold, model: &str, usage: Option<Usage>) {
        let store = self.budget.store();
        let reserved = {
            let mut open = self.open.lock().expect("open lock");
            let at = open.iter().position(|r| r.id == hold.0);
            at.map(|i| open.swap_remove(i))
        };
        let Some(usage) = usage else {
            if hold.0 != 0 {
                if let Err(e) = store.spend_release(hold.0).await {
                    tracing::warn!(error = %e, "releasing a spend hold failed; it expires on its own");
                }
            }
            return;
        };
        let cost = self.budget.prices.rates(model).and_then(|r| r.cost(&usage));
        let billed = Billed {
            fresh_input: usage.fresh_input as i64,
            output: usage.output as i64,
            cache_read: usage.cache_read as i64,
            cache_write: usage.cache_write as i64,
        };
        {
            let mut s = self.spent.lock().expect("spent lock");
            s.billed.fresh_input += billed.fresh_input;
            s.billed.output += billed.output;
            s.billed.cache_read += billed.cache_read;
            s.billed.cache_write += billed.cache_write;
            s.cost = s.cost.zip(cost).map(|(a, b)| a + b);
            s.calls += 1;
        }
        if let Some(c) = cost {
            metrics::counter!("herald_spend_total", "currency" => self.budget.config.currency.clone())
                .increment(c.max(0) as u64);
        }
        if hold.0 == 0 {
            let row = self.row(model, &self.budget.period(chrono::Utc::now()), 0);
            if let Err(e) = store.spend_record(&row, cost, billed).await {
                tracing::warn!(error = %e, "recording a model call's spend failed");
            }
            return;
        }
        if let Err(e) = store.spend_settle(hold.0, cost, billed).await {
            tracing::warn!(error = %e, "settling a spend hold failed; it counts at its hold until it expires");
        }
        if let Some(r) = reserved {
            // An unknown cost cannot say how near the cap is; the next priced call will.
            self.warn_if_near(r.caps, cost.unwrap_or(0)).await;
        }
    }
}
