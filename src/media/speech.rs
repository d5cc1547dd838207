//! Text to speech for spoken replies: `POST <voice.tts_url>/audio/speech` with the
//! OpenAI-compatible body (`model`, `input`, `voice`, `response_format = "opus"`), answered
//! with Ogg/Opus bytes, which Telegram takes as a voice message without transcoding.
//!
//! Every failure — refused, timed out, not audio — is one `MediaError::Speech` sentence; the
//! caller falls back to the text alone. Must not: put the key into an error or a log line.

use std::time::Duration;

use serde_json::json;

use super::MediaError;
use crate::config::{Config, Secret};

/// How much of an error answer is quoted.
const EXCERPT_CHARS: usize = 200;

/// A speech API client for one model and voice.
pub struct Speaker {
    http: reqwest::Client,
    url: String,
    api_key: Option<Secret>,
    model: String,
    voice: String,
    max_chars: usize,
}

impl Speaker {
    /// `None` when `voice.tts_url` is unset (no spoken replies).
    pub fn from_config(config: &Config) -> Option<Speaker> {
        let v = &config.voice;
        let base = v.tts_url.as_ref()?;
        let timeout = Duration::from_secs(v.timeout_secs);
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .build()
            .ok()?;
        Some(Speaker {
            http,
            url: format!("{}/audio/speech", base.as_str().trim_end_matches('/')),
            api_key: v.api_key.clone().or_else(|| config.llm.api_key.clone()),
            model: v.tts_model.clone(),
            voice: v.voice.clone(),
            max_chars: v.max_chars,
        })
    }

    /// The model speech is priced under (`[[budget.prices]]`).
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The part of `text` that is spoken: all of it up to `voice.max_chars`, else up to the
    /// last sentence end (or space) before the cap.
    pub fn spoken<'a>(&self, text: &'a str) -> &'a str {
        spoken_part(text, self.max_chars)
    }

    /// `input` spoken as Ogg/Opus bytes.
    pub async fn speak(&self, input: &str) -> Result<Vec<u8>, MediaError> {
        let body = json!({
            "model": self.model,
            "input": input,
            "voice": self.voice,
            "response_format": "opus",
        });
        let mut req = self.http.post(&self.url).json(&body);
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key.expose());
        }
        let fail = |why: String| MediaError::Speech(why);
        let response = req.send().await.map_err(|e| {
            fail(if e.is_timeout() {
                "it did not answer in time".into()
            } else {
                e.without_url().to_string()
            })
        })?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| {
            fail(if e.is_timeout() {
                "it did not answer in time".into()
            } else {
                e.without_url().to_string()
            })
        })?;
        if !status.is_success() {
            let mut excerpt: String = String::from_utf8_lossy(&bytes)
                .chars()
                .take(EXCERPT_CHARS)
                .collect();
            if let Some(key) = &self.api_key {
                excerpt = excerpt.replace(key.expose(), "***");
            }
            return Err(fail(format!(
                "HTTP {}: {}",
                status.as_u16(),
                excerpt.trim()
            )));
        }
        if !bytes.starts_with(b"OggS") {
            return Err(fail("the answer is not Ogg audio".into()));
        }
        Ok(bytes.to_vec())
    }
}

fn spoken_part(text: &str, max_chars: usize) -> &str {
    let Some((cut, _)) = text.char_indices().nth(max_chars) else {
        return text;
    };
    let head = &text[..cut];
    let sentence = head
        .rfind(['.', '!', '?', '\n'])
        .map(|i| i + 1)
        .filter(|&i| i > cut / 2);
    let end = sentence.or_else(|| head.rfind(' ')).unwrap_or(cut);
    head[..end].trim_end()
}

#[cfg(test)]
mod tests {
    use super::spoken_part;

    #[test]
    fn a_long_reply_is_spoken_up_to_a_sentence_end_before_the_cap() {
        assert_eq!(spoken_part("Short.", 100), "Short.");
        let text = "The ferry leaves at noon. It returns at six in the evening today.";
        assert_eq!(spoken_part(text, 40), "The ferry leaves at noon.");
        assert_eq!(spoken_part("one two three four", 10), "one two");
        assert_eq!(spoken_part("ééééé", 3), "ééé");
    }
}
