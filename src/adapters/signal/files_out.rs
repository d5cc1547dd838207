//! Files Herald sends: signal-cli attaches a file by its path, read from its own file system,
//! so each file is written under `signal.files_dir` (a directory both processes see at the
//! same path) for the one `send` that names it, and removed once the daemon answered.
//!
//! Must not: let a file's name choose where it is written (only its last part, cleaned, is
//! kept, inside a folder of its own per outbox row).

use std::path::{Path, PathBuf};

use crate::delivery::OutFile;

/// Writes `file` as `<dir>/<row>/<name>` (the name the person sees) and returns the path.
pub async fn write(dir: &Path, row: i64, file: &OutFile) -> std::io::Result<PathBuf> {
    let folder = dir.join(format!("row-{row}"));
    tokio::fs::create_dir_all(&folder).await?;
    let path = folder.join(clean_name(&file.name));
    tokio::fs::write(&path, &file.data).await?;
    Ok(path)
}

/// Removes the file and its folder (best effort: a leftover is only disk space).
pub async fn remove(path: &Path) {
    let _ = tokio::fs::remove_file(path).await;
    if let Some(folder) = path.parent() {
        let _ = tokio::fs::remove_dir(folder).await;
    }
}

/// The last part of `name`, with only letters, digits, `.`, `-` and `_` kept; `file` when
/// nothing is left.
pub fn clean_name(name: &str) -> String {
    let last = name.rsplit(['/', '\\']).next().unwrap_or("");
    let kept: String = last
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '.' | '-' | '_'))
        .collect();
    let kept = kept.trim_start_matches('.');
    if kept.is_empty() {
        "file".into()
    } else {
        kept.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cannot_escape_the_folder() {
        for (name, want) in [
            ("chart.png", "chart.png"),
            ("../../etc/passwd", "passwd"),
            ("a\\b\\c.txt", "c.txt"),
            ("..", "file"),
            ("my report (1).pdf", "myreport1.pdf"),
            ("", "file"),
        ] {
            assert_eq!(clean_name(name), want, "{name:?}");
        }
    }
}
