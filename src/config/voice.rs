//! The `[voice]` section: spoken replies. Herald posts a reply's text to an OpenAI-compatible
//! speech API (`<tts_url>/audio/speech`, Ogg/Opus) and sends the audio beside the text, on
//! the platforms whose capabilities allow files. Off until `tts_url` is set.

use serde::{Deserialize, Serialize};

use super::{ConfigUrl, Secret};

/// When a reply is also spoken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplyWithVoice {
    /// When the person's message was a voice note (or `/voice on` in that conversation).
    #[default]
    WhenVoiceIn,
    /// Every reply to a person (unless `/voice off` in that conversation).
    Always,
    /// Never.
    Never,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VoiceConfig {
    /// Base URL of an OpenAI-compatible speech API (`https://api.openai.com/v1`, a local
    /// Kokoro or Piper bridge); unset: no spoken replies.
    pub tts_url: Option<ConfigUrl>,
    /// Its key; unset: the main model's key (as speech-to-text does).
    pub api_key: Option<Secret>,
    pub tts_model: String,
    pub voice: String,
    pub reply_with_voice: ReplyWithVoice,
    /// Characters spoken at most; a longer reply is spoken up to a sentence end before this,
    /// and its whole text is sent as well.
    pub max_chars: usize,
    /// The speech API must answer within this many seconds, else the reply goes as text only.
    pub timeout_secs: u64,
}

impl Default for VoiceConfig {
    fn default() -> Self {
        VoiceConfig {
            tts_url: None,
            api_key: None,
            tts_model: "tts-1".into(),
            voice: "alloy".into(),
            reply_with_voice: ReplyWithVoice::WhenVoiceIn,
            max_chars: 1000,
            timeout_secs: 30,
        }
    }
}

impl VoiceConfig {
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if let Some(url) = &self.tts_url {
            if !matches!(url.url().scheme(), "http" | "https") {
                return Err(("voice.tts_url", "must be an http(s) URL".into()));
            }
        }
        if self.tts_model.trim().is_empty() {
            return Err(("voice.tts_model", "must not be empty".into()));
        }
        if self.voice.trim().is_empty() {
            return Err(("voice.voice", "must not be empty".into()));
        }
        if !(1..=4096).contains(&self.max_chars) {
            return Err(("voice.max_chars", "must be between 1 and 4096".into()));
        }
        if self.timeout_secs == 0 {
            return Err(("voice.timeout_secs", "must be more than 0".into()));
        }
        Ok(())
    }
}
