//! The doctor's reading of `[[bindings]]`: the routing table in the order bindings are tried
//! (most specific first, then file order; the default agent takes the rest), and the mistakes
//! that pass validation but route nothing — a binding that repeats an earlier one's keys, one
//! an earlier binding shadows for the same person, an agent nothing reaches, a person no
//! `[[people]]` entry or identity names.
//!
//! Reads the config only: no store, no network.

use super::doctor::Check;
use crate::config::{Binding, Config, DEFAULT_AGENT};

/// The routing table (one line per binding, in match order, then the default) and one warning
/// per binding or agent that cannot route as written. Nothing when there are no agents.
pub fn routing(config: &Config) -> Vec<(&'static str, Check)> {
    if config.agents.is_empty() && config.bindings.is_empty() {
        return Vec::new();
    }
    let mut out = vec![("routing", Check::Ok(table(config)))];
    out.extend(
        flags(config)
            .into_iter()
            .map(|w| ("routing", Check::Warn(w))),
    );
    out
}

/// The bindings in the order a conversation meets them, each with its index in the file.
pub fn match_order(bindings: &[Binding]) -> Vec<(usize, &Binding)> {
    let mut order: Vec<(usize, &Binding)> = bindings.iter().enumerate().collect();
    // Stable: equally specific bindings keep their file order.
    order.sort_by_key(|(_, b)| std::cmp::Reverse(b.specificity()));
    order
}

/// The table as lines: `1. bindings[2]: platform=telegram chat=42 → coder`, then the default.
pub fn table(config: &Config) -> String {
    let mut lines = vec!["the routing table, in match order:".to_string()];
    for (n, (i, b)) in match_order(&config.bindings).into_iter().enumerate() {
        lines.push(format!("  {}. bindings[{i}]: {}", n + 1, b.describe()));
    }
    lines.push(format!("  otherwise → {DEFAULT_AGENT}"));
    lines.join("\n")
}

/// What cannot route as written, one sentence each.
pub fn flags(config: &Config) -> Vec<String> {
    let b = &config.bindings;
    let mut out = Vec::new();
    for (j, later) in b.iter().enumerate() {
        for (i, earlier) in b.iter().enumerate().take(j) {
            if later == earlier || same_keys(earlier, later) && earlier.person == later.person {
                out.push(format!(
                    "bindings[{j}] ({}) has the same keys as bindings[{i}] ({}), so it is \
                     unreachable",
                    later.describe(),
                    earlier.describe()
                ));
                break;
            }
            if same_keys(earlier, later) && same_person(config, earlier, later) {
                out.push(format!(
                    "bindings[{j}] ({}) is shadowed by bindings[{i}] ({}): both name the same \
                     person, and the earlier one wins",
                    later.describe(),
                    earlier.describe()
                ));
                break;
            }
        }
    }
    for (i, binding) in b.iter().enumerate() {
        if let Some(p) = &binding.person {
            if !known_person(config, p) {
                out.push(format!(
                    "bindings[{i}].person {p:?} is no [[people]] name nor an identity \
                     (platform:id), so the binding matches nobody"
                ));
            }
        }
    }
    for a in &config.agents {
        if !a.switchable && !b.iter().any(|x| x.agent == a.name) {
            out.push(format!(
                "agent {:?}: no binding routes to it and it is not switchable, so no \
                 conversation reaches it (only delegate can)",
                a.name
            ));
        }
    }
    out
}

/// Every key but the person is set alike.
fn same_keys(a: &Binding, b: &Binding) -> bool {
    (
        &a.platform,
        &a.chat,
        &a.thread,
        &a.chat_type,
        a.person.is_some(),
    ) == (
        &b.platform,
        &b.chat,
        &b.thread,
        &b.chat_type,
        b.person.is_some(),
    )
}

/// Both name one person, one by `[[people]]` name and the other by one of its identities.
fn same_person(config: &Config, a: &Binding, b: &Binding) -> bool {
    let (Some(x), Some(y)) = (&a.person, &b.person) else {
        return false;
    };
    let ids = |name: &str| -> Vec<String> {
        match config.people.iter().find(|p| p.name == name) {
            Some(p) => p.ids.clone(),
            None => vec![name.to_string()],
        }
    };
    ids(x).iter().any(|id| ids(y).contains(id))
}

/// A `[[people]]` name, or `platform:id` on a platform Herald knows.
fn known_person(config: &Config, p: &str) -> bool {
    if config.people.iter().any(|x| x.name == p) {
        return true;
    }
    p.split_once(':').is_some_and(|(platform, id)| {
        !id.is_empty() && crate::domain::Platform::parse(platform).is_some()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{AgentSpec, Person};

    fn bind(agent: &str, f: impl FnOnce(&mut Binding)) -> Binding {
        let mut b = Binding {
            agent: agent.into(),
            ..Binding::default()
        };
        f(&mut b);
        b
    }

    #[test]
    fn the_table_is_in_match_order_and_overlaps_are_flagged() {
        let mut c = Config {
            people: vec![Person {
                name: "alice".into(),
                ids: vec!["telegram:42".into()],
            }],
            ..Config::default()
        };
        for name in ["coder", "family", "lonely"] {
            c.agents.push(AgentSpec {
                name: name.into(),
                ..AgentSpec::default()
            });
        }
        c.bindings = vec![
            bind("family", |b| b.platform = Some("telegram".into())),
            bind("coder", |b| b.person = Some("alice".into())),
            bind("family", |b| b.person = Some("telegram:42".into())),
            bind("coder", |b| b.platform = Some("telegram".into())),
            bind("coder", |b| b.person = Some("bob".into())),
        ];
        assert_eq!(
            table(&c),
            "the routing table, in match order:\n\
             \x20 1. bindings[1]: person=alice → coder\n\
             \x20 2. bindings[2]: person=telegram:42 → family\n\
             \x20 3. bindings[4]: person=bob → coder\n\
             \x20 4. bindings[0]: platform=telegram → family\n\
             \x20 5. bindings[3]: platform=telegram → coder\n\
             \x20 otherwise → default"
        );
        let flags = flags(&c);
        assert_eq!(flags.len(), 4, "{flags:#?}");
        assert!(
            flags[0].starts_with(
                "bindings[2] (person=telegram:42 → family) is shadowed by bindings[1]"
            ),
            "{}",
            flags[0]
        );
        assert!(
            flags[1].starts_with(
                "bindings[3] (platform=telegram → coder) has the same keys as bindings[0]"
            ),
            "{}",
            flags[1]
        );
        assert!(
            flags[2].starts_with("bindings[4].person \"bob\" is no [[people]] name"),
            "{}",
            flags[2]
        );
        assert!(
            flags[3].starts_with("agent \"lonely\": no binding routes to it"),
            "{}",
            flags[3]
        );
        // A switchable agent is reached through /agent.
        c.agents[2].switchable = true;
        assert_eq!(super::flags(&c).len(), 3);
    }
}
