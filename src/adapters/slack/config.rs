//! The `[slack]` section: owned by the adapter, read from the config's unknown tables (and
//! `HERALD_SLACK__…` environment variables, which land in the same table).
//!
//! Must not: print a token or the signing secret (they are `Secret`s), or accept a token of
//! the wrong kind silently (`xapp-` is the app-level token of Socket Mode, `xoxb-` the bot's).

use serde::{Deserialize, Serialize};

use crate::config::{ConfigUrl, Secret};

/// How events reach Herald.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SlackMode {
    /// Socket Mode: Herald opens a WebSocket to Slack; no public URL needed.
    #[default]
    Socket,
    /// The Events API: Slack POSTs signed requests to `/slack/events` and `/slack/interactive`.
    Events,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SlackConfig {
    /// App-level token (`xapp-…`, scope `connections:write`); Socket Mode needs it.
    pub app_token: Option<Secret>,
    /// Bot token (`xoxb-…`). The adapter runs when it is set.
    pub bot_token: Option<Secret>,
    /// Signing secret of the app; the Events API mode checks every request with it.
    pub signing_secret: Option<Secret>,
    pub mode: SlackMode,
    /// Web API base; the Socket Mode URL comes from `apps.connections.open` under it.
    pub api_url: ConfigUrl,
    /// User ids (`U…`) allowed to talk to the agent (deny by default).
    pub allowed_users: Vec<String>,
    /// Explicitly allow everyone in the workspace (warned about at start).
    pub allow_all_users: bool,
    /// In channels, answer only when mentioned (DMs always answer).
    pub require_mention: bool,
    /// Channel ids (`C…`) where every message is answered, mention or not.
    pub free_response_channels: Vec<String>,
    /// Pace posts and edits within Slack's published limits. Off only against a local fake
    /// (benchmarks): the pace holds a channel to about one message a second.
    pub pacing: bool,
}

impl Default for SlackConfig {
    fn default() -> Self {
        SlackConfig {
            app_token: None,
            bot_token: None,
            signing_secret: None,
            mode: SlackMode::Socket,
            api_url: ConfigUrl::parse("https://slack.com/api").expect("a URL"),
            allowed_users: Vec::new(),
            allow_all_users: false,
            require_mention: true,
            free_response_channels: Vec::new(),
            pacing: true,
        }
    }
}

/// What is wrong with a section, named by its key (start exits with this text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SlackConfigError {
    #[error("slack.bot_token is not set")]
    NoBotToken,
    #[error("slack.bot_token must be a bot token (xoxb-…)")]
    BotTokenKind,
    #[error("slack.mode = \"socket\" needs slack.app_token (an app-level token, xapp-…)")]
    NoAppToken,
    #[error("slack.app_token must be an app-level token (xapp-…)")]
    AppTokenKind,
    #[error("slack.mode = \"events\" needs slack.signing_secret")]
    NoSigningSecret,
}

impl SlackConfig {
    /// The checks that need no network; the tokens are tried against `auth.test` at start.
    pub fn check(&self) -> Result<(), SlackConfigError> {
        let bot = self
            .bot_token
            .as_ref()
            .filter(|t| !t.expose().is_empty())
            .ok_or(SlackConfigError::NoBotToken)?;
        if !bot.expose().starts_with("xoxb-") {
            return Err(SlackConfigError::BotTokenKind);
        }
        match self.mode {
            SlackMode::Socket => {
                let app = self
                    .app_token
                    .as_ref()
                    .filter(|t| !t.expose().is_empty())
                    .ok_or(SlackConfigError::NoAppToken)?;
                if !app.expose().starts_with("xapp-") {
                    return Err(SlackConfigError::AppTokenKind);
                }
            }
            SlackMode::Events => {
                if self
                    .signing_secret
                    .as_ref()
                    .is_none_or(|s| s.expose().is_empty())
                {
                    return Err(SlackConfigError::NoSigningSecret);
                }
            }
        }
        Ok(())
    }

    /// The bot token, once `check` passed.
    pub fn bot(&self) -> &str {
        self.bot_token.as_ref().map_or("", Secret::expose)
    }

    /// The app-level token, once `check` passed (Socket Mode).
    pub fn app(&self) -> &str {
        self.app_token.as_ref().map_or("", Secret::expose)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(
        bot: Option<&str>,
        app: Option<&str>,
        secret: Option<&str>,
        mode: SlackMode,
    ) -> SlackConfig {
        SlackConfig {
            bot_token: bot.map(Secret::new),
            app_token: app.map(Secret::new),
            signing_secret: secret.map(Secret::new),
            mode,
            ..SlackConfig::default()
        }
    }

    #[test]
    fn check_names_the_key_at_fault() {
        use SlackConfigError as E;
        use SlackMode::{Events, Socket};
        let cases = [
            (with(None, Some("xapp-1"), None, Socket), Err(E::NoBotToken)),
            (
                with(Some(""), Some("xapp-1"), None, Socket),
                Err(E::NoBotToken),
            ),
            (
                with(Some("xapp-1"), Some("xapp-1"), None, Socket),
                Err(E::BotTokenKind),
            ),
            (with(Some("xoxb-1"), None, None, Socket), Err(E::NoAppToken)),
            (
                with(Some("xoxb-1"), Some("xoxb-1"), None, Socket),
                Err(E::AppTokenKind),
            ),
            (with(Some("xoxb-1"), Some("xapp-1"), None, Socket), Ok(())),
            (
                with(Some("xoxb-1"), None, None, Events),
                Err(E::NoSigningSecret),
            ),
            (with(Some("xoxb-1"), None, Some("s"), Events), Ok(())),
        ];
        for (config, want) in cases {
            assert_eq!(config.check(), want, "{config:?}");
        }
        assert!(E::NoAppToken.to_string().contains("slack.app_token"));
    }

    #[test]
    fn defaults_and_toml() {
        let c: SlackConfig = toml_like(
            r#"{"bot_token":"xoxb-1","app_token":"xapp-1","mode":"events","signing_secret":"s",
               "allowed_users":["U1"],"free_response_channels":["C1"]}"#,
        );
        assert_eq!(c.mode, SlackMode::Events);
        assert!(c.require_mention);
        assert_eq!(
            c.api_url.as_str().trim_end_matches('/'),
            "https://slack.com/api"
        );
        assert_eq!(c.allowed_users, ["U1"]);
        assert!(!format!("{c:?}").contains("xoxb-1"));
    }

    fn toml_like(json: &str) -> SlackConfig {
        serde_json::from_str(json).expect("a section")
    }
}
