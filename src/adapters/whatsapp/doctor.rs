//! `herald doctor`'s WhatsApp checks: the section reads, and the access token can read the
//! phone number id (`GET /{phone-number-id}?fields=display_phone_number,verified_name`). Each
//! result names the key at fault, so the operator knows what to replace.
//!
//! Must not: print the token, the app secret or the verify token.

use serde_json::Value;

use super::api::{code, GraphApi};
use super::config::WhatsAppConfig;

/// One line of the doctor's report: what was checked, and what it found.
pub type Check = (&'static str, Result<String, String>);

pub async fn doctor(config: &WhatsAppConfig) -> Vec<Check> {
    if let Err(e) = config.check() {
        return vec![("whatsapp config", Err(e.to_string()))];
    }
    let api = match GraphApi::new(config.api_url.as_str(), config.token()) {
        Ok(api) => api,
        Err(e) => return vec![("whatsapp.api_url", Err(e.to_string()))],
    };
    let answer = api
        .get(config.phone(), Some("display_phone_number,verified_name"))
        .await;
    match answer {
        Ok(v) => {
            let field = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
            vec![
                (
                    "whatsapp.access_token",
                    Ok("accepted by the Graph API".into()),
                ),
                (
                    "whatsapp.phone_number_id",
                    Ok(format!(
                        "{} ({})",
                        field("display_phone_number"),
                        field("verified_name")
                    )),
                ),
            ]
        }
        Err(e) if e.is_auth() => vec![(
            "whatsapp.access_token",
            Err(format!(
                "refused: {e}; make a new system user token with whatsapp_business_messaging"
            )),
        )],
        Err(e) if e.code() == Some(code::INVALID_PARAMETER) => vec![
            (
                "whatsapp.access_token",
                Ok("accepted by the Graph API".into()),
            ),
            (
                "whatsapp.phone_number_id",
                Err(format!("not a phone number this token can use: {e}")),
            ),
        ],
        Err(e) => vec![(
            "whatsapp",
            Err(format!("the Graph API did not answer: {e}")),
        )],
    }
}
