//! Whether a folder can hold Herald's files (the SQLite database, media, memory), said once
//! in words that name the path and the cause — permission denied, not a directory, a missing
//! parent — instead of SQLite's `(code: 14) unable to open database file`.
//!
//! `serve` prepares the database's folder with [`prepare`] before SQLite opens it, and
//! `herald doctor` checks `server.data_dir` with [`check`], which creates nothing that stays.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// What [`check`] found for a usable folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirState {
    /// It exists and a file can be created in it.
    Writable,
    /// It does not exist yet; `ancestor`, its nearest existing parent, is a writable folder, so
    /// `serve` can create it.
    Creatable { ancestor: PathBuf },
}

/// Checks `dir` without creating it: a writable folder, or one that can be created under its
/// nearest existing parent. `Err` holds the sentence to show.
pub fn check(dir: &Path) -> Result<DirState, String> {
    let mut ancestor = dir;
    while !ancestor.exists() {
        match ancestor.parent() {
            Some(p) if !p.as_os_str().is_empty() => ancestor = p,
            _ => {
                ancestor = Path::new(".");
                break;
            }
        }
    }
    if !ancestor.is_dir() {
        return Err(if ancestor == dir {
            format!("{} is a file, not a directory", dir.display())
        } else {
            format!(
                "{} cannot be created: {} is a file, not a directory",
                dir.display(),
                ancestor.display()
            )
        });
    }
    probe(ancestor).map_err(|cause| {
        if ancestor == dir {
            format!("{} is not writable: {cause}", dir.display())
        } else {
            format!(
                "{} cannot be created: its parent {} is not writable: {cause}",
                dir.display(),
                ancestor.display()
            )
        }
    })?;
    Ok(if ancestor == dir {
        DirState::Writable
    } else {
        DirState::Creatable {
            ancestor: ancestor.to_path_buf(),
        }
    })
}

/// Creates `dir` when missing and checks a file can be created in it. `Err` holds the sentence
/// to show.
pub fn prepare(dir: &Path) -> Result<(), String> {
    if dir.exists() && !dir.is_dir() {
        return Err(format!(
            "the data folder {} is a file, not a directory",
            dir.display()
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| {
        format!(
            "cannot create the data folder {}: {}",
            dir.display(),
            cause(&e)
        )
    })?;
    probe(dir).map_err(|c| format!("the data folder {} is not writable: {c}", dir.display()))
}

/// Creates and removes a file in `dir`; the cause in words when that fails.
fn probe(dir: &Path) -> Result<(), String> {
    match tempfile_in(dir) {
        Ok(path) => {
            let _ = std::fs::remove_file(path);
            Ok(())
        }
        Err(e) => Err(cause(&e)),
    }
}

/// A new empty file in `dir` with a name no other process uses.
fn tempfile_in(dir: &Path) -> std::io::Result<PathBuf> {
    let path = dir.join(format!(
        ".herald-write-check-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)?;
    Ok(path)
}

/// The cause of an I/O error in the words an operator acts on.
pub(crate) fn cause(e: &std::io::Error) -> String {
    match e.kind() {
        ErrorKind::PermissionDenied => "permission denied".into(),
        ErrorKind::NotADirectory => "a part of the path is a file, not a directory".into(),
        ErrorKind::NotFound => "a parent folder is missing".into(),
        ErrorKind::ReadOnlyFilesystem => "the file system is read-only".into(),
        ErrorKind::StorageFull => "no space left on the device".into(),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_under_a_file_is_named_with_its_cause() {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join("plain");
        std::fs::write(&file, b"x").unwrap();
        let dir = file.join("data");
        let err = prepare(&dir).unwrap_err();
        assert!(err.contains(&dir.display().to_string()), "{err}");
        assert!(err.contains("not a directory"), "{err}");
        let err = check(&dir).unwrap_err();
        assert!(err.contains("plain is a file, not a directory"), "{err}");
        assert!(check(&file).unwrap_err().contains("is a file"));
        let fresh = root.path().join("a/b");
        assert_eq!(
            check(&fresh).unwrap(),
            DirState::Creatable {
                ancestor: root.path().to_path_buf()
            }
        );
        assert!(!fresh.exists(), "check creates nothing");
        prepare(&fresh).unwrap();
        assert_eq!(check(&fresh).unwrap(), DirState::Writable);
        assert_eq!(
            std::fs::read_dir(&fresh).unwrap().count(),
            0,
            "no probe left"
        );
    }
}
