//! Envelopes as Meta sends them (shapes from the Cloud API's webhook reference) → items.

use serde_json::{json, Value};

use super::inbound::{items, Item};
use crate::domain::{MediaKind, MediaSource, MessageKind};

const API: &str = "https://graph.facebook.com/v21.0";

fn envelope(value: Value) -> Value {
    json!({"object": "whatsapp_business_account", "entry": [{"id": "102290129340398",
        "changes": [{"field": "messages", "value": value}]}]})
}

fn one(message: Value) -> Item {
    let value = json!({
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "15550001111", "phone_number_id": "106540352242922"},
        "contacts": [{"profile": {"name": "Ana"}, "wa_id": "4915112345678"}],
        "messages": [message],
    });
    let mut got = items(&envelope(value), API).expect("an envelope");
    assert_eq!(got.len(), 1, "{got:?}");
    got.remove(0)
}

fn base(kind: &str, body: Value) -> Value {
    let mut m =
        json!({"from": "4915112345678", "id": "wamid.A1", "timestamp": "1700000000", "type": kind});
    m[kind] = body;
    m
}

#[test]
fn a_text_is_an_event_in_the_persons_lane() {
    let Item::Ingest(ev) = one(base("text", json!({"body": "hello"}))) else {
        panic!("an event")
    };
    assert_eq!(ev.lane().as_str(), "whatsapp:4915112345678");
    assert_eq!(ev.sender_id, "4915112345678");
    assert_eq!(ev.sender_name, "Ana");
    assert_eq!(ev.platform_message_id, "wamid.A1");
    assert_eq!(ev.text, "hello");
    assert_eq!(ev.timestamp.timestamp(), 1_700_000_000);
    assert_eq!(ev.kind(), Some(MessageKind::Text));
}

#[test]
fn media_is_fetched_later_by_its_id() {
    let image = json!({"caption": "what is this?", "mime_type": "image/jpeg", "sha256": "x", "id": "1479537139650973"});
    let Item::Ingest(ev) = one(base("image", image)) else {
        panic!("an event")
    };
    assert_eq!(ev.text, "what is this?");
    let a = &ev.attachments[0];
    assert_eq!(a.kind, MediaKind::Photo);
    assert_eq!(
        a.source,
        MediaSource::Authorized {
            platform: super::WHATSAPP,
            url: format!("{API}/1479537139650973"),
        }
    );
    let voice =
        json!({"mime_type": "audio/ogg; codecs=opus", "sha256": "x", "id": "42", "voice": true});
    let Item::Ingest(ev) = one(base("audio", voice)) else {
        panic!("an event")
    };
    assert_eq!(ev.attachments[0].kind, MediaKind::Voice);
    assert_eq!(ev.kind(), Some(MessageKind::Media));
    // An id that could reach another path of the API is not a media id.
    let odd = json!({"mime_type": "application/pdf", "id": "../me?fields=x"});
    let Item::Ingest(ev) = one(base("document", odd)) else {
        panic!("an event")
    };
    assert!(ev.attachments.is_empty());
    assert_eq!(ev.text, "[a document that could not be fetched]");
}

#[test]
fn taps_locations_and_unknown_types() {
    let tap = json!({"from": "4915112345678", "id": "wamid.T1", "timestamp": "1700000000",
        "type": "interactive", "context": {"from": "15550001111", "id": "wamid.Q1"},
        "interactive": {"type": "button_reply", "button_reply": {"id": "ap:abc123:y", "title": "Approve"}}});
    let Item::Press { press, wamid } = one(tap) else {
        panic!("a press")
    };
    assert_eq!(
        (press.approval_id.as_str(), press.approve),
        ("abc123", true)
    );
    assert_eq!(press.chat_id, "4915112345678");
    assert_eq!(wamid, "wamid.T1");
    let loc = json!({"latitude": 52.52, "longitude": 13.405, "name": "Alexanderplatz"});
    let Item::Ingest(ev) = one(base("location", loc)) else {
        panic!("an event")
    };
    assert_eq!(ev.text, "[location: 52.52000, 13.40500, Alexanderplatz]");
    let odd = json!({"from": "4915112345678", "id": "wamid.U1", "timestamp": "1700000000",
        "type": "unsupported", "errors": [{"code": 131051, "title": "Message type unknown"}]});
    assert_eq!(
        one(odd),
        Item::Unreadable {
            chat: "4915112345678".into(),
            wamid: "wamid.U1".into(),
            what: "unsupported".into()
        }
    );
}

#[test]
fn statuses_and_what_is_not_an_envelope() {
    let value = json!({"messaging_product": "whatsapp", "statuses": [{
        "id": "wamid.S1", "status": "failed", "timestamp": "1700000000", "recipient_id": "4915112345678",
        "biz_opaque_callback_data": "reply:7:0",
        "errors": [{"code": 131047, "title": "Re-engagement message"}]}]});
    let got = items(&envelope(value), API).unwrap();
    let [Item::Status(st)] = got.as_slice() else {
        panic!("{got:?}")
    };
    assert_eq!(st.status, "failed");
    assert_eq!(st.key.as_deref(), Some("reply:7:0"));
    assert_eq!(
        st.error,
        Some((131047, "Re-engagement message".to_string()))
    );
    assert!(items(&json!({"object": "page", "entry": []}), API).is_err());
    assert!(items(&json!({"object": "whatsapp_business_account"}), API).is_err());
    let other_field = json!({"object": "whatsapp_business_account", "entry": [{"changes": [
        {"field": "account_update", "value": {}}]}]});
    assert!(items(&other_field, API).unwrap().is_empty());
}
