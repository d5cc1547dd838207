//! The `[matrix]` section: owned by the adapter, read from the config's unknown tables (and
//! `HERALD_MATRIX__…` environment variables, which land in the same table).
//!
//! Must not: print the access token or the password (they are `Secret`s), or accept a user id
//! that is not a Matrix user id (`@localpart:server`).

use serde::{Deserialize, Serialize};

use crate::config::{ConfigUrl, Secret};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MatrixConfig {
    /// The homeserver's client-server API base (`https://matrix.example.org`).
    pub homeserver_url: Option<ConfigUrl>,
    /// The bot's own user id (`@herald:example.org`). The adapter runs when it is set.
    pub user_id: Option<String>,
    /// An access token of the bot's account (and device). Either this or `password`.
    pub access_token: Option<Secret>,
    /// The bot account's password, used once to log in: the session it opens (device id and
    /// token) is kept under `<data_dir>/matrix/` and reused from then on.
    pub password: Option<Secret>,
    /// The display name of the device a password login creates.
    pub device_name: String,
    /// User ids (`@alice:example.org`) allowed to talk to the agent (deny by default).
    pub allowed_users: Vec<String>,
    /// Explicitly allow everyone who can reach the bot (warned about at start).
    pub allow_all_users: bool,
    /// In rooms (not direct chats), answer only when mentioned.
    pub require_mention: bool,
    /// Room ids (`!abc:example.org`) where every message is answered, mention or not.
    pub free_response_rooms: Vec<String>,
    /// End-to-end encryption: encrypted rooms read and written (the crypto store under
    /// `<data_dir>/matrix/`). Off: invites to encrypted rooms are declined.
    pub encryption: bool,
}

impl Default for MatrixConfig {
    fn default() -> Self {
        MatrixConfig {
            homeserver_url: None,
            user_id: None,
            access_token: None,
            password: None,
            device_name: "Herald".to_string(),
            allowed_users: Vec::new(),
            allow_all_users: false,
            require_mention: true,
            free_response_rooms: Vec::new(),
            encryption: true,
        }
    }
}

/// What is wrong with a section, named by its key (start exits with this text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MatrixConfigError {
    #[error("matrix.user_id must be a Matrix user id like @herald:example.org")]
    UserId,
    #[error("matrix.homeserver_url is not set")]
    NoHomeserver,
    #[error("matrix needs matrix.access_token or matrix.password")]
    NoCredential,
    #[error("matrix.allowed_users: {0:?} is not a Matrix user id like @alice:example.org")]
    AllowedUser(String),
    #[error("matrix.free_response_rooms: {0:?} is not a room id like !abc:example.org")]
    Room(String),
}

impl MatrixConfig {
    /// The checks that need no network; the credentials are tried against the homeserver at
    /// start.
    pub fn check(&self) -> Result<(), MatrixConfigError> {
        let user = self.user_id.as_deref().unwrap_or_default();
        if !is_user_id(user) {
            return Err(MatrixConfigError::UserId);
        }
        if self.homeserver_url.is_none() {
            return Err(MatrixConfigError::NoHomeserver);
        }
        let set = |s: &Option<Secret>| s.as_ref().is_some_and(|s| !s.expose().is_empty());
        if !set(&self.access_token) && !set(&self.password) {
            return Err(MatrixConfigError::NoCredential);
        }
        if let Some(bad) = self.allowed_users.iter().find(|u| !is_user_id(u)) {
            return Err(MatrixConfigError::AllowedUser(bad.clone()));
        }
        if let Some(bad) = self.free_response_rooms.iter().find(|r| !is_room_id(r)) {
            return Err(MatrixConfigError::Room(bad.clone()));
        }
        Ok(())
    }

    /// The bot's user id, once `check` passed.
    pub fn user(&self) -> &str {
        self.user_id.as_deref().unwrap_or_default()
    }
}

/// `@localpart:server`: a sigil, a localpart and a server name.
pub fn is_user_id(id: &str) -> bool {
    sigil_id(id, '@')
}

/// `!opaque:server`: a room id (not an alias).
pub fn is_room_id(id: &str) -> bool {
    sigil_id(id, '!')
}

/// `$opaque` (room version 4 and later) or `$opaque:server`: an event id.
pub fn is_event_id(id: &str) -> bool {
    id.len() > 1
        && id.starts_with('$')
        && !id.contains(char::is_whitespace)
        && id.matches(':').count() <= 1
}

fn sigil_id(id: &str, sigil: char) -> bool {
    let Some(rest) = id.strip_prefix(sigil) else {
        return false;
    };
    let Some((local, server)) = rest.split_once(':') else {
        return false;
    };
    !local.is_empty()
        && !server.is_empty()
        && !id.contains(char::is_whitespace)
        && !local.contains(':')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(json: &str) -> MatrixConfig {
        serde_json::from_str(json).expect("a section")
    }

    #[test]
    fn check_names_the_key_at_fault() {
        use MatrixConfigError as E;
        let base = r#""homeserver_url":"http://127.0.0.1:8008""#;
        let cases = [
            (format!(r#"{{{base},"password":"p"}}"#), Err(E::UserId)),
            (
                format!(r#"{{{base},"user_id":"herald","password":"p"}}"#),
                Err(E::UserId),
            ),
            (
                r#"{"user_id":"@h:hs","password":"p"}"#.to_string(),
                Err(E::NoHomeserver),
            ),
            (
                format!(r#"{{{base},"user_id":"@h:hs","password":""}}"#),
                Err(E::NoCredential),
            ),
            (
                format!(
                    r#"{{{base},"user_id":"@h:hs","access_token":"t","allowed_users":["alice"]}}"#
                ),
                Err(E::AllowedUser("alice".into())),
            ),
            (
                format!(
                    r##"{{{base},"user_id":"@h:hs","access_token":"t","free_response_rooms":["#a:hs"]}}"##
                ),
                Err(E::Room("#a:hs".into())),
            ),
            (
                format!(r#"{{{base},"user_id":"@h:hs","password":"p","allowed_users":["@a:hs"]}}"#),
                Ok(()),
            ),
        ];
        for (json, want) in cases {
            assert_eq!(section(&json).check(), want, "{json}");
        }
        assert!(E::NoCredential.to_string().contains("matrix.password"));
    }

    #[test]
    fn defaults_and_secrets() {
        let c = section(r#"{"user_id":"@h:hs","password":"hunter2","access_token":"syt_x"}"#);
        assert!(c.require_mention);
        assert!(c.encryption);
        assert_eq!(c.device_name, "Herald");
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("syt_x"),
            "{shown}"
        );
    }

    #[test]
    fn id_syntax() {
        for (id, user, room) in [
            ("@alice:example.org", true, false),
            ("@alice:localhost:8448", true, false),
            ("!abc:example.org", false, true),
            ("@:hs", false, false),
            ("@a b:hs", false, false),
            ("alice", false, false),
        ] {
            assert_eq!(is_user_id(id), user, "{id}");
            assert_eq!(is_room_id(id), room, "{id}");
        }
        assert!(is_event_id("$abcDEF_123"));
        assert!(is_event_id("$abc:hs"));
        assert!(!is_event_id("abc"));
    }
}
