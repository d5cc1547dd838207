//! Bytes Herald holds for a while under `<data_dir>/media`: a fetched file (so the next turn
//! that shows the same image does not download it again) and a file a tool produced (so the
//! outbox can send it after a crash). Content-addressed by SHA-256; a second index maps a
//! platform reference to the content it fetched.
//!
//! Nothing here is the record of anything: the transcript and the outbox keep references,
//! and a missing file is fetched again (inbound) or reported (outbound). Files older than the
//! expiry are swept; files a tool produced are kept at least an hour whatever the expiry, so a
//! reply's files outlive its delivery.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

/// The shortest life of a cached file, whatever `media.cache_hours` says.
const MIN_KEEP: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone)]
pub struct MediaCache {
    dir: PathBuf,
    keep: Duration,
    /// Whether fetched (inbound) bytes are written at all (`media.cache_hours` > 0).
    cache_fetched: bool,
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Only a 64-digit lowercase hex name is a content file: nothing a caller passes can name a
/// path outside the cache.
pub fn is_sha256(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl MediaCache {
    pub fn new(dir: impl Into<PathBuf>, keep: Duration) -> MediaCache {
        MediaCache {
            dir: dir.into(),
            keep: keep.max(MIN_KEEP),
            cache_fetched: !keep.is_zero(),
        }
    }

    /// `<data_dir>/media`, keeping files `cache_hours`.
    pub fn under(data_dir: &Path, cache_hours: u64) -> MediaCache {
        MediaCache::new(
            data_dir.join("media"),
            Duration::from_secs(cache_hours * 3600),
        )
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stores `bytes` and returns their SHA-256 (the name to read them back by). Written to a
    /// temporary name and renamed, so a reader never sees half a file.
    pub async fn put(&self, bytes: &[u8]) -> std::io::Result<String> {
        let sha = sha256_hex(bytes);
        let path = self.dir.join(&sha);
        if tokio::fs::try_exists(&path).await.unwrap_or(false) {
            // Touch it: a file in use again lives another period.
            let _ = touch(&path).await;
            return Ok(sha);
        }
        tokio::fs::create_dir_all(&self.dir).await?;
        let tmp = self.dir.join(format!(".{sha}.{}.tmp", std::process::id()));
        tokio::fs::write(&tmp, bytes).await?;
        tokio::fs::rename(&tmp, &path).await?;
        Ok(sha)
    }

    /// The bytes stored under `sha`, if they are still here and still match their name.
    pub async fn get(&self, sha: &str) -> Option<Vec<u8>> {
        if !is_sha256(sha) {
            return None;
        }
        let bytes = tokio::fs::read(self.dir.join(sha)).await.ok()?;
        (sha256_hex(&bytes) == sha).then_some(bytes)
    }

    /// Fetched bytes for a platform reference (`source_key`): stored by content and indexed by
    /// the reference. Does nothing when fetched bytes are not cached.
    pub async fn put_fetched(&self, source_key: &str, bytes: &[u8]) -> std::io::Result<String> {
        if !self.cache_fetched {
            return Ok(sha256_hex(bytes));
        }
        let sha = self.put(bytes).await?;
        let index = self.dir.join("by-source");
        tokio::fs::create_dir_all(&index).await?;
        tokio::fs::write(index.join(sha256_hex(source_key.as_bytes())), &sha).await?;
        Ok(sha)
    }

    /// Bytes fetched earlier for `source_key`, if still cached.
    pub async fn get_fetched(&self, source_key: &str) -> Option<Vec<u8>> {
        if !self.cache_fetched {
            return None;
        }
        let index = self
            .dir
            .join("by-source")
            .join(sha256_hex(source_key.as_bytes()));
        let sha = tokio::fs::read_to_string(index).await.ok()?;
        self.get(sha.trim()).await
    }

    /// Removes files older than the expiry; returns how many went.
    pub async fn sweep(&self) -> std::io::Result<usize> {
        let mut removed = 0;
        for dir in [self.dir.clone(), self.dir.join("by-source")] {
            let Ok(mut entries) = tokio::fs::read_dir(&dir).await else {
                continue;
            };
            while let Some(e) = entries.next_entry().await? {
                let Ok(meta) = e.metadata().await else {
                    continue;
                };
                if !meta.is_file() {
                    continue;
                }
                let age = meta
                    .modified()
                    .ok()
                    .and_then(|m| SystemTime::now().duration_since(m).ok())
                    .unwrap_or_default();
                if age > self.keep && tokio::fs::remove_file(e.path()).await.is_ok() {
                    removed += 1;
                }
            }
        }
        Ok(removed)
    }
}

async fn touch(path: &Path) -> std::io::Result<()> {
    // One quick metadata call on an open file: not worth a blocking-pool task.
    let file = tokio::fs::File::options()
        .append(true)
        .open(path)
        .await?
        .into_std()
        .await;
    file.set_modified(SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn content_addressed_and_indexed_by_source() {
        let dir = tempfile::tempdir().unwrap();
        let cache = MediaCache::under(dir.path(), 24);
        let sha = cache.put(b"png bytes").await.unwrap();
        assert!(is_sha256(&sha));
        assert_eq!(cache.get(&sha).await.as_deref(), Some(&b"png bytes"[..]));
        assert_eq!(cache.get("../../etc/passwd").await, None);
        assert_eq!(cache.get(&"0".repeat(64)).await, None);

        let fetched = cache.put_fetched("telegram:AgAD", b"photo").await.unwrap();
        assert_eq!(fetched, sha256_hex(b"photo"));
        assert_eq!(
            cache.get_fetched("telegram:AgAD").await.as_deref(),
            Some(&b"photo"[..])
        );
        assert_eq!(cache.get_fetched("telegram:other").await, None);

        // A file changed on disk no longer matches its name and is not returned.
        std::fs::write(dir.path().join("media").join(&sha), b"tampered").unwrap();
        assert_eq!(cache.get(&sha).await, None);
        assert_eq!(cache.sweep().await.unwrap(), 0, "nothing is old yet");
    }

    #[tokio::test]
    async fn zero_hours_caches_no_fetched_bytes_but_keeps_produced_ones() {
        let dir = tempfile::tempdir().unwrap();
        let cache = MediaCache::under(dir.path(), 0);
        cache.put_fetched("url:https://cdn/a", b"a").await.unwrap();
        assert_eq!(cache.get_fetched("url:https://cdn/a").await, None);
        let sha = cache.put(b"tool image").await.unwrap();
        assert!(cache.get(&sha).await.is_some());
    }
}
