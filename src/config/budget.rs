//! The `[budget]` section: what each model costs and how much may be spent — in all, per
//! person, per cron run — before a call is refused.
//!
//! Only settings live here; the ledger and the caps are `crate::budget`'s job. Amounts are
//! written in the currency's units (`1.5` = one and a half dollars) and kept exactly as
//! billionths once loaded, so sums never drift.

use serde::{Deserialize, Serialize};

use crate::domain::Amount;

pub use crate::domain::NANOS_PER_UNIT;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetConfig {
    /// The currency prices and caps are written in (a label: Herald converts nothing).
    pub currency: String,
    /// The timezone whose midnight starts a budget day (an IANA name such as `Europe/Berlin`).
    pub timezone: String,
    /// All spending of one day.
    pub daily: Option<f64>,
    /// All spending of one calendar month.
    pub monthly: Option<f64>,
    /// One person's spending of one day (a `[[people]]` entry counts across its platforms).
    pub person_daily: Option<f64>,
    /// One cron fire, for jobs without a cap of their own.
    pub cron_run: Option<f64>,
    /// Approvers hear once per cap and period when this share of a cap is spent.
    pub warn_at: f64,
    /// `[[people]]` names (or `platform:id` identities) asked to extend a cap that is reached.
    pub approvers: Vec<String>,
    /// Rates per million tokens, first match wins.
    pub prices: Vec<PriceConfig>,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        BudgetConfig {
            currency: "USD".into(),
            timezone: "UTC".into(),
            daily: None,
            monthly: None,
            person_daily: None,
            cron_run: None,
            warn_at: 0.8,
            approvers: Vec::new(),
            prices: Vec::new(),
        }
    }
}

/// One model's rates, per million tokens of each bucket. A bucket left out has no rate: a call
/// that bills tokens in it has an unknown cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceConfig {
    /// A glob over the model id (`gpt-4o*`, `claude-sonnet-4-*`).
    pub model: String,
    pub input: Option<f64>,
    pub output: Option<f64>,
    pub cache_read: Option<f64>,
    pub cache_write: Option<f64>,
}

impl BudgetConfig {
    /// Some cap is set: unpriced models are refused.
    pub fn has_caps(&self) -> bool {
        self.daily.is_some()
            || self.monthly.is_some()
            || self.person_daily.is_some()
            || self.cron_run.is_some()
    }

    /// The first broken rule as (key, message).
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if self.timezone.parse::<chrono_tz::Tz>().is_err() {
            return Err((
                "budget.timezone",
                format!("{:?} is not an IANA timezone name", self.timezone),
            ));
        }
        if self.currency.trim().is_empty() {
            return Err(("budget.currency", "must not be empty".into()));
        }
        for (key, cap) in [
            ("budget.daily", self.daily),
            ("budget.monthly", self.monthly),
            ("budget.person_daily", self.person_daily),
            ("budget.cron_run", self.cron_run),
        ] {
            if let Some(v) = cap {
                check_amount(key, v)?;
            }
        }
        if !(self.warn_at > 0.0 && self.warn_at <= 1.0) {
            return Err(("budget.warn_at", "must be above 0 and at most 1".into()));
        }
        for p in &self.prices {
            if let Err(e) = globset::Glob::new(&p.model) {
                return Err(("budget.prices.model", format!("{:?}: {e}", p.model)));
            }
            for v in [p.input, p.output, p.cache_read, p.cache_write]
                .into_iter()
                .flatten()
            {
                check_amount("budget.prices", v)?;
            }
        }
        Ok(())
    }
}

/// A cap or a rate: finite, not negative, and small enough to count in billionths.
pub fn check_amount(key: &'static str, v: f64) -> Result<(), (&'static str, String)> {
    match Amount::from_units(v) {
        Some(_) => Ok(()),
        None => Err((key, format!("{v} must be a number from 0 to 1000000000"))),
    }
}

/// An amount (checked by [`check_amount`] at load) in billionths of the currency.
pub fn to_nanos(v: f64) -> i64 {
    Amount::from_units(v).map_or(0, |a| a.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_settings_name_their_key() {
        let ok = BudgetConfig::default();
        assert!(ok.check().is_ok());
        assert!(!ok.has_caps());
        let with = |f: &dyn Fn(&mut BudgetConfig)| {
            let mut c = BudgetConfig::default();
            f(&mut c);
            c.check().err().map(|(k, _)| k)
        };
        assert_eq!(
            with(&|c| c.timezone = "Mars/Olympus".into()),
            Some("budget.timezone")
        );
        assert_eq!(with(&|c| c.daily = Some(-1.0)), Some("budget.daily"));
        assert_eq!(
            with(&|c| c.person_daily = Some(f64::NAN)),
            Some("budget.person_daily")
        );
        assert_eq!(with(&|c| c.warn_at = 0.0), Some("budget.warn_at"));
        assert_eq!(
            with(&|c| c.prices.push(PriceConfig {
                model: "gpt-[".into(),
                input: Some(1.0),
                output: None,
                cache_read: None,
                cache_write: None,
            })),
            Some("budget.prices.model")
        );
        assert_eq!(with(&|c| c.cron_run = Some(0.25)), None);
        assert_eq!(to_nanos(0.25), 250_000_000);
    }
}
