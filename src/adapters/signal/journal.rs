//! The sent journal: signal-cli has no idempotency key and no way to ask what it sent, so the
//! adapter itself writes down each outbox row it got a timestamp for, the moment the daemon's
//! answer is read — one appended line (`<outbox key>\t<timestamp>`), a single `write` that a
//! killed process cannot take back — before the sender's `mark_sent` reaches the store. A row
//! tried again after an unclean attempt is first looked up here: when the daemon took it, its
//! timestamp is returned and nothing is sent again.
//!
//! What is left of the window: the daemon took the message and Herald died before reading its
//! answer (the answer's way back over the local HTTP connection). The journal is per data
//! folder: a row another replica retries is not found in it.
//!
//! Must not: hold a message's text (keys and timestamps only), or grow without bound (cut to
//! its newest lines at start).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The journal is cut back to its newest `KEEP` bytes when it grew past `LIMIT` (rows that old
/// were marked sent in the store long ago).
const LIMIT: u64 = 4 << 20;
const KEEP: usize = 1 << 20;

pub struct Journal {
    path: PathBuf,
    file: Mutex<Option<File>>,
}

impl Journal {
    /// The journal at `path` (created on the first record), cut back if it grew too long.
    pub fn open(path: &Path) -> Journal {
        if std::fs::metadata(path).is_ok_and(|m| m.len() > LIMIT) {
            if let Ok(bytes) = std::fs::read(path) {
                let tail = &bytes[bytes.len().saturating_sub(KEEP)..];
                let start = tail.iter().position(|b| *b == b'\n').map_or(0, |i| i + 1);
                let _ = std::fs::write(path, &tail[start..]);
            }
        }
        Journal {
            path: path.to_path_buf(),
            file: Mutex::new(None),
        }
    }

    /// Writes down that outbox row `key` went out as `timestamp`. A failure is logged: the
    /// row is still marked sent by the sender, only the window stays as wide as the store's.
    pub fn record(&self, key: &str, timestamp: &str) {
        let line = format!("{}\t{timestamp}\n", clean(key));
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if file.is_none() {
            if let Some(dir) = self.path.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            match OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)
            {
                Ok(f) => *file = Some(f),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot open the signal sent journal");
                    return;
                }
            }
        }
        if let Some(f) = file.as_mut() {
            if let Err(e) = f.write_all(line.as_bytes()) {
                tracing::warn!(error = %e, "cannot write the signal sent journal");
                *file = None;
            }
        }
    }

    /// The timestamp row `key` went out as, if it is written down.
    pub fn find(&self, key: &str) -> Option<String> {
        let key = clean(key);
        let text = std::fs::read_to_string(&self.path).ok()?;
        text.lines().rev().find_map(|line| {
            let (k, ts) = line.split_once('\t')?;
            (k == key && !ts.is_empty()).then(|| ts.to_string())
        })
    }
}

/// A key on one line of its own.
fn clean(key: &str) -> String {
    key.replace(['\t', '\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_found_and_a_long_journal_is_cut_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("signal-sent.journal");
        let j = Journal::open(&path);
        assert_eq!(j.find("r1"), None, "nothing before the first record");
        j.record("r1", "1700000000001");
        j.record("r2\tx", "1700000000002");
        assert_eq!(j.find("r1").as_deref(), Some("1700000000001"));
        assert_eq!(j.find("r2\tx").as_deref(), Some("1700000000002"));
        assert_eq!(j.find("r3"), None);

        let long = "k\t1\n".repeat((LIMIT as usize / 4) + 10) + "last\t9\n";
        std::fs::write(&path, long).unwrap();
        let j = Journal::open(&path);
        assert!(std::fs::metadata(&path).unwrap().len() <= KEEP as u64);
        assert_eq!(j.find("last").as_deref(), Some("9"));
    }
}
