//! `herald doctor`'s Matrix checks: the homeserver answers, the bot's credentials log in
//! (`whoami` with the configured or saved token; a password not used yet is reported as such),
//! and one `/sync` with no wait answers. Each result names the key at fault.
//!
//! Must not: print the token or the password, or log in (a doctor run must not make a device).

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::config::MatrixConfig;

/// One line of the doctor's report: what was checked, and what it found.
pub type Check = (&'static str, Result<String, String>);

const TIMEOUT: Duration = Duration::from_secs(10);

/// Runs the checks that apply to this section; `data_dir` holds a saved session.
pub async fn doctor(config: &MatrixConfig, data_dir: &Path) -> Vec<Check> {
    let mut out = Vec::new();
    if let Err(e) = config.check() {
        out.push(("matrix config", Err(e.to_string())));
        return out;
    }
    let base = config
        .homeserver_url
        .as_ref()
        .map(|u| u.as_str().trim_end_matches('/').to_string())
        .unwrap_or_default();
    let http = match reqwest::Client::builder().timeout(TIMEOUT).build() {
        Ok(c) => c,
        Err(e) => {
            out.push(("matrix.homeserver_url", Err(e.to_string())));
            return out;
        }
    };
    let versions = http
        .get(format!("{base}/_matrix/client/versions"))
        .send()
        .await;
    match versions {
        Ok(r) if r.status().is_success() => {
            out.push(("matrix.homeserver_url", Ok("the homeserver answers".into())))
        }
        Ok(r) => out.push((
            "matrix.homeserver_url",
            Err(format!("the homeserver answered {}", r.status())),
        )),
        Err(e) => {
            out.push((
                "matrix.homeserver_url",
                Err(format!("cannot reach the homeserver: {}", e.without_url())),
            ));
            return out;
        }
    }
    let token = match token(config, data_dir) {
        Ok(t) => t,
        Err(note) => {
            out.push(("matrix.password", Ok(note)));
            return out;
        }
    };
    let get = |path: &str| {
        http.get(format!("{base}/_matrix/client/v3/{path}"))
            .bearer_auth(&token)
            .send()
    };
    let who = match get("account/whoami").await {
        Ok(r) if r.status().is_success() => r.json::<Value>().await.ok(),
        _ => None,
    };
    let key = if config.access_token.is_some() {
        "matrix.access_token"
    } else {
        "matrix session"
    };
    match who {
        Some(w) if w.get("user_id").and_then(Value::as_str) == Some(config.user()) => {
            let device = w.get("device_id").and_then(Value::as_str).unwrap_or("?");
            out.push((
                key,
                Ok(format!("logged in as {} on device {device}", config.user())),
            ));
        }
        Some(_) => out.push((
            key,
            Err("the token belongs to another user than matrix.user_id".into()),
        )),
        None => {
            out.push((key, Err("the homeserver refused the token (whoami)".into())));
            return out;
        }
    }
    let sync = get("sync?timeout=0&filter=%7B%22room%22%3A%7B%22rooms%22%3A%5B%5D%7D%7D").await;
    out.push((
        "matrix sync",
        match sync {
            Ok(r) if r.status().is_success() => Ok("a sync answers".into()),
            Ok(r) => Err(format!("sync answered {}", r.status())),
            Err(e) => Err(format!("sync failed: {}", e.without_url())),
        },
    ));
    out
}

/// The token to check: the configured one, else the saved session's.
fn token(config: &MatrixConfig, data_dir: &Path) -> Result<String, String> {
    if let Some(t) = &config.access_token {
        return Ok(t.expose().to_string());
    }
    let file = super::session::dir(data_dir).join("session.json");
    let saved = std::fs::read_to_string(&file)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| {
            v.get("access_token")
                .and_then(Value::as_str)
                .map(str::to_string)
        });
    saved.ok_or_else(|| {
        "set; not used yet: the first `herald serve` logs in once and keeps the session".into()
    })
}
