//! Long-term memory: two small files per person, `MEMORY.md` (the agent's notes about its work
//! with the person) and `USER.md` (what it knows about the person), under
//! `<data-dir>/memory/<person>/`.
//!
//! One entry is one line (a leading `- ` is the file's bullet, not part of the entry); blank
//! lines and `#` headings are ignored, so an operator can edit a file by hand. Reading is
//! bounded and forgiving — a huge or garbage file is cut, a line that fails screening is
//! dropped, each with a warning — and never fails a session. Writing is strict: one line,
//! screened, no duplicate, within the cap, under a per-file lock, written to a temporary file
//! and renamed so a reader never sees half a file.
//!
//! The snapshot that enters a session's prompt is taken when the session opens and is stored
//! with it: a write lands on disk at once and reaches the next session, never the running one.
//! This module never decides *who* a person is (that is `config::person_key`, fed only from
//! the sender identity of the event being answered).

mod entries;
mod error;
pub mod tool;

pub use error::MemoryError;

use entries::{find_one, render, withheld_notice};
pub use entries::{is_text, parse};

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use crate::agent::prompt::frame::frame;
use crate::agent::prompt::Block;
use crate::config::{safe_segment, Config, MemoryConfig};
use crate::screen::screen;

/// Bytes read from one memory file at most; anything after is left out (and logged).
const READ_BYTES: u64 = 64 * 1024;

/// Which of a person's two files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Memory,
    User,
}

impl Target {
    pub fn parse(s: &str) -> Option<Target> {
        match s {
            "memory" => Some(Target::Memory),
            "user" => Some(Target::User),
            _ => None,
        }
    }

    pub fn file_name(self) -> &'static str {
        match self {
            Target::Memory => "MEMORY.md",
            Target::User => "USER.md",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Target::Memory => "memory",
            Target::User => "user",
        }
    }
}

/// What reading one file gave: the entries in order (screened, within the cap) and what was
/// left out, each with its reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Loaded {
    pub entries: Vec<String>,
    pub dropped: Vec<(String, String)>,
    /// The file was longer than what is read; an edit through the tool would lose the rest.
    pub oversized: bool,
}

impl Loaded {
    /// Characters the entries take (one line each).
    pub fn chars(&self) -> usize {
        used(&self.entries)
    }
}

fn used(entries: &[String]) -> usize {
    entries.iter().map(|e| e.chars().count() + 1).sum()
}

/// The memory folders of one data directory, with the configured caps.
#[derive(Debug, Clone)]
pub struct MemoryFiles {
    root: PathBuf,
    pub memory_chars: usize,
    pub user_chars: usize,
    pub entry_chars: usize,
}

impl MemoryFiles {
    pub fn new(data_dir: &Path, cfg: &MemoryConfig) -> MemoryFiles {
        MemoryFiles {
            root: cfg.dir.clone().unwrap_or_else(|| data_dir.join("memory")),
            memory_chars: cfg.memory_chars,
            user_chars: cfg.user_chars,
            entry_chars: cfg.entry_chars,
        }
    }

    pub fn from_config(config: &Config) -> MemoryFiles {
        MemoryFiles::new(&config.server.data_dir, &config.memory)
    }

    pub fn cap(&self, t: Target) -> usize {
        match t {
            Target::Memory => self.memory_chars,
            Target::User => self.user_chars,
        }
    }

    /// The file of `person`; `None` when the key is not a safe folder name (never a path
    /// outside the memory folder).
    pub fn path(&self, person: &str, t: Target) -> Option<PathBuf> {
        safe_segment(person).then(|| self.root.join(person).join(t.file_name()))
    }

    /// Reads one file for a prompt or an edit, logging what is left out. Missing is empty;
    /// nothing here fails.
    pub fn load(&self, person: &str, t: Target) -> Loaded {
        self.read(person, t, true)
    }

    /// [`load`](Self::load) for a report that prints what is left out itself.
    pub fn load_quiet(&self, person: &str, t: Target) -> Loaded {
        self.read(person, t, false)
    }

    fn read(&self, person: &str, t: Target, log: bool) -> Loaded {
        let Some(path) = self.path(person, t) else {
            return Loaded::default();
        };
        let (text, oversized) = match read_bounded(&path) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Loaded::default(),
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "memory file unreadable; left out");
                return Loaded::default();
            }
        };
        if oversized && log {
            tracing::warn!(file = %path.display(), read = READ_BYTES, "memory file is larger than what is read; the rest is left out");
        }
        let mut out = parse(&text, self.cap(t), self.entry_chars);
        out.oversized = oversized;
        for (line, why) in out.dropped.iter().filter(|_| log) {
            // The entry is outside text: escaped, so a control character cannot reach the log.
            let head: String = line.chars().take(60).collect();
            let finding = screen(line).map(|f| f.detail()).unwrap_or_default();
            tracing::warn!(file = %path.display(), entry = %head.escape_debug(), reason = %why,
                finding = %finding, "memory entry left out");
        }
        out
    }

    /// The prompt layers of `person`'s snapshot (empty files give none).
    pub fn snapshot(&self, person: &str) -> Vec<Block> {
        let mut out = Vec::new();
        for (t, heading) in [
            (
                Target::Memory,
                "## Long-term memory (your notes from earlier sessions with this person)",
            ),
            (
                Target::User,
                "## About this person (what they told you or you learned about them)",
            ),
        ] {
            let l = self.load(person, t);
            if l.entries.is_empty() && l.dropped.is_empty() {
                continue;
            }
            let lines: Vec<String> = l.entries.iter().map(|e| format!("- {e}")).collect();
            let withheld = withheld_notice(t, &l.dropped);
            out.push(Block {
                label: format!(
                    "{} of {person} ({}/{} chars)",
                    t.file_name(),
                    l.chars(),
                    self.cap(t)
                ),
                text: format!(
                    "{heading}\n[{}: {}/{} characters used; saved at session start, edits reach the next session]\n{}{withheld}",
                    t.file_name(),
                    l.chars(),
                    self.cap(t),
                    frame(
                        &format!("memory ({} of this person)", t.file_name()),
                        &lines.join("\n")
                    ),
                ),
            });
        }
        out
    }

    /// Applies one edit under the file's lock and writes the result atomically. `Ok` is the
    /// line the model is told; `Err` the reason the edit was refused.
    pub fn edit(&self, person: &str, t: Target, edit: &Edit) -> Result<String, MemoryError> {
        let path = self.path(person, t).ok_or(MemoryError::Unavailable)?;
        let lock = file_lock(&path);
        let _held = lock.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.load(person, t);
        if current.oversized {
            return Err(MemoryError::Oversized {
                file: t.file_name(),
                person: person.to_string(),
            });
        }
        // Entries left out at load (screened or past the cap) stay out of a rewrite, so a
        // rewrite also cleans the file; they were logged when read.
        let mut entries = current.entries;
        let cap = self.cap(t);
        let msg = match edit {
            Edit::Add(content) => {
                let c = self.check_entry(content)?;
                if entries.iter().any(|e| e.eq_ignore_ascii_case(&c)) {
                    return Err(MemoryError::Duplicate);
                }
                entries.push(c);
                "added"
            }
            Edit::Replace { old, new } => {
                let c = self.check_entry(new)?;
                let i = find_one(&entries, old)?;
                if entries
                    .iter()
                    .enumerate()
                    .any(|(j, e)| j != i && e.eq_ignore_ascii_case(&c))
                {
                    return Err(MemoryError::DuplicateOther);
                }
                entries[i] = c;
                "replaced"
            }
            Edit::Remove { old } => {
                let i = find_one(&entries, old)?;
                entries.remove(i);
                "removed"
            }
        };
        let total = used(&entries);
        if total > cap && !matches!(edit, Edit::Remove { .. }) {
            return Err(MemoryError::Full {
                file: t.file_name(),
                total,
                cap,
            });
        }
        write_atomic(&path, &render(&entries)).map_err(|e| {
            tracing::warn!(file = %path.display(), error = %e, "memory write failed");
            MemoryError::Write(e)
        })?;
        Ok(format!(
            "{msg}; {} now uses {total}/{cap} characters ({} entries). It reaches the prompt of the next session.",
            t.file_name(),
            entries.len()
        ))
    }

    fn check_entry(&self, content: &str) -> Result<String, MemoryError> {
        let c = content.trim();
        let c = c.strip_prefix("- ").unwrap_or(c).trim();
        if c.is_empty() {
            return Err(MemoryError::Empty);
        }
        if c.contains('\n') || c.contains('\r') {
            return Err(MemoryError::MultiLine);
        }
        if !is_text(c) {
            return Err(MemoryError::NotText);
        }
        if c.starts_with('#') {
            return Err(MemoryError::Heading);
        }
        let n = c.chars().count();
        if n > self.entry_chars {
            return Err(MemoryError::TooLong {
                chars: n,
                max: self.entry_chars,
            });
        }
        if let Some(f) = screen(c) {
            return Err(MemoryError::Screened(f));
        }
        Ok(c.to_string())
    }
}

/// The snapshot layers for a session opened by `ev`: the sender's memory in a private chat,
/// nothing in a group (everyone there would read it), for a scheduled run, or when off.
pub fn snapshot_for(config: &Config, ev: &crate::domain::MessageEvent) -> Vec<Block> {
    if !config.memory.enabled || ev.chat_type != crate::domain::ChatType::Dm {
        return Vec::new();
    }
    match config.person(ev.platform.as_str(), &ev.sender_id) {
        Some(person) => MemoryFiles::from_config(config).snapshot(&person),
        None => Vec::new(),
    }
}

/// One change the `memory` tool asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    Add(String),
    Replace { old: String, new: String },
    Remove { old: String },
}

fn read_bounded(path: &Path) -> std::io::Result<(String, bool)> {
    let f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    let mut buf = Vec::new();
    f.take(READ_BYTES).read_to_end(&mut buf)?;
    Ok((String::from_utf8_lossy(&buf).into_owned(), len > READ_BYTES))
}

/// One lock per file in this process: two lanes of one person cannot interleave a
/// read-modify-write.
fn file_lock(path: &Path) -> Arc<Mutex<()>> {
    static LOCKS: LazyLock<Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>> =
        LazyLock::new(Default::default);
    LOCKS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(path.to_path_buf())
        .or_default()
        .clone()
}

/// Writes `text` to a temporary file beside `path`, syncs it and renames it over `path`.
pub fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("memory"),
        uuid::Uuid::new_v4().simple()
    ));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests;
