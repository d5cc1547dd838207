//! `herald doctor`'s Slack checks: each token tried against Slack (auth.test for the bot
//! token, apps.connections.open for the app-level one), the bot token's scopes against the
//! ones Herald needs, and the signing secret for the Events API. Each result names the key at
//! fault, so the operator knows which token to replace.
//!
//! Must not: print a token or the secret.

use slack_morphism::api::{SlackApiAppsConnectionOpenResponse, SlackApiAuthTestResponse};

use super::api::SlackApi;
use super::config::{SlackConfig, SlackMode};

/// The bot scopes Herald uses (deploy/slack-manifest.yaml asks for the same).
pub const BOT_SCOPES: &[&str] = &[
    "app_mentions:read",
    "channels:history",
    "chat:write",
    "commands",
    "files:read",
    "files:write",
    "groups:history",
    "im:history",
    "mpim:history",
    "users:read",
];

/// One line of the doctor's report: what was checked, and what it found.
pub type Check = (&'static str, Result<String, String>);

/// Runs the checks that apply to this section.
pub async fn doctor(config: &SlackConfig) -> Vec<Check> {
    let mut out = Vec::new();
    if let Err(e) = config.check() {
        out.push(("slack config", Err(e.to_string())));
        return out;
    }
    let api = match SlackApi::new(config.api_url.as_str()) {
        Ok(api) => api,
        Err(e) => {
            out.push(("slack.api_url", Err(e.to_string())));
            return out;
        }
    };
    let auth = api
        .form_with_scopes::<SlackApiAuthTestResponse>("auth.test", config.bot(), &[])
        .await;
    match auth {
        Ok(answer) => {
            let who = format!(
                "team {} as {}",
                answer.body.team,
                answer
                    .body
                    .user
                    .clone()
                    .unwrap_or(answer.body.user_id.0.clone())
            );
            out.push(("slack.bot_token", Ok(who)));
            out.push(("slack bot scopes", scopes(answer.scopes.as_deref())));
        }
        Err(e) => out.push((
            "slack.bot_token",
            Err(format!("auth.test refused the bot token: {e}")),
        )),
    }
    match config.mode {
        SlackMode::Socket => {
            let open = api
                .form::<SlackApiAppsConnectionOpenResponse>(
                    "apps.connections.open",
                    config.app(),
                    &[],
                )
                .await;
            let result = match open {
                Ok(_) => Ok("Socket Mode connections open".to_string()),
                Err(e) => Err(format!(
                    "apps.connections.open refused the app-level token: {e}"
                )),
            };
            out.push(("slack.app_token", result));
        }
        SlackMode::Events => out.push((
            "slack.signing_secret",
            Ok("set; requests to /slack/events are checked with it".to_string()),
        )),
    }
    out
}

/// The scopes Herald needs that the token's `x-oauth-scopes` lacks.
pub fn scopes(granted: Option<&str>) -> Result<String, String> {
    let Some(granted) = granted else {
        return Ok("not reported by Slack; not checked".to_string());
    };
    let have: Vec<&str> = granted.split(',').map(str::trim).collect();
    let missing: Vec<&str> = BOT_SCOPES
        .iter()
        .copied()
        .filter(|s| !have.contains(s))
        .collect();
    if missing.is_empty() {
        Ok("all granted".to_string())
    } else {
        Err(format!(
            "missing scope(s) {}: add them under OAuth & Permissions and reinstall the app",
            missing.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_check_names_what_is_missing() {
        let all = BOT_SCOPES.join(",");
        assert_eq!(scopes(Some(&all)), Ok("all granted".to_string()));
        let without = all.replace("files:write,", "");
        let err = scopes(Some(&without)).unwrap_err();
        assert!(err.contains("files:write"), "{err}");
        assert!(!err.contains("chat:write"), "{err}");
        assert!(scopes(None).is_ok());
    }
}
