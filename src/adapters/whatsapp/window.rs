//! WhatsApp's 24-hour rule: a business may send free-form messages to a person only within 24
//! hours of the person's last message; outside it, only an approved template goes out (Meta
//! refuses anything else with error 131047).
//!
//! The receiver notes when each person last wrote (`kv` `whatsapp:heard:<wa id>`, Unix
//! seconds, written before the inbox so a redelivery rewrites it); each send asks [`Window`]
//! first. Outside the window a row goes out as `whatsapp.brief_template` with its text as the
//! template's one body parameter, or, without a template, fails at once with the reason
//! (`SendError::Permanent`: the outbox row and `herald inbox dead` show it): never a retry
//! loop against a refusal that cannot change.
//!
//! Must not: send a free-form message it knows WhatsApp will refuse.

use std::sync::{Arc, OnceLock};

use serde_json::{json, Value};

use crate::delivery::SendError;
use crate::store::{OutboxRow, Store};

/// The window, in seconds.
pub const WINDOW_SECS: i64 = 24 * 60 * 60;
/// A template's text parameter holds at most this many characters.
const PARAMETER_MAX: usize = 1024;

pub fn heard_key(wa_id: &str) -> String {
    format!("whatsapp:heard:{wa_id}")
}

/// The configured brief template.
#[derive(Debug, Clone)]
pub struct Template {
    pub name: String,
    pub language: String,
}

impl Template {
    /// The message body sending `text` as the template's body parameter.
    pub fn body(&self, text: &str) -> Value {
        let mut param: String = text.chars().take(PARAMETER_MAX).collect();
        if param.chars().count() < text.chars().count() {
            param.pop();
            param.push('…');
        }
        json!({
            "type": "template",
            "template": {
                "name": self.name,
                "language": {"code": self.language},
                "components": [
                    {"type": "body", "parameters": [{"type": "text", "text": param}]}
                ],
            },
        })
    }
}

/// Clones share the store, which is attached when the adapter starts.
#[derive(Clone)]
pub struct Window {
    store: Arc<OnceLock<Arc<dyn Store>>>,
    template: Option<Template>,
}

impl Window {
    pub fn new(template: Option<Template>) -> Window {
        Window {
            store: Arc::new(OnceLock::new()),
            template,
        }
    }

    /// The store the receiver writes "last heard" to (set when the adapter starts).
    pub fn attach(&self, store: Arc<dyn Store>) {
        let _ = self.store.set(store);
    }

    /// `None`: inside the window, send as is. `Some(template)`: outside, send the template.
    /// `Err`: outside and no template, or the store could not say (retried).
    pub async fn outside(&self, row: &OutboxRow) -> Result<Option<&Template>, SendError> {
        let Some(store) = self.store.get() else {
            return Ok(None);
        };
        let heard = store
            .kv_get(&heard_key(&row.chat_id))
            .await
            .map_err(|e| SendError::Transient(format!("whatsapp 24-hour window: {e}")))?
            .and_then(|v| v.parse::<i64>().ok());
        let now = chrono::Utc::now().timestamp();
        if heard.is_some_and(|at| now - at < WINDOW_SECS) {
            return Ok(None);
        }
        match &self.template {
            Some(t) => {
                metrics::counter!("herald_whatsapp_templates_total").increment(1);
                Ok(Some(t))
            }
            None => {
                let since = match heard {
                    Some(at) => format!("last wrote {} hours ago", (now - at) / 3600),
                    None => "has never written".to_string(),
                };
                Err(SendError::Permanent(format!(
                    "not sent: the person {since}, and outside WhatsApp's 24-hour window only an approved template goes out; set whatsapp.brief_template"
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_body_carries_the_brief() {
        let t = Template {
            name: "daily_brief".into(),
            language: "de".into(),
        };
        let body = t.body("Good morning");
        assert_eq!(body["template"]["name"], "daily_brief");
        assert_eq!(body["template"]["language"]["code"], "de");
        assert_eq!(
            body["template"]["components"][0]["parameters"][0]["text"],
            "Good morning"
        );
        let long = "x".repeat(5000);
        let p = t.body(&long)["template"]["components"][0]["parameters"][0]["text"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(p.chars().count(), PARAMETER_MAX);
        assert!(p.ends_with('…'));
    }
}
