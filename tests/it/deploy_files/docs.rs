//! Docs that must not drift: the configuration reference against `Config::default()` and
//! the example file, the metric table against the metrics the code emits.

use std::collections::BTreeMap;

use super::support::*;

#[test]
fn configuration_reference_lists_every_key_with_its_real_default() {
    let doc = read("docs/configuration.md");
    let keys_section = doc
        .split("\n## Keys\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("docs/configuration.md has a `## Keys` section");
    let mut rows: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in keys_section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<String> = line
            .trim_matches('|')
            .split(" | ")
            .map(|c| c.trim().trim_matches('`').to_string())
            .collect();
        rows.insert(cells[0].clone(), cells);
    }
    let keys = config_key_paths();
    for key in &keys {
        let row = rows
            .get(key)
            .unwrap_or_else(|| panic!("docs/configuration.md has no row for `{key}`"));
        if let Some(default) = default_text(key) {
            assert_eq!(row[1], path_to_env(key), "env name of {key}");
            assert_eq!(row[2], default, "default of {key}");
        }
    }
    for key in rows.keys() {
        assert!(
            keys.contains(key),
            "docs/configuration.md documents `{key}`, which does not exist"
        );
    }

    let example = read("config/herald.example.toml");
    let mut section = String::new();
    let mut present = Vec::new();
    for line in example.lines() {
        let line = line.trim().trim_start_matches('#').trim();
        if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = s.trim_matches(['[', ']']).to_string();
            // `[agent.platform_hints.telegram]` documents `agent.platform_hints` too.
            let parts: Vec<&str> = section.split('.').collect();
            for n in 2..=parts.len() {
                present.push(parts[..n].join("."));
            }
        } else if let Some((k, _)) = line.split_once(" = ") {
            present.push(format!("{section}.{}", k.trim()));
        }
    }
    for key in keys.iter().filter(|k| !k.contains('<')) {
        let key = key.replace("[]", "");
        assert!(
            present.contains(&key),
            "config/herald.example.toml does not mention {key}"
        );
    }
}

#[test]
fn operating_guide_lists_every_metric_the_code_emits() {
    let source = all_source();
    let re = regex::Regex::new(r#"(?:counter|gauge|histogram)!\(\s*"([a-z0-9_]+)""#).unwrap();
    let names: std::collections::BTreeSet<&str> = re
        .captures_iter(&source)
        .map(|c| c.get(1).unwrap().as_str())
        .collect();
    assert!(names.len() >= 10, "the metric scan found {names:?}");
    let guide = read("docs/operating.md");
    for name in &names {
        assert!(
            name.starts_with("herald_"),
            "metric {name} lacks the herald_ prefix"
        );
        assert!(
            guide.contains(&format!("| `{name}` |")),
            "docs/operating.md does not list {name}"
        );
    }
    let listed = regex::Regex::new(r"\| `(herald_[a-z0-9_]+)` \|").unwrap();
    for c in listed.captures_iter(&guide) {
        let name = c.get(1).unwrap().as_str();
        assert!(
            names.contains(name),
            "docs/operating.md lists {name}, which the code never emits"
        );
    }
}
