//! The `[whatsapp]` section: owned by the adapter, read from the config's unknown tables (and
//! `HERALD_WHATSAPP__…` environment variables, which land in the same table).
//!
//! Must not: print the access token, the app secret or the verify token (they are `Secret`s),
//! or accept an allowlist entry that is not an E.164 number (`+` and 7 to 15 digits): a typo
//! there would silently lock a person out.

use serde::{Deserialize, Serialize};

use crate::config::{ConfigUrl, Secret};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WhatsAppConfig {
    /// A system user's access token with `whatsapp_business_messaging`. The adapter runs when
    /// it is set.
    pub access_token: Option<Secret>,
    /// The id of the business phone number Herald sends from (not the number itself). Digits;
    /// an environment variable's digits read as a number, taken as the same text.
    #[serde(deserialize_with = "digits")]
    pub phone_number_id: Option<String>,
    /// The Meta app's secret: every webhook POST is checked against `X-Hub-Signature-256`.
    pub app_secret: Option<Secret>,
    /// The token Meta echoes when the webhook is verified (`hub.verify_token`).
    pub verify_token: Option<Secret>,
    /// The Graph API base, with its version.
    pub api_url: ConfigUrl,
    /// Where Meta POSTs the webhook on the daemon's listener.
    pub webhook_path: String,
    /// E.164 numbers (`+4915…`) allowed to talk to the agent (deny by default).
    pub allowed_users: Vec<String>,
    /// Explicitly allow every number that writes (warned about at start).
    pub allow_all_users: bool,
    /// An approved template (one body parameter) for briefs to a person outside the 24-hour
    /// window; unset: such a brief fails at once with the reason.
    pub brief_template: Option<String>,
    /// The template's language code.
    pub template_language: String,
    /// Pace sends within Meta's published limits. Off only against a local fake (benchmarks).
    pub pacing: bool,
}

impl Default for WhatsAppConfig {
    fn default() -> Self {
        WhatsAppConfig {
            access_token: None,
            phone_number_id: None,
            app_secret: None,
            verify_token: None,
            api_url: ConfigUrl::parse("https://graph.facebook.com/v21.0").expect("a URL"),
            webhook_path: "/whatsapp/webhook".into(),
            allowed_users: Vec::new(),
            allow_all_users: false,
            brief_template: None,
            template_language: "en_US".into(),
            pacing: true,
        }
    }
}

/// What is wrong with a section, named by its key (start exits with this text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WhatsAppConfigError {
    #[error("whatsapp.access_token is not set")]
    NoToken,
    #[error(
        "whatsapp.phone_number_id is not set (the number's id from the WhatsApp Manager, digits)"
    )]
    NoPhoneNumberId,
    #[error("whatsapp.app_secret is not set: webhooks cannot be checked without it")]
    NoAppSecret,
    #[error("whatsapp.verify_token is not set: Meta cannot verify the webhook without it")]
    NoVerifyToken,
    #[error("whatsapp.webhook_path must start with '/'")]
    WebhookPath,
    #[error("whatsapp.allowed_users: {0:?} is not an E.164 number like +4915112345678")]
    NotE164(String),
}

impl WhatsAppConfig {
    /// The checks that need no network; the token is tried against the Graph API at start.
    pub fn check(&self) -> Result<(), WhatsAppConfigError> {
        let set = |s: &Option<Secret>| s.as_ref().is_some_and(|t| !t.expose().is_empty());
        if !set(&self.access_token) {
            return Err(WhatsAppConfigError::NoToken);
        }
        let phone_ok = self
            .phone_number_id
            .as_deref()
            .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        if !phone_ok {
            return Err(WhatsAppConfigError::NoPhoneNumberId);
        }
        if !set(&self.app_secret) {
            return Err(WhatsAppConfigError::NoAppSecret);
        }
        if !set(&self.verify_token) {
            return Err(WhatsAppConfigError::NoVerifyToken);
        }
        if !self.webhook_path.starts_with('/') {
            return Err(WhatsAppConfigError::WebhookPath);
        }
        if let Some(bad) = self.allowed_users.iter().find(|u| wa_id(u).is_none()) {
            return Err(WhatsAppConfigError::NotE164(bad.clone()));
        }
        Ok(())
    }

    pub fn token(&self) -> &str {
        self.access_token.as_ref().map_or("", Secret::expose)
    }

    pub fn phone(&self) -> &str {
        self.phone_number_id.as_deref().unwrap_or("")
    }

    /// The allowlist as WhatsApp ids (the E.164 digits without `+`), as senders arrive.
    pub fn allowed_ids(&self) -> Vec<String> {
        self.allowed_users.iter().filter_map(|u| wa_id(u)).collect()
    }
}

/// An id that may come as a string or as the number an environment variable's digits parse to.
fn digits<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Id {
        Text(String),
        Number(u64),
    }
    Ok(Option::<Id>::deserialize(d)?.map(|id| match id {
        Id::Text(s) => s,
        Id::Number(n) => n.to_string(),
    }))
}

/// `+4915112345678` → `4915112345678`: WhatsApp's id of a number (its `wa_id`). Spaces and
/// dashes an operator copies from a contact card are dropped; anything else is not a number.
pub fn wa_id(e164: &str) -> Option<String> {
    let rest = e164.trim().strip_prefix('+')?;
    let digits: String = rest.chars().filter(|c| !matches!(c, ' ' | '-')).collect();
    let ok = (7..=15).contains(&digits.len())
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !digits.starts_with('0');
    ok.then_some(digits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> WhatsAppConfig {
        WhatsAppConfig {
            access_token: Some(Secret::new("EAAG-token")),
            phone_number_id: Some("106540352242922".into()),
            app_secret: Some(Secret::new("app-secret")),
            verify_token: Some(Secret::new("verify-me")),
            allowed_users: vec!["+4915112345678".into()],
            ..WhatsAppConfig::default()
        }
    }

    #[test]
    fn check_names_the_key_at_fault() {
        use WhatsAppConfigError as E;
        assert_eq!(full().check(), Ok(()));
        type Case = (fn(&mut WhatsAppConfig), E);
        let cases: [Case; 6] = [
            (|c| c.access_token = None, E::NoToken),
            (
                |c| c.phone_number_id = Some("+49".into()),
                E::NoPhoneNumberId,
            ),
            (|c| c.app_secret = Some(Secret::new("")), E::NoAppSecret),
            (|c| c.verify_token = None, E::NoVerifyToken),
            (|c| c.webhook_path = "hook".into(), E::WebhookPath),
            (
                |c| c.allowed_users = vec!["015112345678".into()],
                E::NotE164("015112345678".into()),
            ),
        ];
        for (change, want) in cases {
            let mut c = full();
            change(&mut c);
            assert_eq!(c.check(), Err(want));
        }
        assert!(!format!("{:?}", full()).contains("EAAG-token"));
    }

    #[test]
    fn e164_table() {
        for (input, want) in [
            ("+4915112345678", Some("4915112345678")),
            (" +49 151-1234 5678 ", Some("4915112345678")),
            ("4915112345678", None),
            ("+0151", None),
            ("+12", None),
            ("+49151abc", None),
            ("+1234567890123456", None),
        ] {
            assert_eq!(wa_id(input).as_deref(), want, "{input:?}");
        }
    }

    #[test]
    fn defaults() {
        let c: WhatsAppConfig = serde_json::from_str(r#"{"access_token":"t"}"#).unwrap();
        assert_eq!(c.phone_number_id, None);
        let n: WhatsAppConfig =
            serde_json::from_str(r#"{"phone_number_id":106540352242922}"#).unwrap();
        assert_eq!(n.phone_number_id.as_deref(), Some("106540352242922"));
        assert_eq!(c.webhook_path, "/whatsapp/webhook");
        assert_eq!(
            c.api_url.as_str().trim_end_matches('/'),
            "https://graph.facebook.com/v21.0"
        );
        assert_eq!(c.template_language, "en_US");
        assert!(c.pacing);
    }
}
