//! The parts of a message beyond its text: images (and audio, where a provider takes it).
//!
//! A [`ChatMessage`](super::ChatMessage) is its text followed by these parts, in order. Each
//! provider maps the list to its own wire shape (OpenAI: `image_url` data URLs; Anthropic:
//! image blocks) and a provider that cannot take a part sends its [`Part::placeholder`]
//! instead, so a request never fails for carrying media. The bytes live here only for the
//! length of a turn: the store keeps the [`Attachment`](crate::domain::Attachment) reference.

use std::sync::Arc;

use base64::Engine;

/// Bytes of one file with their MIME type. Cheap to clone (the request is cloned per model
/// call).
#[derive(Clone, PartialEq, Eq)]
pub struct Blob {
    pub mime: String,
    pub data: Arc<[u8]>,
    /// How the part is named when it is left out ("photo", "image from read_screen").
    pub label: String,
}

impl std::fmt::Debug for Blob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Blob({}, {} bytes, {:?})",
            self.mime,
            self.data.len(),
            self.label
        )
    }
}

impl Blob {
    pub fn new(
        mime: impl Into<String>,
        data: impl Into<Arc<[u8]>>,
        label: impl Into<String>,
    ) -> Blob {
        Blob {
            mime: mime.into(),
            data: data.into(),
            label: label.into(),
        }
    }

    pub fn base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.data)
    }

    /// `data:<mime>;base64,<bytes>`.
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.mime, self.base64())
    }
}

/// One non-text part of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Image(Blob),
    Audio(Blob),
}

/// What one image costs in the context estimate (providers bill a large image at roughly a
/// thousand tokens or more; the estimate errs high so the budget is not overrun).
pub const IMAGE_TOKENS: usize = 1_600;

impl Part {
    /// The text a provider sends in place of a part it cannot take.
    pub fn placeholder(&self) -> String {
        match self {
            Part::Image(b) => format!("[{}: an image this model cannot see]", b.label),
            Part::Audio(b) => format!("[{}: audio this model cannot hear]", b.label),
        }
    }

    /// Estimated prompt tokens of the part.
    pub fn tokens(&self) -> usize {
        match self {
            Part::Image(_) => IMAGE_TOKENS,
            // Providers that take audio bill about 10 tokens per second; a byte-rate guess.
            Part::Audio(b) => b.data.len() / 1_600 + 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_url_and_placeholder() {
        let b = Blob::new("image/png", vec![0x89, b'P', b'N', b'G'], "photo");
        assert_eq!(b.data_url(), "data:image/png;base64,iVBORw==");
        assert_eq!(
            Part::Image(b.clone()).placeholder(),
            "[photo: an image this model cannot see]"
        );
        assert_eq!(format!("{b:?}"), "Blob(image/png, 4 bytes, \"photo\")");
    }
}
