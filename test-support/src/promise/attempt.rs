//! What the chat-platform ways in (Telegram, Discord, Slack) do alike: remember the platform's
//! ids of the message pushed for each client id, give a daemon the settings every promise run
//! wants, and make one delivery attempt by watching the fake's records for the reply. Each
//! platform keeps its own ids, pushes and record reading in its file.

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::load::{Answer, UNRESOLVED};

/// How long one delivery attempt waits for the reply before the client looks again.
const ATTEMPT_WAIT: Duration = Duration::from_secs(2);

/// Client id → the platform's ids of the message pushed for it, each given out once.
#[derive(Clone, Default)]
pub struct Pushed<V>(Arc<Mutex<HashMap<String, V>>>);

impl<V: Clone> Pushed<V> {
    /// The map itself, for a push that must stay ordered with its entry.
    pub fn lock(&self) -> MutexGuard<'_, HashMap<String, V>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The ids of every message pushed so far.
    pub fn all(&self) -> Vec<V> {
        self.lock().values().cloned().collect()
    }

    /// The id the store dedupes `client_id`'s message on, `show`n from its platform ids; the
    /// client id itself while nothing was pushed for it.
    pub fn platform_id(&self, client_id: &str, show: impl FnOnce(&V) -> String) -> String {
        match self.lock().get(client_id) {
            Some(ids) => show(ids),
            None => client_id.to_string(),
        }
    }
}

/// A daemon's settings for a platform fake: the platform's own `settings`, then what every
/// promise run wants (no pairing; unstreamed, as the receipts count one send per answer).
pub fn daemon_env(settings: Vec<(&str, String)>) -> Vec<(String, String)> {
    let common = [
        ("HERALD_PAIRING__ENABLED", "false".to_string()),
        ("HERALD_STREAMING__ENABLED", "false".to_string()),
    ];
    settings
        .into_iter()
        .chain(common)
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

/// One delivery attempt's wait: polls `reply` (the text of the fake's recorded answer, if
/// any) until it is there or the attempt gives up with "no reply yet to `what`".
pub async fn await_reply(
    what: impl Display,
    mut reply: impl FnMut() -> Option<String>,
) -> Result<Answer, String> {
    let deadline = tokio::time::Instant::now() + ATTEMPT_WAIT;
    loop {
        if let Some(reply) = reply() {
            return Ok(Answer {
                inbox_id: UNRESOLVED,
                status: String::new(),
                reply,
            });
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("no reply yet to {what}"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
