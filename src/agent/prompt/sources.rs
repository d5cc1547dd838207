//! The files behind the system prompt, read when a session opens: the identity file, the
//! operator's context files and the skills directory.
//!
//! Each file is screened (`crate::screen`) before it may enter the prompt — a hit replaces
//! that file's block with a one-line notice naming the file and the reason, and logs a
//! warning — and capped head-and-tail to a size that scales with the model's window. Nothing
//! here fails a session: a missing or unreadable file is a warning and a fallback.

use std::path::{Path, PathBuf};

use super::DEFAULT_IDENTITY;
use crate::agent::skills::{self, Skill};
use crate::config::Config;
use crate::screen::{cap_head_tail, screen};

/// A file larger than this is not read at all.
const MAX_READ_BYTES: u64 = 16 * 1024 * 1024;

/// One block of prompt text and the label `herald prompt show` gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub label: String,
    pub text: String,
}

/// What the prompt files said when the session opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptSources {
    pub identity: Block,
    pub context_files: Vec<Block>,
    pub skills: Vec<Skill>,
    /// The person's memory snapshot (`agent::memory`), set only for a private session.
    pub memory: Vec<Block>,
    /// Tool sources' guidance (MCP servers' `instructions`), set when a session opens.
    pub tool_guidance: Vec<Block>,
}

/// The skills directory: `agent.skills_dir`, else `<data-dir>/skills`.
pub fn skills_dir(config: &Config) -> PathBuf {
    config
        .agent
        .skills_dir
        .clone()
        .unwrap_or_else(|| config.server.data_dir.join("skills"))
}

/// Why a prompt file could not be read (the text lands in a notice and a log line).
#[derive(Debug, thiserror::Error)]
enum Unreadable {
    #[error("it is larger than {} MB", MAX_READ_BYTES >> 20)]
    TooLarge,
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

fn read_bounded(path: &Path) -> Result<String, Unreadable> {
    let meta = std::fs::metadata(path)?;
    if meta.len() > MAX_READ_BYTES {
        return Err(Unreadable::TooLarge);
    }
    Ok(std::fs::read_to_string(path)?)
}

/// Screened and capped text of `path`, or the notice that replaces it.
enum Read {
    Text(String),
    Withheld(String),
    Unreadable(String),
}

fn read_screened(path: &Path, cap: usize) -> Read {
    let shown = path.display().to_string();
    match read_bounded(path) {
        Err(e) => Read::Unreadable(e.to_string()),
        Ok(text) => match screen(&text) {
            Some(finding) => {
                let why = format!("it contains {finding}");
                if first_report(path, Some(&why)) {
                    tracing::warn!(file = %shown, finding = %finding.detail(), "prompt file withheld");
                }
                Read::Withheld(why)
            }
            None => {
                first_report(path, None);
                Read::Text(cap_head_tail(text.trim(), cap, &shown))
            }
        },
    }
}

/// Problems already logged, by file, with the file's size and mtime: every session and cron
/// fire reads the same files, and an unchanged problem was logged each time. A problem is
/// logged when it first appears or when the file changes; a file read fine forgets its entry.
static REPORTED: std::sync::Mutex<std::collections::BTreeMap<PathBuf, String>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Whether `problem` with `path` is news (and records it); `None` clears the record.
pub(crate) fn first_report(path: &Path, problem: Option<&str>) -> bool {
    let mut reported = REPORTED.lock().unwrap_or_else(|e| e.into_inner());
    let Some(problem) = problem else {
        reported.remove(path);
        return false;
    };
    let stamp = std::fs::metadata(path)
        .map(|m| format!("{} bytes, {:?}", m.len(), m.modified().ok()))
        .unwrap_or_default();
    let print = format!("{problem} ({stamp})");
    reported.insert(path.to_path_buf(), print.clone()).as_ref() != Some(&print)
}

/// Reads every prompt file for a new session, for a model with `window_tokens`.
pub fn load_sources(config: &Config, window_tokens: usize) -> PromptSources {
    let agent = &config.agent;
    let cap = agent.file_cap_chars(window_tokens);
    let identity = match &agent.soul_file {
        None => Block {
            label: "identity (built-in)".into(),
            text: DEFAULT_IDENTITY.into(),
        },
        Some(path) => {
            let label = format!("identity ({})", path.display());
            match read_screened(path, cap) {
                Read::Text(t) if !t.is_empty() => Block { label, text: t },
                Read::Text(_) => Block {
                    label: format!("identity (built-in; {} is empty)", path.display()),
                    text: DEFAULT_IDENTITY.into(),
                },
                Read::Withheld(why) => Block {
                    label,
                    text: format!(
                        "{DEFAULT_IDENTITY}\n\n[The identity file {} was withheld: {why}.]",
                        path.display()
                    ),
                },
                Read::Unreadable(e) => {
                    if first_report(path, Some(&e)) {
                        tracing::warn!(path = %path.display(), error = %e, "cannot read agent.soul_file; using the built-in identity");
                    }
                    Block {
                        label: format!("identity (built-in; {} unreadable)", path.display()),
                        text: DEFAULT_IDENTITY.into(),
                    }
                }
            }
        }
    };
    let mut context_files = Vec::new();
    for path in &agent.context_files {
        let label = format!("context file {}", path.display());
        let text = match read_screened(path, cap) {
            Read::Text(t) if t.is_empty() => continue,
            Read::Text(t) => super::frame::frame(&format!("context file {}", path.display()), &t),
            Read::Withheld(why) => {
                format!("[Context file {} withheld: {why}.]", path.display())
            }
            Read::Unreadable(e) => {
                if first_report(path, Some(&e)) {
                    tracing::warn!(path = %path.display(), error = %e, "cannot read an agent.context_files entry; left out");
                }
                continue;
            }
        };
        context_files.push(Block { label, text });
    }
    PromptSources {
        identity,
        context_files,
        skills: skills::load(&skills_dir(config)),
        memory: Vec::new(),
        tool_guidance: Vec::new(),
    }
}
