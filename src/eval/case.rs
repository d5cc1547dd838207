//! The case file: what an operator writes (or `herald export` writes for them) — cases, the
//! messages each sends, and what the outcome must satisfy. Read from TOML, or YAML by a
//! `.yaml`/`.yml` name; every mistake is refused at load naming the file and the case, before
//! anything runs.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use regex::Regex;
use serde::{Deserialize, Deserializer, Serialize};

use super::EvalError;
use crate::domain::Platform;

/// One file: `[[cases]]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseFile {
    #[serde(default)]
    pub cases: Vec<Case>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub name: String,
    pub messages: Vec<CaseMessage>,
    #[serde(default)]
    pub expect: Expect,
}

/// One message a person sends; they are sent in order, each after the turn before ended.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseMessage {
    #[serde(default = "web")]
    pub platform: String,
    /// The sender's id on that platform (`alice`, or `telegram:alice`).
    pub person: String,
    /// The chat (default: the person's own, a direct chat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<String>,
    pub text: String,
    /// Local files sent with the message (a relative path is read from the case file's
    /// folder).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<PathBuf>,
    /// What the agent answered when this was recorded (`herald export`); never checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
}

fn web() -> String {
    "web".into()
}

/// What the outcome must satisfy. Reply checks read the last message's reply; tool, approval,
/// token and cost checks count every turn of the case.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    #[serde(
        default,
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub reply_contains: Vec<String>,
    #[serde(
        default,
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub reply_not_contains: Vec<String>,
    /// Regular expressions (Rust `regex` syntax).
    #[serde(
        default,
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub reply_matches: Vec<String>,
    #[serde(
        default,
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub tool_called: Vec<ToolExpect>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_tool: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_asked: Option<bool>,
    #[serde(
        default,
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub capsule_contains: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_input_tokens: Option<u64>,
    /// In the budget's currency (`[budget] prices` must price the model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_latency_ms: Option<u64>,
    /// A question about the reply that the judge model must answer "yes".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<String>,
}

/// `tool_called = "name"`, or `{ name = "…", arguments = "regex over the JSON arguments" }`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolExpect {
    Name(String),
    Call {
        name: String,
        #[serde(default)]
        arguments: Option<String>,
    },
}

impl ToolExpect {
    pub fn name(&self) -> &str {
        match self {
            ToolExpect::Name(n) | ToolExpect::Call { name: n, .. } => n,
        }
    }

    pub fn arguments(&self) -> Option<&str> {
        match self {
            ToolExpect::Name(_) => None,
            ToolExpect::Call { arguments, .. } => arguments.as_deref(),
        }
    }
}

/// One value or a list of them (`reply_contains = "x"` or `["x", "y"]`).
fn one_or_many<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Items<T> {
        Many(Vec<T>),
        One(T),
    }
    Ok(match Items::deserialize(d)? {
        Items::One(w) => vec![w],
        Items::Many(w) => w,
    })
}

/// A case with the file it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub file: PathBuf,
    pub case: Case,
}

/// Every case of `files`, in order, checked; names must be unique across the suite.
pub fn load(files: &[PathBuf]) -> Result<Vec<Loaded>, EvalError> {
    let mut out = Vec::new();
    let mut names = HashSet::new();
    for file in files {
        let parsed = parse_file(file)?;
        if parsed.cases.is_empty() {
            return Err(bad(file, "the file holds no [[cases]]"));
        }
        let here = file.parent().unwrap_or(Path::new("."));
        for mut case in parsed.cases {
            // An attachment is named relative to its case file, wherever eval runs from.
            for m in &mut case.messages {
                for a in &mut m.attachments {
                    if a.is_relative() {
                        *a = here.join(&*a);
                    }
                }
            }
            check(&case).map_err(|why| bad(file, &format!("case {:?}: {why}", case.name)))?;
            if !names.insert(case.name.clone()) {
                return Err(bad(
                    file,
                    &format!("case {:?} is named twice in this suite", case.name),
                ));
            }
            out.push(Loaded {
                file: file.clone(),
                case,
            });
        }
    }
    Ok(out)
}

fn parse_file(file: &Path) -> Result<CaseFile, EvalError> {
    let text = std::fs::read_to_string(file).map_err(|e| bad(file, &e.to_string()))?;
    let yaml = file
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"));
    if yaml {
        serde_norway::from_str(&text).map_err(|e| bad(file, &e.to_string()))
    } else {
        toml::from_str(&text).map_err(|e| bad(file, &e.to_string()))
    }
}

fn bad(file: &Path, why: &str) -> EvalError {
    EvalError::Cases(format!("{}: {why}", file.display()))
}

/// What a case must satisfy before it runs.
fn check(case: &Case) -> Result<(), String> {
    if case.name.trim().is_empty() {
        return Err("name is empty".into());
    }
    if case.messages.is_empty() {
        return Err("no [[cases.messages]]".into());
    }
    for m in &case.messages {
        Platform::parse(&m.platform)
            .ok_or_else(|| format!("platform {:?} is not a platform name", m.platform))?;
        if m.person.trim().is_empty() {
            return Err("a message has an empty person".into());
        }
        for a in &m.attachments {
            if !a.is_file() {
                return Err(format!("attachment {} is not a file", a.display()));
            }
        }
    }
    let e = &case.expect;
    for re in &e.reply_matches {
        Regex::new(re).map_err(|err| format!("expect.reply_matches {re:?}: {err}"))?;
    }
    for t in &e.tool_called {
        if let Some(re) = t.arguments() {
            Regex::new(re).map_err(|err| format!("expect.tool_called arguments {re:?}: {err}"))?;
        }
    }
    if e.no_tool == Some(true) && !e.tool_called.is_empty() {
        return Err("expect.no_tool and expect.tool_called contradict each other".into());
    }
    if e.max_cost.is_some_and(|c| !c.is_finite() || c < 0.0) {
        return Err("expect.max_cost must be a number of at least 0".into());
    }
    Ok(())
}

impl CaseMessage {
    /// The platform (checked at load).
    pub fn platform(&self) -> Platform {
        Platform::parse(&self.platform).unwrap_or(Platform::WEB)
    }

    /// The sender id without a repeated `platform:` prefix.
    pub fn sender(&self) -> &str {
        self.person
            .strip_prefix(&format!("{}:", self.platform))
            .unwrap_or(&self.person)
    }

    pub fn chat_id(&self) -> &str {
        self.chat.as_deref().unwrap_or(self.sender())
    }
}
