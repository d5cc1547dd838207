//! The session id: the name of one session inside a lane.
//!
//! Sessions rotate inside a lane (a reset, a cron fire, a handoff); every transcript row,
//! turn, context row and capsule names the session it belongs to. A newtype keeps a session id
//! from being passed where a lane key, a holder or a message text is expected. The store makes
//! new ids (a random read has no place here) and binds this type as text on both backends.

use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Serialize};

/// The id of one session, as the store made it. It reads as text (`Deref<Target = str>`),
/// so formatting and text helpers take it as they took the `String`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SessionId(String);

impl SessionId {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

/// An id read back from the store or named by an operator (`herald sessions show <id>`).
impl From<String> for SessionId {
    fn from(s: String) -> SessionId {
        SessionId(s)
    }
}

impl From<&str> for SessionId {
    fn from(s: &str) -> SessionId {
        SessionId(s.to_string())
    }
}

impl From<&String> for SessionId {
    fn from(s: &String) -> SessionId {
        SessionId(s.clone())
    }
}

impl From<SessionId> for String {
    fn from(id: SessionId) -> String {
        id.0
    }
}

impl Deref for SessionId {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for SessionId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Rows compare with the id's text (`row.session_id == "s-1"`).
impl PartialEq<&str> for SessionId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<str> for SessionId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<String> for SessionId {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

impl PartialEq<SessionId> for String {
    fn eq(&self, other: &SessionId) -> bool {
        *self == other.0
    }
}

impl PartialEq<SessionId> for &str {
    fn eq(&self, other: &SessionId) -> bool {
        *self == other.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_serialises_as_its_text() {
        let id = SessionId::from("0b9e-s1");
        assert_eq!(id.to_string(), "0b9e-s1");
        assert_eq!(id.len(), 7);
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"0b9e-s1\"");
        let back: SessionId = serde_json::from_str("\"0b9e-s1\"").unwrap();
        assert_eq!(back, id);
        assert!(id == "0b9e-s1");
    }
}
