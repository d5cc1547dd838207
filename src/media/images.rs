//! Which images of the history the model still sees. An image stays in view for
//! `media.keep_images_turns` of the person's later messages, then its row is replayed with a
//! one-line placeholder instead, so the window does not fill with pixels.
//!
//! The rule reads only the history, so the same history always gives the same request: an
//! image leaves the prompt once, at a known turn, and every byte before it stays as it was.

use std::collections::HashMap;

use crate::llm::{ChatMessage, Part};
use crate::media::reading::is_image;
use crate::store::StoredMessage;

/// Appended to a row whose images are no longer sent.
pub const PLACEHOLDER: &str = "[an image was shown here earlier; it is no longer in view]";

/// The image parts of history rows still in view, by row id. Empty (the default) for a model
/// that does not see images: rows are replayed as their text alone.
#[derive(Debug, Clone, Default)]
pub struct HistoryImages {
    /// The model sees images (placeholders are written only then).
    pub vision: bool,
    pub parts: HashMap<i64, Vec<Part>>,
}

impl HistoryImages {
    /// Gives `msg` (the replay of `row`) its images, or the placeholder when they left view or
    /// could not be fetched again.
    pub fn apply(&self, row: &StoredMessage, msg: &mut ChatMessage) {
        if !self.vision || !row.media.iter().any(is_image) {
            return;
        }
        match self.parts.get(&row.id) {
            Some(parts) => msg.parts = parts.clone(),
            None => {
                let text = msg.content.get_or_insert_with(String::new);
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(PLACEHOLDER);
            }
        }
    }
}

/// Ids of the rows with images that are still in view: fewer than `keep` of the person's
/// requests follow them in `history` (the message being answered counts as one).
pub fn rows_in_view(history: &[StoredMessage], keep: u32) -> Vec<i64> {
    let mut later = 1u32;
    let mut out = Vec::new();
    for row in history.iter().rev() {
        if later > keep {
            break;
        }
        if row.media.iter().any(is_image) {
            out.push(row.id);
        }
        if row.is_person_request() {
            later += 1;
        }
    }
    out.reverse();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Attachment, MediaKind, MediaSource, Role};
    use crate::llm::Blob;
    use crate::store::NewMessage;

    fn row(id: i64, role: Role, photo: bool) -> StoredMessage {
        let mut m = NewMessage::new(role, format!("row {id}"));
        if role == Role::User {
            m.platform_message_id = Some(format!("m{id}"));
        }
        if photo {
            m.media.push(Attachment::new(
                MediaKind::Photo,
                MediaSource::Telegram("f".into()),
            ));
        }
        StoredMessage::committed(id, &"s".into(), &m, 0)
    }

    #[test]
    fn an_image_stays_for_keep_later_messages_then_becomes_a_placeholder() {
        // A photo at row 1, then three exchanges; the message being answered is the fourth.
        let mut history = vec![row(1, Role::User, true), row(2, Role::Assistant, false)];
        assert_eq!(rows_in_view(&history, 3), vec![1]);
        for id in [3, 5] {
            history.push(row(id, Role::User, false));
            history.push(row(id + 1, Role::Assistant, false));
            assert_eq!(rows_in_view(&history, 3), vec![1], "after row {id}");
        }
        history.push(row(7, Role::User, false));
        history.push(row(8, Role::Assistant, false));
        assert!(rows_in_view(&history, 3).is_empty());
        assert!(rows_in_view(&history[..2], 0).is_empty());

        let png = Part::Image(Blob::new("image/png", vec![1], "photo"));
        let mut images = HistoryImages {
            vision: true,
            parts: HashMap::from([(1, vec![png.clone()])]),
        };
        let mut shown = ChatMessage::new(Role::User, "row 1");
        images.apply(&history[0], &mut shown);
        assert_eq!(shown.parts, vec![png]);

        images.parts.clear();
        let mut gone = ChatMessage::new(Role::User, "row 1");
        images.apply(&history[0], &mut gone);
        assert!(gone.parts.is_empty());
        assert_eq!(
            gone.content.as_deref(),
            Some(&*format!("row 1\n{PLACEHOLDER}"))
        );

        // Without vision nothing is added: the row says what the model could not see.
        let mut plain = ChatMessage::new(Role::User, "row 1");
        HistoryImages::default().apply(&history[0], &mut plain);
        assert_eq!(plain, ChatMessage::new(Role::User, "row 1"));
    }
}
