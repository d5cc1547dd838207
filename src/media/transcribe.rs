//! Voice notes and audio files to text, through an OpenAI-compatible speech-to-text endpoint
//! (`POST <base>/audio/transcriptions`, multipart, answer `{"text": ...}`): OpenAI's Whisper,
//! a local whisper.cpp server, vLLM, a LiteLLM proxy.
//!
//! The endpoint is `[media] transcription_url`, else the model's resolved `base_url`, with the
//! model's key (resolved once by `config::load`, `OPENAI_*` included). Every failure becomes a
//! `MediaError::Transcription` that says what went wrong in words a person can read; the key
//! never appears in one (the answer's excerpt is cut free of it and of any bearer credential).

use std::time::Duration;

use reqwest::multipart::{Form, Part};
use serde::Deserialize;

use super::MediaError;
use crate::config::{Config, Secret};

/// How much of an endpoint's answer an error quotes.
const EXCERPT_CHARS: usize = 200;

/// A speech-to-text client for one endpoint and model.
pub struct Transcriber {
    http: reqwest::Client,
    url: String,
    api_key: Option<Secret>,
    model: String,
    timeout: Duration,
}

/// How one call ended, for the metric.
#[derive(Clone, Copy)]
enum Outcome {
    Ok,
    Timeout,
    Rejected,
    Failed,
    BadResponse,
}

impl Outcome {
    fn label(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Timeout => "timeout",
            Outcome::Rejected => "rejected",
            Outcome::Failed => "failed",
            Outcome::BadResponse => "bad_response",
        }
    }
}

#[derive(Deserialize)]
struct Answer {
    text: String,
}

impl Transcriber {
    /// `media.transcription_url`, else the main model's resolved base_url; the key is the main
    /// model's key; the deadline is `llm.timeout_secs`. None when there is no URL at all.
    pub fn from_config(config: &Config) -> Option<Transcriber> {
        let base = config
            .media
            .transcription_url
            .as_ref()
            .or(config.llm.base_url.as_ref())?;
        let built = Transcriber::new(
            base.as_str(),
            config.llm.api_key.clone(),
            &config.media.transcription_model,
            Duration::from_secs(config.llm.timeout_secs),
        );
        match built {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!(error = %e, "speech-to-text client not built; voice notes stay unread");
                None
            }
        }
    }

    /// A client for `<base_url>/audio/transcriptions`.
    pub fn new(
        base_url: &str,
        api_key: Option<Secret>,
        model: &str,
        timeout: Duration,
    ) -> Result<Transcriber, MediaError> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| MediaError::Transcription(format!("cannot build HTTP client: {e}")))?;
        Ok(Transcriber {
            http,
            url: format!("{}/audio/transcriptions", base_url.trim_end_matches('/')),
            api_key: api_key.filter(|k| !k.expose().is_empty()),
            model: model.to_string(),
            timeout,
        })
    }

    /// The speech in `bytes` as text (trimmed; empty when the endpoint heard nothing).
    pub async fn transcribe(
        &self,
        bytes: &[u8],
        mime: &str,
        file_name: &str,
    ) -> Result<String, MediaError> {
        let (outcome, result) = match self.call(bytes, mime, file_name).await {
            Ok(text) => (Outcome::Ok, Ok(text)),
            Err((outcome, message)) => (outcome, Err(MediaError::Transcription(message))),
        };
        metrics::counter!("herald_media_transcriptions_total", "outcome" => outcome.label())
            .increment(1);
        result
    }

    async fn call(
        &self,
        bytes: &[u8],
        mime: &str,
        file_name: &str,
    ) -> Result<String, (Outcome, String)> {
        let file = Part::bytes(bytes.to_vec()).file_name(file_name.to_string());
        let file = match file.mime_str(mime) {
            Ok(part) => part,
            Err(_) => Part::bytes(bytes.to_vec())
                .file_name(file_name.to_string())
                .mime_str("application/octet-stream")
                .map_err(|e| (Outcome::Failed, e.to_string()))?,
        };
        let form = Form::new()
            .part("file", file)
            .text("model", self.model.clone())
            .text("response_format", "json");
        let mut request = self.http.post(&self.url).multipart(form);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key.expose());
        }
        let response = request.send().await.map_err(|e| self.transport(e))?;
        let status = response.status();
        let body = response.text().await.map_err(|e| self.transport(e))?;
        let body = self.redacted(body);
        if status.is_client_error() && status.as_u16() != 408 && status.as_u16() != 429 {
            return Err((
                Outcome::Rejected,
                format!("it rejected the audio (HTTP {status}): {}", excerpt(&body)),
            ));
        }
        if !status.is_success() {
            return Err((
                Outcome::Failed,
                format!("it answered HTTP {status}: {}", excerpt(&body)),
            ));
        }
        match serde_json::from_str::<Answer>(&body) {
            Ok(answer) => Ok(answer.text.trim().to_string()),
            Err(_) => Err((
                Outcome::BadResponse,
                format!("its answer is not a transcript: {}", excerpt(&body)),
            )),
        }
    }

    /// A transport failure in words, without the URL (it may carry credentials) or the key.
    fn transport(&self, e: reqwest::Error) -> (Outcome, String) {
        if e.is_timeout() {
            return (
                Outcome::Timeout,
                format!("it did not answer within {} s", self.timeout.as_secs_f32()),
            );
        }
        let e = e.without_url();
        let mut message = e.to_string();
        let mut cause = std::error::Error::source(&e);
        while let Some(c) = cause {
            message = format!("{message}: {c}");
            cause = c.source();
        }
        (
            Outcome::Failed,
            self.redacted(format!("cannot reach it: {message}")),
        )
    }

    /// The answer with the key cut out (an endpoint may quote it back in an error).
    fn redacted(&self, text: String) -> String {
        match &self.api_key {
            Some(key) if text.contains(key.expose()) => text.replace(key.expose(), "***"),
            _ => text,
        }
    }
}

/// The start of an answer for an error, with bearer credentials and API keys masked.
fn excerpt(body: &str) -> String {
    static CREDENTIAL: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?i)(bearer\s+|api[_-]?key[\s\x22':=]+)[A-Za-z0-9._~+/=-]{6,}")
            .expect("static regex")
    });
    let head: String = body.trim().chars().take(EXCERPT_CHARS).collect();
    let head = CREDENTIAL.replace_all(&head, "${1}***").into_owned();
    if head.is_empty() {
        "(empty answer)".into()
    } else {
        head
    }
}
