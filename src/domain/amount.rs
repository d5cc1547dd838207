//! An amount of money as Herald keeps it: whole billionths of the budget's currency, so sums
//! are exact; written and read by people as a decimal number of units (`0.25`).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Billionths of a currency unit in one unit.
pub const NANOS_PER_UNIT: f64 = 1e9;

/// Billionths of a currency unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Amount(pub i64);

impl Amount {
    /// From a decimal number of units; `None` when it is negative, not finite or too large.
    pub fn from_units(units: f64) -> Option<Amount> {
        (units.is_finite() && (0.0..=1e9).contains(&units))
            .then(|| Amount((units * NANOS_PER_UNIT).round() as i64))
    }

    pub fn units(self) -> f64 {
        self.0 as f64 / NANOS_PER_UNIT
    }

    /// `1.50 USD`: two decimals, or as many as it takes for a small amount not to read as
    /// zero (`0.0024 USD`, `0.000002 USD`).
    pub fn in_currency(self, currency: &str) -> String {
        let units = self.units();
        let abs = units.abs();
        let decimals = if abs == 0.0 || abs >= 0.01 {
            2
        } else if abs >= 0.0001 {
            4
        } else {
            6
        };
        format!("{units:.decimals$} {currency}")
    }
}

impl Serialize for Amount {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.units())
    }
}

impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Amount, D::Error> {
        let units = f64::deserialize(d)?;
        Amount::from_units(units).ok_or_else(|| {
            serde::de::Error::custom(format!("{units} must be an amount from 0 to 1000000000"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Amount;

    #[test]
    fn units_round_trip_and_bad_amounts_are_refused() {
        let a: Amount = serde_json::from_str("0.25").unwrap();
        assert_eq!(a, Amount(250_000_000));
        assert_eq!(serde_json::to_string(&a).unwrap(), "0.25");
        assert!(serde_json::from_str::<Amount>("-1").is_err());
        assert_eq!(Amount::from_units(f64::INFINITY), None);
    }

    #[test]
    fn small_amounts_keep_their_digits() {
        let text = |n: i64, cur: &str| Amount(n).in_currency(cur);
        assert_eq!(text(1_500_000_000, "USD"), "1.50 USD");
        assert_eq!(text(0, "EUR"), "0.00 EUR");
        assert_eq!(text(2_400_000, "USD"), "0.0024 USD");
        assert_eq!(text(150, "USD"), "0.000000 USD");
        assert_eq!(text(1_500, "USD"), "0.000002 USD");
    }
}
