//! Which keys a new configuration changes, as dotted paths (`telegram.allowed_users`,
//! `hooks`, `llm.model`), and which of them a running daemon can never take without a
//! restart. Lists (`hooks`, `cron.jobs`, `people`) compare whole.
//!
//! Secrets are compared by digest (`config::comparing_secrets`), so a changed token is named
//! too; only key names leave this module, never a value.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::config::Config;

/// Keys bound at start for good: the listener, the store, the data folder, the replica's name.
pub const RESTART_ONLY: &[&str] = &[
    "server.listen",
    "server.data_dir",
    "server.replica_id",
    "store.url",
];

/// The dotted paths whose values differ between `old` and `new`.
pub fn changed(old: &Config, new: &Config) -> BTreeSet<String> {
    let (a, b) = crate::config::comparing_secrets(|| (to_value(old), to_value(new)));
    let mut out = BTreeSet::new();
    walk("", &a, &b, &mut out);
    out
}

fn to_value(c: &Config) -> Value {
    serde_json::to_value(c).unwrap_or(Value::Null)
}

fn walk(prefix: &str, a: &Value, b: &Value, out: &mut BTreeSet<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let path = match prefix {
                    "" => k.clone(),
                    p => format!("{p}.{k}"),
                };
                let null = Value::Null;
                walk(
                    &path,
                    x.get(k).unwrap_or(&null),
                    y.get(k).unwrap_or(&null),
                    out,
                );
            }
        }
        _ if a != b => {
            out.insert(prefix.to_string());
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_keys_are_named_by_path() {
        let old = Config::default();
        let mut new = Config::default();
        assert!(changed(&old, &new).is_empty());
        new.telegram.allowed_users = vec!["7".into()];
        new.server.listen = "127.0.0.1:9".parse().unwrap();
        let keys: Vec<String> = changed(&old, &new).into_iter().collect();
        assert_eq!(keys, ["server.listen", "telegram.allowed_users"]);
        // A changed secret is seen, and secrets print as `***` again afterwards.
        let mut a = Config::default();
        a.telegram.token = Some(crate::config::Secret::new("old-token"));
        let mut b = a.clone();
        b.telegram.token = Some(crate::config::Secret::new("new-token"));
        let keys: Vec<String> = changed(&a, &b).into_iter().collect();
        assert_eq!(keys, ["telegram.token"]);
        assert!(changed(&a, &a.clone()).is_empty());
        let shown = serde_json::to_value(&b).unwrap();
        assert_eq!(shown["telegram"]["token"], "***");
    }
}
