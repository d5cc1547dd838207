//! The command line, routes and keys as README and docs/ name them, checked against what the
//! binary has: every command and flag an operator copies from the docs exists, README's CLI
//! list names every command, every flag is documented somewhere, every route the docs name is
//! served and every route served is documented, every `section.key` the docs name is a real
//! config key. (Metrics and the key-by-key reference are checked in `docs.rs`.)

use std::collections::{BTreeMap, BTreeSet};

use herald_test_support::herald::Herald;

use super::support::*;

/// Flags every command takes (clap `global = true`).
const GLOBAL_FLAGS: &[&str] = &["config", "data-dir", "help", "version"];
/// Flags that take a value, so the word after them is not a subcommand.
const VALUE_FLAGS: &[&str] = &["config", "data-dir", "listen"];

fn help(path: &[&str]) -> String {
    let out = Herald::new().args(path).arg("--help").output();
    String::from_utf8(out.stdout).expect("utf-8 help")
}

fn section<'a>(text: &'a str, title: &str) -> Vec<&'a str> {
    text.lines()
        .skip_while(|l| *l != title)
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect()
}

/// Command path ("sessions list") → its own flags, for every command the binary has.
fn cli_tree() -> BTreeMap<String, BTreeSet<String>> {
    let flag = regex::Regex::new(r"--([a-z][a-z0-9-]*)").unwrap();
    let mut tree = BTreeMap::new();
    let mut todo: Vec<Vec<String>> = vec![vec![]];
    while let Some(path) = todo.pop() {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let text = help(&args);
        for line in section(&text, "Commands:") {
            let name = line.split_whitespace().next().unwrap_or_default();
            if name != "help" {
                let mut sub = path.clone();
                sub.push(name.to_string());
                todo.push(sub);
            }
        }
        let flags: BTreeSet<String> = section(&text, "Options:")
            .iter()
            .filter_map(|l| flag.captures(l).map(|c| c[1].to_string()))
            .filter(|f| !GLOBAL_FLAGS.contains(&f.as_str()))
            .collect();
        if !path.is_empty() {
            tree.insert(path.join(" "), flags);
        }
    }
    tree
}

/// Leaves only: commands an operator runs (`sessions` alone is not one).
fn leaves(tree: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<String> {
    tree.keys()
        .filter(|p| !tree.keys().any(|q| q.starts_with(&format!("{p} "))))
        .cloned()
        .collect()
}

/// A `herald …` invocation read from docs: the command path and the flags after it.
/// `words` start after the word `herald`; an invocation ends at a shell separator.
fn invocation(
    tree: &BTreeMap<String, BTreeSet<String>>,
    words: &[&str],
) -> Option<(String, Vec<String>)> {
    let mut path: Vec<&str> = Vec::new();
    let mut flags = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = words[i].trim_matches(|c: char| "`,.()[]".contains(c));
        // `list|add|remove`: alternatives written together; the first stands for them.
        let w = if w.len() > 1 {
            w.split('|').next().unwrap_or(w)
        } else {
            w
        };
        if ["|", "||", "&&", ";", "#", "\\"].contains(&w) || w.starts_with('#') {
            break;
        }
        if let Some(f) = w.strip_prefix("--") {
            let f = f.split('=').next().unwrap_or_default();
            flags.push(f.to_string());
            if VALUE_FLAGS.contains(&f) && !w.contains('=') {
                i += 1;
            }
        } else if path.is_empty() || tree.contains_key(&format!("{} {w}", path.join(" "))) {
            if !w.chars().all(|c| c.is_ascii_lowercase() || c == '-') || w.is_empty() {
                return None;
            }
            path.push(w);
        } else if w.chars().all(|c| c.is_ascii_lowercase() || c == '-')
            && tree
                .keys()
                .any(|k| k.starts_with(&format!("{} ", path.join(" "))))
        {
            // A word where a subcommand belongs (`herald sessions purge`): not a command.
            path.push(w);
            break;
        }
        i += 1;
    }
    (!path.is_empty()).then(|| (path.join(" "), flags))
}

/// Every `herald …` invocation in a Markdown file: inline code spans and code-block lines.
fn invocations_in(
    tree: &BTreeMap<String, BTreeSet<String>>,
    text: &str,
) -> Vec<(String, Vec<String>, String)> {
    let mut spans: Vec<String> = Vec::new();
    let mut in_block = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            spans.push(line.to_string());
        } else {
            spans.extend(line.split('`').skip(1).step_by(2).map(str::to_string));
        }
    }
    let mut out = Vec::new();
    for span in spans {
        let words: Vec<&str> = span.split_whitespace().collect();
        for (i, w) in words.iter().enumerate() {
            // The program, not the user or the service of that name: `herald` or a path to it
            // as a command word (first, or after sudo/exec-style words and option values).
            let is_program = *w == "herald" || w.ends_with("/bin/herald");
            let starts = i == 0
                || matches!(
                    words[i - 1],
                    "$" | "sudo" | "exec" | "run" | "--" | "&&" | ";" | "|"
                )
                || words[i - 1].ends_with('"')
                || words[i - 1].ends_with("--rm");
            // Prose about the daemon inside code ("herald is ready") is not an invocation.
            let prose = words
                .get(i + 1)
                .is_some_and(|n| ["is", "as", "was", "has", "runs", "and", "or"].contains(n));
            if is_program && starts && !prose {
                if let Some((path, flags)) = invocation(tree, &words[i + 1..]) {
                    out.push((path, flags, span.clone()));
                }
            }
        }
    }
    out
}

fn docs() -> Vec<(String, String)> {
    let mut files = vec![("README.md".to_string(), read("README.md"))];
    for e in std::fs::read_dir(repo("docs")).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".md") {
            files.push((format!("docs/{name}"), read(&format!("docs/{name}"))));
        }
    }
    files
}

#[test]
fn readme_and_docs_name_only_commands_and_flags_the_binary_has() {
    let tree = cli_tree();
    assert!(
        tree.contains_key("sessions list") && tree.contains_key("doctor"),
        "{tree:?}"
    );
    let mut named_flags: BTreeSet<(String, String)> = BTreeSet::new();
    for (file, text) in docs() {
        for (path, flags, span) in invocations_in(&tree, &text) {
            let own = tree
                .get(&path)
                .unwrap_or_else(|| panic!("{file}: `herald {path}` is not a command ({span})"));
            for f in flags {
                assert!(
                    own.contains(&f) || GLOBAL_FLAGS.contains(&f.as_str()),
                    "{file}: `herald {path}` has no --{f} ({span})"
                );
                named_flags.insert((path.clone(), f));
            }
        }
    }

    // README's list: one line per command, alternatives of its subcommands split by " | ".
    let readme = read("README.md");
    let list = readme
        .split("\n## Command line\n")
        .nth(1)
        .and_then(|s| s.split("```").nth(1))
        .expect("README has a ## Command line block");
    let mut listed = BTreeSet::new();
    for line in list.lines().filter(|l| l.starts_with("herald ")) {
        let mut words = line["herald ".len()..].split_whitespace();
        let top = words.next().unwrap().to_string();
        let rest = line["herald ".len() + top.len()..].to_string();
        if tree.keys().any(|k| k.starts_with(&format!("{top} "))) {
            for alt in rest.split(" | ") {
                let words: Vec<&str> = alt.split_whitespace().collect();
                let (path, flags) = invocation(&tree, &[&[top.as_str()][..], &words].concat())
                    .unwrap_or_else(|| panic!("README: cannot read {alt:?}"));
                assert!(
                    tree.contains_key(&path),
                    "README lists `herald {path}`, which does not exist"
                );
                listed.insert(path.clone());
                named_flags.extend(flags.into_iter().map(|f| (path.clone(), f)));
            }
        } else {
            let words: Vec<&str> = line.split_whitespace().skip(1).collect();
            let (path, flags) = invocation(&tree, &words).unwrap();
            assert!(
                tree.contains_key(&path),
                "README lists `herald {path}`, which does not exist"
            );
            listed.insert(path.clone());
            named_flags.extend(flags.into_iter().map(|f| (path.clone(), f)));
        }
    }
    for leaf in leaves(&tree) {
        assert!(
            listed.contains(&leaf),
            "README's command line list misses `herald {leaf}`"
        );
        for f in &tree[&leaf] {
            assert!(
                named_flags.contains(&(leaf.clone(), f.clone())),
                "neither README nor docs/ show `herald {leaf} --{f}`"
            );
        }
    }
}

/// `/api/v1/lanes/{lane}/messages` as a regex that also matches `/api/v1/lanes/web:alice/messages`.
fn route_pattern(route: &str) -> regex::Regex {
    let parts: Vec<String> = route
        .split('/')
        .map(|p| {
            if p.starts_with('{') {
                "[^/]+".to_string()
            } else {
                regex::escape(p)
            }
        })
        .collect();
    regex::Regex::new(&format!("^{}$", parts.join("/"))).unwrap()
}

#[test]
fn docs_name_every_route_and_only_routes_that_exist() {
    // Every route the server can mount is a row of `http::table` (with every feature on).
    let mut all_on = herald::config::Config::default();
    all_on.web.enabled = true;
    all_on.pairing.enabled = true;
    let mut routes: BTreeSet<String> = herald::http::table(&all_on)
        .iter()
        .map(|r| r.path.to_string())
        .collect();
    // The Telegram webhook's default path (the configured URL's path in webhook mode).
    routes.insert("/telegram/webhook".into());
    routes.remove("/");
    let patterns: Vec<(String, regex::Regex)> = routes
        .iter()
        .map(|r| (r.clone(), route_pattern(r)))
        .collect();
    let mention =
        regex::Regex::new(r"(?:^|[\s`(:0-9])(/(?:api/v1|healthz|readyz|metrics|admin|favicon\.ico|telegram/webhook|hooks)[A-Za-z0-9_/{}:.-]*)")
            .unwrap();
    let mut seen = BTreeSet::new();
    for (file, text) in docs() {
        for c in mention.captures_iter(&text) {
            let path = c[1].trim_end_matches(['.', ':']);
            // `/api/v1/admin/…` names the routes under a prefix.
            let hits: Vec<&String> = patterns
                .iter()
                .filter(|(r, p)| p.is_match(path) || (path.ends_with('/') && r.starts_with(path)))
                .map(|(r, _)| r)
                .collect();
            assert!(
                !hits.is_empty(),
                "{file} names the route {path}, which is not served"
            );
            seen.extend(hits.into_iter().cloned());
        }
    }
    for r in &routes {
        assert!(seen.contains(r), "no doc names the route {r}");
    }
}

#[test]
fn docs_name_only_config_keys_that_exist() {
    let keys = config_key_paths();
    let sections: BTreeSet<&str> = keys.iter().filter_map(|k| k.split('.').next()).collect();
    let re = regex::Regex::new(r"`([a-z]+)\.([a-z_]+)").unwrap();
    // The operator's docs: ARCHITECTURE and BENCHMARKS name modules (`store.search`) too.
    for (file, text) in docs()
        .into_iter()
        .filter(|(f, _)| !f.ends_with("ARCHITECTURE.md") && !f.ends_with("BENCHMARKS.md"))
    {
        for c in re.captures_iter(&text) {
            let (section, key) = (&c[1], &c[2]);
            if !sections.contains(section) {
                continue;
            }
            let full = format!("{section}.{key}");
            assert!(
                keys.iter().any(|k| *k == full
                    || k.starts_with(&format!("{full}."))
                    || k.starts_with(&format!("{full}["))),
                "{file} names the config key `{full}`, which does not exist"
            );
        }
    }
}

/// Every variable the command line reads (`[env: …]` in any `--help`) is one the config
/// loader keeps out of the config keys: `HERALD_CONFIG` read as the key `config` made every
/// command exit 2.
#[test]
fn the_cli_own_variables_are_exactly_the_loaders_exceptions() {
    let env = regex::Regex::new(r"\[env: ([A-Z0-9_]+)=").unwrap();
    let mut named = BTreeSet::new();
    let mut paths: Vec<String> = cli_tree().into_keys().collect();
    paths.push(String::new());
    for path in paths {
        let args: Vec<&str> = path.split_whitespace().collect();
        for c in env.captures_iter(&help(&args)) {
            named.insert(c[1].to_string());
        }
    }
    let loader: BTreeSet<String> = herald::config::CLI_ENV
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert!(named.contains("HERALD_CONFIG"), "{named:?}");
    assert_eq!(named, loader);
}
