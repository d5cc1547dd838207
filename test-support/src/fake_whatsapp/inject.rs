//! A person writing to the business number: each call puts one message on Meta's side and
//! delivers its webhook (`contacts` with the person's profile name, `messages` with one
//! message), and returns the message's `wamid`. Sending opens the person's 24-hour window.

use serde_json::{json, Value};

use super::state::Media;
use super::{webhooks, FakeWhatsApp};

impl FakeWhatsApp {
    /// Delivers one message of `from` (`message` holds its `type` and type object).
    pub fn send_message(&self, from: &str, mut message: Value) -> String {
        let (wamid, now) = {
            let mut st = self.shared.lock();
            let now = chrono::Utc::now().timestamp();
            st.last_inbound.insert(from.to_string(), now);
            (st.new_wamid(), now)
        };
        message["from"] = json!(from);
        message["id"] = json!(wamid);
        message["timestamp"] = json!(now.to_string());
        let name = self.profile_name(from);
        let value = json!({
            "contacts": [{"profile": {"name": name}, "wa_id": from}],
            "messages": [message],
        });
        let body = webhooks::envelope(&self.shared, value);
        webhooks::deliver(&self.shared, body, vec![wamid.clone()]);
        wamid
    }

    /// A text message.
    pub fn text(&self, from: &str, body: &str) -> String {
        self.send_message(from, json!({"type": "text", "text": {"body": body}}))
    }

    /// A photo with a caption.
    pub fn image(&self, from: &str, bytes: &[u8], mime: &str, caption: &str) -> String {
        let id = self.put_media(mime, None, bytes);
        let sha = super::messages::sha256_hex(bytes);
        self.send_message(
            from,
            json!({"type": "image", "image": {"caption": caption, "mime_type": mime, "sha256": sha, "id": id}}),
        )
    }

    /// A document with its file name.
    pub fn document(&self, from: &str, name: &str, mime: &str, bytes: &[u8]) -> String {
        let id = self.put_media(mime, Some(name), bytes);
        let sha = super::messages::sha256_hex(bytes);
        self.send_message(
            from,
            json!({"type": "document", "document": {"filename": name, "mime_type": mime, "sha256": sha, "id": id}}),
        )
    }

    /// A voice note.
    pub fn voice(&self, from: &str, bytes: &[u8]) -> String {
        let mime = "audio/ogg; codecs=opus";
        let id = self.put_media(mime, None, bytes);
        let sha = super::messages::sha256_hex(bytes);
        self.send_message(
            from,
            json!({"type": "audio", "audio": {"mime_type": mime, "sha256": sha, "id": id, "voice": true}}),
        )
    }

    /// A shared location.
    pub fn location(&self, from: &str, lat: f64, lon: f64, name: &str) -> String {
        self.send_message(
            from,
            json!({"type": "location", "location": {"latitude": lat, "longitude": lon, "name": name}}),
        )
    }

    /// A tap on reply button `button_id` of the bot's message `question` (the tap quotes it).
    pub fn tap(&self, from: &str, question: &str, button_id: &str, title: &str) -> String {
        let business = self
            .config()
            .display_phone_number
            .trim_start_matches('+')
            .replace(' ', "");
        self.send_message(
            from,
            json!({
                "type": "interactive",
                "context": {"from": business, "id": question},
                "interactive": {"type": "button_reply", "button_reply": {"id": button_id, "title": title}},
            }),
        )
    }

    /// A message of a type the Cloud API does not support (`unsupported`, error 131051).
    pub fn unsupported(&self, from: &str) -> String {
        self.send_message(
            from,
            json!({"type": "unsupported", "errors": [{
                "code": 131051, "title": "Message type unknown",
                "message": "Message type unknown", "error_data": {"details": "Message type is currently not supported."},
            }]}),
        )
    }

    fn put_media(&self, mime: &str, name: Option<&str>, bytes: &[u8]) -> String {
        let mut st = self.shared.lock();
        let id = st.new_media_id();
        st.media.insert(
            id.clone(),
            Media {
                id: id.clone(),
                mime: mime.to_string(),
                name: name.map(str::to_string),
                bytes: bytes.to_vec(),
                uploaded: false,
            },
        );
        id
    }

    fn profile_name(&self, wa_id: &str) -> String {
        self.shared
            .lock()
            .names
            .get(wa_id)
            .cloned()
            .unwrap_or_else(|| format!("Person {wa_id}"))
    }
}
