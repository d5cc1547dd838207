//! The `[signal]` section: owned by the adapter, read from the config's unknown tables (and
//! `HERALD_SIGNAL__…` environment variables, which land in the same table).
//!
//! Must not: accept an account that is not an E.164 number (signal-cli names accounts by
//! number), or a daemon address that is not http(s).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::config::ConfigUrl;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SignalConfig {
    /// The signal-cli daemon's HTTP address (`signal-cli -a ACCOUNT daemon --http HOST:PORT`).
    /// The adapter runs when it and `account` are set.
    pub url: Option<ConfigUrl>,
    /// The bot's number on Signal, E.164 (`+4915…`), registered with signal-cli.
    #[serde(deserialize_with = "number_opt")]
    pub account: Option<String>,
    /// Numbers (`+4915…`) or account uuids allowed to talk to the agent (deny by default).
    #[serde(deserialize_with = "numbers")]
    pub allowed_users: Vec<String>,
    /// Explicitly allow everyone who writes to the number (warned about at start).
    pub allow_all_users: bool,
    /// Group ids (as signal-cli lists them) where every message is answered; in other groups
    /// Herald answers when mentioned or replied to.
    pub free_response_groups: Vec<String>,
    /// Stream answers by editing one message (`editTimestamp`) while the model writes; off,
    /// an answer arrives whole.
    pub edits: bool,
    /// Where Herald writes a file it sends, for the daemon to read by path: a directory both
    /// see at the same path (a shared volume when they run in two containers). Default
    /// `<server.data_dir>/signal-files`.
    pub files_dir: Option<PathBuf>,
}

impl Default for SignalConfig {
    fn default() -> Self {
        SignalConfig {
            url: None,
            account: None,
            allowed_users: Vec::new(),
            allow_all_users: false,
            free_response_groups: Vec::new(),
            edits: true,
            files_dir: None,
        }
    }
}

/// A number as the environment may spell it: `HERALD_SIGNAL__ACCOUNT=+4915…` reads as an
/// integer (its `+` taken for a sign), so an integer is a number with its `+` put back.
#[derive(Deserialize)]
#[serde(untagged)]
enum NumberOrText {
    Text(String),
    Integer(u64),
}

impl NumberOrText {
    fn text(self) -> String {
        match self {
            NumberOrText::Text(t) => t,
            NumberOrText::Integer(n) => format!("+{n}"),
        }
    }
}

fn number_opt<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(Option::<NumberOrText>::deserialize(d)?.map(NumberOrText::text))
}

fn numbers<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(Vec::<NumberOrText>::deserialize(d)?
        .into_iter()
        .map(NumberOrText::text)
        .collect())
}

/// What is wrong with a section, named by its key (start exits with this text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignalConfigError {
    #[error("signal.url is set but signal.account is not (the bot's number, +…)")]
    NoAccount,
    #[error("signal.account is set but signal.url is not (the signal-cli daemon's http address)")]
    NoUrl,
    #[error("signal.account must be an E.164 number like +4915123456789")]
    AccountKind,
    #[error("signal.url must be an http:// or https:// address")]
    UrlScheme,
    #[error("signal.allowed_users holds {0:?}: a number (+4915…) or an account uuid is expected")]
    UserKind(String),
}

impl SignalConfig {
    /// Whether the section asks for the adapter (either key set: the check names the other).
    pub fn wanted(&self) -> bool {
        self.url.is_some() || self.account.is_some()
    }

    /// The checks that need no network; the daemon is asked at start and by `herald doctor`.
    pub fn check(&self) -> Result<(), SignalConfigError> {
        let url = self.url.as_ref().ok_or(SignalConfigError::NoUrl)?;
        let account = self
            .account
            .as_deref()
            .ok_or(SignalConfigError::NoAccount)?;
        if !is_number(account) {
            return Err(SignalConfigError::AccountKind);
        }
        if !matches!(url.url().scheme(), "http" | "https") {
            return Err(SignalConfigError::UrlScheme);
        }
        if let Some(bad) = self
            .allowed_users
            .iter()
            .find(|u| !is_number(u) && !is_uuid(u))
        {
            return Err(SignalConfigError::UserKind(bad.clone()));
        }
        Ok(())
    }

    /// The account, once `check` passed.
    pub fn account(&self) -> &str {
        self.account.as_deref().unwrap_or("")
    }
}

/// `+` and 7 to 15 digits (E.164).
pub fn is_number(s: &str) -> bool {
    s.strip_prefix('+')
        .is_some_and(|d| (7..=15).contains(&d.len()) && d.bytes().all(|b| b.is_ascii_digit()))
}

/// A uuid in its 8-4-4-4-12 hex form (Signal's account ids, ACI).
pub fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.iter().map(|p| p.len()).eq([8, 4, 4, 4, 12])
        && parts
            .iter()
            .all(|p| p.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(url: Option<&str>, account: Option<&str>, users: &[&str]) -> SignalConfig {
        SignalConfig {
            url: url.map(|u| ConfigUrl::parse(u).unwrap()),
            account: account.map(str::to_string),
            allowed_users: users.iter().map(|u| u.to_string()).collect(),
            ..SignalConfig::default()
        }
    }

    #[test]
    fn check_names_the_key_at_fault() {
        use SignalConfigError as E;
        let uuid = "5e1a0000-0000-4000-8000-000000000001";
        let cases = [
            (
                with(Some("http://127.0.0.1:8080"), None, &[]),
                Err(E::NoAccount),
            ),
            (with(None, Some("+4915123456789"), &[]), Err(E::NoUrl)),
            (
                with(Some("http://h:1"), Some("4915123456789"), &[]),
                Err(E::AccountKind),
            ),
            (
                with(Some("ftp://h:1"), Some("+4915123456789"), &[]),
                Err(E::UrlScheme),
            ),
            (
                with(Some("http://h:1"), Some("+4915123456789"), &["alice"]),
                Err(E::UserKind("alice".into())),
            ),
            (
                with(
                    Some("http://h:1"),
                    Some("+4915123456789"),
                    &["+15550100001", uuid],
                ),
                Ok(()),
            ),
        ];
        for (config, want) in cases {
            assert_eq!(config.check(), want, "{config:?}");
        }
        assert!(E::NoAccount.to_string().contains("signal.account"));
    }

    #[test]
    fn defaults_and_json() {
        let c: SignalConfig = serde_json::from_str(
            r#"{"url":"http://127.0.0.1:8080","account":"+15550100000",
               "allowed_users":["+15550100001"],"free_response_groups":["abc="]}"#,
        )
        .unwrap();
        assert!(c.edits);
        assert!(c.wanted());
        assert_eq!(c.account(), "+15550100000");
        assert!(!SignalConfig::default().wanted());
        // The environment reads `+4915…` as an integer.
        let env: SignalConfig =
            serde_json::from_str(r#"{"account":15550100000,"allowed_users":[15550100001]}"#)
                .unwrap();
        assert_eq!(env.account(), "+15550100000");
        assert_eq!(env.allowed_users, ["+15550100001"]);
        let bad = serde_json::from_str::<SignalConfig>(r#"{"token":"x"}"#);
        assert!(bad.is_err(), "unknown keys are refused");
    }
}
