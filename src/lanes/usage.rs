//! `/usage`: a person's own spending, today and this month, and what it went on — their
//! conversations (answers, handoff notes, helper agents) and the cron jobs they made — with
//! their daily cap and what is left of it when `budget.person_daily` is set. With `[[agents]]`,
//! the spending is also split by agent, with the person's cap at each agent that has one.
//!
//! Read from the spend ledger; a person sees only rows paid as them (the ledger's `person`
//! column is the payer's person key) and the runs of jobs they made in a chat.

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, Utc};

use super::Deps;
use crate::budget::Period;
use crate::domain::{Amount, Cap, MessageEvent};
use crate::store::{SpendRow, SpendScope, StoreError};

/// What one period's rows add up to.
#[derive(Default)]
struct Tally {
    total: i64,
    /// Calls billed in a bucket without a rate: counted at their worst case.
    unknown: usize,
    by: BTreeMap<String, i64>,
    agents: BTreeMap<String, i64>,
}

impl Tally {
    fn add(&mut self, row: &SpendRow) {
        let amount = row.counted();
        self.total += amount;
        if row.state == "settled" && row.cost.is_none() {
            self.unknown += 1;
        }
        *self.by.entry(what(row)).or_default() += amount;
        *self.agents.entry(row.agent.clone()).or_default() += amount;
    }

    fn lines(&self, head: &str, currency: &str, per_agent: bool, out: &mut String) {
        out.push_str(&format!(
            "{head}: {}\n",
            Amount(self.total).in_currency(currency)
        ));
        for (what, amount) in &self.by {
            out.push_str(&format!(
                "- {what}: {}\n",
                Amount(*amount).in_currency(currency)
            ));
        }
        for (agent, amount) in self.agents.iter().filter(|_| per_agent) {
            out.push_str(&format!(
                "- with the agent {agent}: {}\n",
                Amount(*amount).in_currency(currency)
            ));
        }
        if self.unknown > 0 {
            out.push_str(&format!(
                "({} call(s) had no known price and count at their worst case)\n",
                self.unknown
            ));
        }
    }
}

/// What a row was spent on, as its owner reads it.
fn what(row: &SpendRow) -> String {
    if let Some(job) = &row.job {
        return format!("cron job {job}");
    }
    match row.cause.as_str() {
        "turn" => "conversation (answers)".into(),
        "capsule" => "conversation (handoff notes)".into(),
        "child" => "conversation (helper agents)".into(),
        other => format!("conversation ({other})"),
    }
}

/// The `/usage` answer for the sender of `ev`.
pub(super) async fn usage_text(deps: &Deps, ev: &MessageEvent) -> Result<String, StoreError> {
    let Some(person) = deps.config.person(ev.platform.as_str(), &ev.sender_id) else {
        return Ok("Spending is counted per person, and there is no person here.".into());
    };
    report(deps, &person, Utc::now()).await
}

async fn report(deps: &Deps, person: &str, now: DateTime<Utc>) -> Result<String, StoreError> {
    let budget = &deps.budget;
    let store = &deps.store;
    let currency = &budget.config.currency;
    let period = budget.period(now);
    let since = Period::day_start_ms(&format!("{}-01", period.month), budget.tz).unwrap_or(0);
    // The jobs this person made in a chat: their runs are paid as them; the runs of before
    // payers were recorded are theirs too.
    let jobs: HashSet<String> = store
        .cron_jobs()
        .await?
        .into_iter()
        .filter(|j| {
            j.owner_person
                .as_deref()
                .and_then(crate::domain::Person::parse)
                .and_then(|p| deps.config.person(p.platform.as_str(), &p.id))
                .is_some_and(|p| p == person)
        })
        .map(|j| j.name)
        .collect();
    let (mut today, mut month) = (Tally::default(), Tally::default());
    for row in store.spend_rows(since).await? {
        let mine = row.person.as_deref() == Some(person)
            || row.job.as_ref().is_some_and(|j| jobs.contains(j));
        if !mine {
            continue;
        }
        month.add(&row);
        if row.day == period.day {
            today.add(&row);
        }
    }
    let mut out = String::new();
    let per_agent = !deps.config.agents.is_empty();
    today.lines(
        &format!("Your spending today ({})", period.day),
        currency,
        per_agent,
        &mut out,
    );
    month.lines(
        &format!("This month ({})", period.month),
        currency,
        per_agent,
        &mut out,
    );
    // The person's own caps: `[budget] person_daily`, then each agent's `budget.person_daily`.
    let mut charges = vec![payer(
        person,
        crate::config::DEFAULT_AGENT,
        Default::default(),
    )];
    charges.extend(
        deps.config
            .agents
            .iter()
            .map(|a| payer(person, &a.name, a.budget.clone())),
    );
    let mut seen = HashSet::new();
    for charge in &charges {
        for cap in budget.caps(charge, &period) {
            let (scope, head) = match &cap.cap {
                Cap::PersonDaily(_) => (
                    SpendScope::PersonDay {
                        person: person.to_string(),
                        day: period.day.clone(),
                    },
                    "Your daily budget".to_string(),
                ),
                Cap::AgentPersonDaily { agent, .. } => (
                    SpendScope::AgentPersonDay {
                        agent: agent.clone(),
                        person: person.to_string(),
                        day: period.day.clone(),
                    },
                    format!("Your daily budget with the agent {agent}"),
                ),
                _ => continue,
            };
            if seen.insert(cap.cap.clone()) {
                out.push_str(&standing(deps, &cap, &scope, &head, &period).await?);
            }
        }
    }
    Ok(out.trim_end().to_string())
}

/// One line: what `cap` allows today, what is spent under it and when it resets.
async fn standing(
    deps: &Deps,
    cap: &crate::store::CapLimit,
    scope: &SpendScope,
    head: &str,
    period: &Period,
) -> Result<String, StoreError> {
    let (budget, store) = (&deps.budget, &deps.store);
    let currency = &budget.config.currency;
    let spent = store.spend_sum(scope).await?;
    let limit = cap
        .limit
        .saturating_add(store.spend_granted(&cap.cap, &cap.period).await?);
    let local = period.day_ends.with_timezone(&budget.tz);
    Ok(format!(
        "{head}: {} of {} spent, {} left; it resets at {} ({}).\n",
        Amount(spent).in_currency(currency),
        Amount(limit).in_currency(currency),
        Amount((limit - spent).max(0)).in_currency(currency),
        local.format("%Y-%m-%d %H:%M"),
        budget.tz.name()
    ))
}

fn payer(person: &str, agent: &str, caps: crate::config::AgentBudget) -> crate::budget::Charge {
    crate::budget::Charge::new(
        String::new(),
        crate::domain::Payer::Person(person.to_string()),
        "turn",
    )
    .by_agent(agent, caps)
}
