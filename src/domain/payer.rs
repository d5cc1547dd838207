//! Who pays for a model call: a person (their `[[people]]` name or unlinked identity key), or
//! Herald itself — the operator's own config and CLI cron jobs and Herald's background work
//! such as the nightly capsule. Every spend row names one, so no call escapes the person caps
//! by being billed to nobody.

use std::fmt;

/// The payer of one model call.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Payer {
    /// A person's key (see `config::person_key`): their caps (`budget.person_daily`) apply.
    Person(String),
    /// The operator: only the deployment-wide caps apply.
    System,
}

impl Payer {
    /// The person's key; `None` for the system payer.
    pub fn person(&self) -> Option<&str> {
        match self {
            Payer::Person(p) => Some(p),
            Payer::System => None,
        }
    }

    /// The ledger's `payer` column: `person` or `system`.
    pub fn kind(&self) -> &'static str {
        match self {
            Payer::Person(_) => "person",
            Payer::System => "system",
        }
    }

    /// Reads back what [`Payer::kind`] and the person column wrote; `None` for a row written
    /// before payers were recorded (its `payer` is NULL) or one that does not fit.
    pub fn from_columns(kind: Option<&str>, person: Option<&str>) -> Option<Payer> {
        match (kind, person) {
            (Some("person"), Some(p)) => Some(Payer::Person(p.to_string())),
            (Some("system"), None) => Some(Payer::System),
            _ => None,
        }
    }
}

/// The person's key, or `system`.
impl fmt::Display for Payer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Payer::Person(p) => f.write_str(p),
            Payer::System => f.write_str("system"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Payer;

    #[test]
    fn columns_round_trip_and_old_rows_read_as_unrecorded() {
        for p in [Payer::Person("ann".into()), Payer::System] {
            assert_eq!(Payer::from_columns(Some(p.kind()), p.person()), Some(p));
        }
        assert_eq!(Payer::from_columns(None, Some("ann")), None);
        assert_eq!(Payer::from_columns(None, None), None);
        assert_eq!(Payer::System.to_string(), "system");
    }
}
