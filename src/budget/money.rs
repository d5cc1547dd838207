//! Amounts as people read them: billionths of the currency shown with two decimals, or with
//! as many as it takes for a small amount not to read as zero.

/// `1.5 USD`-style text of `nanos` billionths of `currency`.
pub fn format_amount(nanos: i64, currency: &str) -> String {
    let units = nanos as f64 / crate::config::NANOS_PER_UNIT;
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

#[cfg(test)]
mod tests {
    use super::format_amount;

    #[test]
    fn small_amounts_keep_their_digits() {
        assert_eq!(format_amount(1_500_000_000, "USD"), "1.50 USD");
        assert_eq!(format_amount(0, "EUR"), "0.00 EUR");
        assert_eq!(format_amount(2_400_000, "USD"), "0.0024 USD");
        assert_eq!(format_amount(150, "USD"), "0.000000 USD");
        assert_eq!(format_amount(1_500, "USD"), "0.000002 USD");
    }
}
