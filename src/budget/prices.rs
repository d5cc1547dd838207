//! What a model call costs: the `[[budget.prices]]` table matched against the model id, each
//! billed bucket times its rate. A bucket that billed tokens but has no rate makes the cost
//! unknown — never a partial sum.

use globset::{Glob, GlobMatcher};

use crate::config::{to_nanos, PriceConfig};
use crate::llm::Usage;

/// One model's rates, in billionths of the currency per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rates {
    pub input: Option<i64>,
    pub output: Option<i64>,
    pub cache_read: Option<i64>,
    pub cache_write: Option<i64>,
}

impl Rates {
    fn from_config(p: &PriceConfig) -> Rates {
        Rates {
            input: p.input.map(to_nanos),
            output: p.output.map(to_nanos),
            cache_read: p.cache_read.map(to_nanos),
            cache_write: p.cache_write.map(to_nanos),
        }
    }

    /// The bill of `usage`; `None` when a bucket with tokens has no rate.
    pub fn cost(&self, usage: &Usage) -> Option<i64> {
        let mut total = 0i128;
        for (tokens, rate) in [
            (usage.fresh_input, self.input),
            (usage.output, self.output),
            (usage.cache_read, self.cache_read),
            (usage.cache_write, self.cache_write),
        ] {
            if tokens == 0 {
                continue;
            }
            total += i128::from(tokens) * i128::from(rate?);
        }
        Some(per_million(total))
    }

    /// The most a call can cost: every prompt token at the dearest prompt rate, and the whole
    /// answer budget at the output rate. `None` without an input or an output rate.
    pub fn worst_case(&self, prompt_tokens: u64, max_output: u64) -> Option<i64> {
        let prompt_rate = self.input?.max(self.cache_write.unwrap_or(0));
        let total = i128::from(prompt_tokens) * i128::from(prompt_rate)
            + i128::from(max_output) * i128::from(self.output?);
        Some(per_million(total))
    }
}

/// Billionths per million tokens × tokens → billionths, rounded up (a cap errs on the safe side).
fn per_million(total: i128) -> i64 {
    let v = (total + 999_999) / 1_000_000;
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The configured prices, first match wins.
#[derive(Debug, Clone, Default)]
pub struct PriceTable {
    entries: Vec<(GlobMatcher, Rates)>,
}

impl PriceTable {
    /// From validated config (a glob that does not compile is left out; validation names it).
    pub fn new(prices: &[PriceConfig]) -> PriceTable {
        let entries = prices
            .iter()
            .filter_map(|p| {
                let glob = Glob::new(&p.model).ok()?.compile_matcher();
                Some((glob, Rates::from_config(p)))
            })
            .collect();
        PriceTable { entries }
    }

    pub fn rates(&self, model: &str) -> Option<Rates> {
        self.entries
            .iter()
            .find(|(glob, _)| glob.is_match(model))
            .map(|(_, r)| *r)
    }

    /// A call to `model` can be priced before it is sent.
    pub fn priced(&self, model: &str) -> bool {
        self.rates(model)
            .is_some_and(|r| r.input.is_some() && r.output.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn price(model: &str, input: f64, output: f64, read: Option<f64>) -> PriceConfig {
        PriceConfig {
            model: model.into(),
            input: Some(input),
            output: Some(output),
            cache_read: read,
            cache_write: None,
        }
    }

    #[test]
    fn each_bucket_at_its_rate_and_unknown_when_a_billed_bucket_has_none() {
        let table = PriceTable::new(&[
            price("gpt-4o-mini*", 0.15, 0.6, Some(0.075)),
            price("gpt-4o*", 2.5, 10.0, Some(1.25)),
        ]);
        let mini = table.rates("gpt-4o-mini-2024-07-18").unwrap();
        let usage = Usage {
            fresh_input: 1_000_000,
            output: 500_000,
            cache_read: 2_000_000,
            cache_write: 0,
        };
        // 0.15 + 0.30 + 0.15 = 0.60
        assert_eq!(mini.cost(&usage), Some(600_000_000));
        let big = table.rates("gpt-4o").unwrap();
        assert_eq!(
            big.cost(&usage),
            Some(2_500_000_000 + 5_000_000_000 + 2_500_000_000)
        );
        let wrote = Usage {
            cache_write: 10,
            ..usage
        };
        assert_eq!(mini.cost(&wrote), None, "no cache_write rate: unknown");
        assert_eq!(table.rates("claude-x"), None);
        assert!(!table.priced("claude-x"));
        assert!(table.priced("gpt-4o"));
        // One token at 0.15 per million rounds up to one billionth... and then some.
        assert_eq!(
            mini.cost(&Usage {
                fresh_input: 1,
                ..Usage::default()
            }),
            Some(150)
        );
        // Worst case: 1000 prompt tokens at 2.5/M plus 4096 output at 10/M.
        assert_eq!(big.worst_case(1000, 4096), Some(2_500_000 + 40_960_000));
    }
}
