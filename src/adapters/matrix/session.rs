//! The bot's Matrix session: one client with its SQLite state and crypto store under
//! `<data_dir>/matrix/`, logged in once and restored on every later start, so the device id and
//! the crypto identity stay the same across restarts (people never see a new unverified device).
//!
//! With `matrix.access_token`, the token's device is asked of the homeserver (`whoami`) and
//! the session restored on it. With `matrix.password`, the first start logs in (a new device
//! named `matrix.device_name`) and writes `session.json` (user, device and token; mode 0600);
//! every later start restores that file and never logs in again.
//!
//! Must not: log the token or the password, or write the session file readable by others.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
use matrix_sdk::authentication::matrix::MatrixSession;
use matrix_sdk::config::RequestConfig;
use matrix_sdk::ruma::{OwnedDeviceId, OwnedUserId};
use matrix_sdk::store::StateStoreDataKey;
use matrix_sdk::{Client, SessionMeta, SessionTokens};
use serde::{Deserialize, Serialize};

use super::config::MatrixConfig;

/// What `session.json` holds.
#[derive(Serialize, Deserialize)]
struct Saved {
    user_id: String,
    device_id: String,
    access_token: String,
}

/// The folder of the adapter's own files.
pub fn dir(data_dir: &Path) -> PathBuf {
    data_dir.join("matrix")
}

/// A client on the section's homeserver with its stores in `dir`; no network yet.
pub async fn build(config: &MatrixConfig, dir: &Path) -> anyhow::Result<Client> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let url = config
        .homeserver_url
        .as_ref()
        .ok_or_else(|| anyhow!("matrix.homeserver_url is not set"))?;
    Client::builder()
        .homeserver_url(url.as_str())
        .sqlite_store(dir.join("store"), None)
        // The sender owns retries: a 429 goes back to it as `RetryAfter`, not slept on here.
        .request_config(RequestConfig::new().disable_retry())
        .build()
        .await
        .context("building the Matrix client")
}

/// Logs the client in: restores the saved or configured session, or logs in with the password
/// once and saves what the homeserver gave.
pub async fn log_in(client: &Client, config: &MatrixConfig, dir: &Path) -> anyhow::Result<()> {
    let file = dir.join("session.json");
    if let Some(token) = config.access_token.as_ref().map(|t| t.expose()) {
        let device = whoami_device(config, token).await?;
        return restore(client, config.user(), &device, token).await;
    }
    if let Ok(text) = std::fs::read_to_string(&file) {
        let saved: Saved = serde_json::from_str(&text)
            .with_context(|| format!("reading {} (delete it to log in again)", file.display()))?;
        if saved.user_id == config.user() {
            return restore(
                client,
                &saved.user_id,
                &saved.device_id,
                &saved.access_token,
            )
            .await;
        }
        tracing::warn!(
            "matrix session.json is for another user; logging in as matrix.user_id instead"
        );
    }
    let password = config
        .password
        .as_ref()
        .map(|p| p.expose())
        .ok_or_else(|| anyhow!("matrix needs matrix.access_token or matrix.password"))?;
    // The login itself goes out by hand and the session is saved before the client takes it:
    // a kill between the two then leaves no crypto identity without its session file (which
    // would make every later start fail on a device the store does not match).
    let saved = password_login(config, password).await?;
    write_private(&file, &serde_json::to_vec(&saved)?)?;
    tracing::info!(device_id = %saved.device_id, "matrix: logged in with the password; session saved");
    restore(
        client,
        &saved.user_id,
        &saved.device_id,
        &saved.access_token,
    )
    .await
}

/// `POST /login` with the password: a new device named `matrix.device_name`.
async fn password_login(config: &MatrixConfig, password: &str) -> anyhow::Result<Saved> {
    let body = serde_json::json!({
        "type": "m.login.password",
        "identifier": { "type": "m.id.user", "user": config.user() },
        "password": password,
        "initial_device_display_name": config.device_name,
    });
    let answer = reqwest::Client::new()
        .post(format!("{}/_matrix/client/v3/login", base_url(config)))
        .json(&body)
        .send()
        .await
        .context("matrix login")?;
    let status = answer.status();
    let answer: serde_json::Value = answer.json().await.unwrap_or_default();
    let field = |k: &str| answer.get(k).and_then(|v| v.as_str()).map(str::to_string);
    if !status.is_success() {
        let why = field("errcode").unwrap_or_else(|| status.to_string());
        return Err(anyhow!("matrix login as {} refused: {why}", config.user()));
    }
    match (field("user_id"), field("device_id"), field("access_token")) {
        (Some(user_id), Some(device_id), Some(access_token)) => Ok(Saved {
            user_id,
            device_id,
            access_token,
        }),
        _ => Err(anyhow!("matrix login answer without user, device or token")),
    }
}

fn base_url(config: &MatrixConfig) -> String {
    config
        .homeserver_url
        .as_ref()
        .map(|u| u.as_str().trim_end_matches('/').to_string())
        .unwrap_or_default()
}

async fn restore(client: &Client, user: &str, device: &str, token: &str) -> anyhow::Result<()> {
    let user_id: OwnedUserId = user.try_into().context("matrix.user_id")?;
    let device_id: OwnedDeviceId = device.into();
    let session = MatrixSession {
        meta: SessionMeta { user_id, device_id },
        tokens: SessionTokens {
            access_token: token.to_string(),
            refresh_token: None,
        },
    };
    // Herald's store, not the SDK's, says where the sync resumes (`sync.rs`). The SDK drops a
    // response whose `next_batch` is the last one it saw ("the same sync response twice"); after
    // a kill between its save and ours, the batch Herald fetches again would come back empty and
    // its messages be lost. Forgetting the SDK's own position makes it take the batch whole.
    client
        .state_store()
        .remove_kv_data(StateStoreDataKey::SyncToken)
        .await
        .context("clearing the SDK's sync position")?;
    client
        .restore_session(session)
        .await
        .context("restoring the Matrix session")
}

/// The device of an access token, from `GET /account/whoami`.
async fn whoami_device(config: &MatrixConfig, token: &str) -> anyhow::Result<String> {
    let answer: serde_json::Value = reqwest::Client::new()
        .get(format!(
            "{}/_matrix/client/v3/account/whoami",
            base_url(config)
        ))
        .bearer_auth(token)
        .send()
        .await
        .context("matrix whoami")?
        .error_for_status()
        .map_err(|e| anyhow!("matrix.access_token was refused by the homeserver: {e}"))?
        .json()
        .await
        .context("matrix whoami answer")?;
    if answer.get("user_id").and_then(|u| u.as_str()) != Some(config.user()) {
        return Err(anyhow!(
            "matrix.access_token belongs to another user than matrix.user_id"
        ));
    }
    answer
        .get("device_id")
        .and_then(|d| d.as_str())
        .map(str::to_string)
        .ok_or_else(|| anyhow!("matrix.access_token has no device (a guest or appservice token?)"))
}

/// Writes a file only its owner can read.
fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("writing {}", tmp.display()))?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))
}
