//! A person on the test homeserver: a real Matrix client (matrix-sdk, its own SQLite crypto
//! store in a temp dir) that logs in, opens an encrypted direct chat or a plain room with the
//! bot, writes, reacts and sends files, and reads back what the bot said the way a client
//! shows it (edits applied, redactions gone).
//!
//! It syncs on its own task from the moment it logs in (aborted when the person drops) and
//! keeps every timeline event it receives, decrypted, as JSON; a timeline the homeserver cut
//! has its gap fetched back, as a client shows it when scrolled.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use matrix_sdk::attachment::AttachmentConfig;
use matrix_sdk::config::SyncSettings;
use matrix_sdk::room::MessagesOptions;
use matrix_sdk::ruma::api::client::filter::FilterDefinition;
use matrix_sdk::ruma::api::client::room::create_room::v3::{Request as CreateRoom, RoomPreset};
use matrix_sdk::ruma::events::reaction::ReactionEventContent;
use matrix_sdk::ruma::events::relation::Annotation;
use matrix_sdk::ruma::events::room::member::MembershipState;
use matrix_sdk::ruma::events::room::message::{RoomMessageEventContent, TextMessageEventContent};
use matrix_sdk::ruma::{EventId, OwnedEventId, OwnedRoomId, OwnedUserId, RoomId, UInt, UserId};
use matrix_sdk::{Client, Room};
use serde_json::Value;

use crate::harness::wait_for;

/// How long a person waits for what should happen.
pub const WAIT: Duration = Duration::from_secs(30);

/// One message as the person's client shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub event_id: String,
    pub sender: String,
    /// `m.text`, `m.notice`, `m.file`, `m.image`, …
    pub msgtype: String,
    /// The body after the latest edit.
    pub body: String,
    pub formatted_body: Option<String>,
    pub thread: Option<String>,
    /// How many times it was edited.
    pub edits: usize,
    /// The event's `content` after the latest edit (a file's source, …).
    pub content: Value,
}

pub struct Person {
    pub client: Client,
    pub user_id: OwnedUserId,
    events: Arc<Mutex<Vec<(OwnedRoomId, Value)>>>,
    sync: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Person {
    /// Logs `user` in on `homeserver` with a fresh device and starts syncing.
    pub async fn login(homeserver: &str, user: &str, password: &str) -> Person {
        let dir = tempfile::tempdir().expect("temp dir");
        let client = Client::builder()
            .homeserver_url(homeserver)
            .sqlite_store(dir.path(), None)
            .build()
            .await
            .expect("a Matrix client");
        client
            .matrix_auth()
            .login_username(user, password)
            .initial_device_display_name("test person")
            .send()
            .await
            .expect("the person logs in");
        let user_id = client.user_id().expect("logged in").to_owned();
        let events = Arc::new(Mutex::new(Vec::new()));
        let sync = tokio::spawn(sync_loop(client.clone(), events.clone()));
        Person {
            client,
            user_id,
            events,
            sync,
            _dir: dir,
        }
    }

    /// An encrypted direct chat with `bot` (as Element makes one); returns once the bot joined
    /// and the person's client knows it.
    pub async fn dm(&self, bot: &str) -> Room {
        let bot = UserId::parse(bot).expect("a user id");
        let room = self.client.create_dm(&bot).await.expect("a direct chat");
        self.wait_joined(room.room_id(), &bot).await;
        room
    }

    /// A plain (unencrypted) room with `members` invited; returns once they all joined.
    pub async fn room(&self, members: &[&str]) -> Room {
        let id = self.invite_room(members, false).await;
        for m in members {
            self.wait_joined(&id, &UserId::parse(*m).expect("a user id"))
                .await;
        }
        self.client.get_room(&id).expect("the room")
    }

    /// A plain (unencrypted) room with `members` invited, marked as a direct chat when
    /// `direct` (the bot then answers every message in it); returns at once.
    pub async fn invite_room(&self, members: &[&str], direct: bool) -> OwnedRoomId {
        let mut request = CreateRoom::new();
        request.preset = Some(RoomPreset::PrivateChat);
        request.is_direct = direct;
        request.invite = members
            .iter()
            .map(|m| UserId::parse(*m).expect("a user id"))
            .collect();
        let room = self.client.create_room(request).await.expect("a room");
        room.room_id().to_owned()
    }

    /// Joins a room this person was invited to.
    pub async fn join(&self, room_id: &RoomId) -> Room {
        let client = self.client.clone();
        let id = room_id.to_owned();
        wait_for("the invite to arrive", WAIT, async || {
            client
                .get_room(&id)
                .filter(|r| r.state() == matrix_sdk::RoomState::Invited)
        })
        .await;
        self.client.join_room_by_id(room_id).await.expect("joins")
    }

    /// Whether this person's client has seen `user` join `room_id`.
    pub async fn has_joined(&self, room_id: &RoomId, user: &str) -> bool {
        let Ok(user) = UserId::parse(user) else {
            return false;
        };
        let Some(room) = self.client.get_room(room_id) else {
            return false;
        };
        let Ok(Some(member)) = room.get_member_no_sync(&user).await else {
            return false;
        };
        *member.membership() == MembershipState::Join
    }

    async fn wait_joined(&self, room_id: &RoomId, user: &UserId) {
        wait_for(&format!("{user} to join"), WAIT, async || {
            self.has_joined(room_id, user.as_str()).await.then_some(())
        })
        .await;
    }

    /// Sends a text; returns its event id.
    pub async fn say(&self, room: &Room, text: &str) -> OwnedEventId {
        room.send(RoomMessageEventContent::text_plain(text))
            .await
            .expect("the message is sent")
            .response
            .event_id
    }

    /// Sends a text in the thread under `root`.
    pub async fn say_in_thread(&self, room: &Room, root: &EventId, text: &str) -> OwnedEventId {
        let mut content = RoomMessageEventContent::text_plain(text);
        content.relates_to = Some(matrix_sdk::ruma::events::room::message::Relation::Thread(
            matrix_sdk::ruma::events::relation::Thread::plain(root.to_owned(), root.to_owned()),
        ));
        room.send(content).await.expect("sent").response.event_id
    }

    /// Reacts to `event` with `key` (✅, ❌, …).
    pub async fn react(&self, room: &Room, event: &str, key: &str) {
        let id = EventId::parse(event).expect("an event id");
        room.send(ReactionEventContent::new(Annotation::new(id, key.into())))
            .await
            .expect("the reaction is sent");
    }

    /// Sends a file (an image when `mime` is `image/…`) with an optional caption.
    pub async fn send_file(
        &self,
        room: &Room,
        name: &str,
        mime: &str,
        bytes: &[u8],
        caption: &str,
    ) {
        let mime: mime::Mime = mime.parse().expect("a MIME type");
        let caption = (!caption.is_empty()).then(|| TextMessageEventContent::plain(caption));
        let config = AttachmentConfig::new().caption(caption);
        room.send_attachment(name, &mime, bytes.to_vec(), config)
            .await
            .expect("the file is sent");
    }

    /// Every message in `room` as this person's client shows it, in order (edits applied,
    /// redacted ones gone, reactions and state left out).
    pub fn shown(&self, room: &RoomId) -> Vec<Shown> {
        let events = self.events.lock().unwrap().clone();
        view(events.iter().filter(|(r, _)| r == room).map(|(_, e)| e))
    }

    /// Whether this person's client has received the event `event_id` (any type).
    pub fn knows(&self, event_id: &str) -> bool {
        let events = self.events.lock().unwrap();
        events
            .iter()
            .any(|(_, e)| e["event_id"].as_str() == Some(event_id))
    }

    /// What `sender` said in `room`, as shown.
    pub fn from(&self, room: &RoomId, sender: &str) -> Vec<Shown> {
        self.shown(room)
            .into_iter()
            .filter(|s| s.sender == sender)
            .collect()
    }

    /// The bytes of a file message, decrypted when it was encrypted.
    pub async fn download(&self, shown: &Shown) -> Vec<u8> {
        use matrix_sdk::media::{MediaFormat, MediaRequestParameters};
        use matrix_sdk::ruma::events::room::MediaSource;
        let source = match shown.content.get("file") {
            Some(f) => MediaSource::Encrypted(Box::new(serde_json::from_value(f.clone()).unwrap())),
            None => MediaSource::Plain(shown.content["url"].as_str().unwrap().into()),
        };
        let request = MediaRequestParameters {
            source,
            format: MediaFormat::File,
        };
        self.client
            .media()
            .get_media_content(&request, false)
            .await
            .expect("the file downloads")
    }
}

impl Drop for Person {
    fn drop(&mut self) {
        self.sync.abort();
    }
}

async fn sync_loop(client: Client, events: Arc<Mutex<Vec<(OwnedRoomId, Value)>>>) {
    let mut filter = FilterDefinition::default();
    filter.room.timeline.limit = Some(UInt::from(500u32));
    let mut settings = SyncSettings::default()
        .timeout(Duration::from_secs(5))
        .filter(filter.into());
    let mut since: Option<String> = None;
    loop {
        match client.sync_once(settings.clone()).await {
            Ok(batch) => {
                let mut got = Vec::new();
                for (room, update) in &batch.rooms.joined {
                    let timeline = &update.timeline;
                    if let (true, Some(prev), Some(since)) =
                        (timeline.limited, &timeline.prev_batch, &since)
                    {
                        // A cut timeline: what a client shows after scrolling back.
                        got.extend(gap(&client, room, prev, since).await);
                    }
                    for e in &timeline.events {
                        if let Ok(v) = e.raw().deserialize_as::<Value>() {
                            got.push((room.clone(), v));
                        }
                    }
                }
                events.lock().unwrap().extend(got);
                since = Some(batch.next_batch.clone());
                settings = settings.token(batch.next_batch);
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// The events of a cut timeline between `since` and `prev`, oldest first.
async fn gap(client: &Client, room: &RoomId, prev: &str, since: &str) -> Vec<(OwnedRoomId, Value)> {
    let Some(r) = client.get_room(room) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut from = prev.to_string();
    loop {
        let mut options = MessagesOptions::backward().from(from.as_str());
        options.to = Some(since.to_string());
        options.limit = UInt::from(100u32);
        let Ok(page) = r.messages(options).await else {
            break;
        };
        let empty = page.chunk.is_empty();
        for e in page.chunk {
            if let Ok(v) = e.raw().deserialize_as::<Value>() {
                out.push((room.to_owned(), v));
            }
        }
        match page.end {
            Some(end) if !empty && end != from => from = end,
            _ => break,
        }
    }
    out.reverse();
    out
}

/// Timeline JSON → messages as a client shows them.
pub fn view<'a>(events: impl Iterator<Item = &'a Value>) -> Vec<Shown> {
    let mut order: Vec<Shown> = Vec::new();
    let mut edits: HashMap<String, Vec<Value>> = HashMap::new();
    let mut redacted: Vec<String> = Vec::new();
    for e in events {
        match e["type"].as_str() {
            Some("m.room.redaction") => {
                let target = e["redacts"]
                    .as_str()
                    .or_else(|| e["content"]["redacts"].as_str());
                redacted.extend(target.map(str::to_string));
            }
            Some("m.room.message") => {
                let c = &e["content"];
                if c["m.relates_to"]["rel_type"] == "m.replace" {
                    let target = c["m.relates_to"]["event_id"].as_str().unwrap_or("");
                    edits
                        .entry(target.to_string())
                        .or_default()
                        .push(c["m.new_content"].clone());
                    continue;
                }
                if e.get("unsigned")
                    .and_then(|u| u.get("redacted_because"))
                    .is_some()
                {
                    continue;
                }
                let thread = (c["m.relates_to"]["rel_type"] == "m.thread")
                    .then(|| c["m.relates_to"]["event_id"].as_str().map(str::to_string))
                    .flatten();
                order.push(Shown {
                    event_id: e["event_id"].as_str().unwrap_or("").to_string(),
                    sender: e["sender"].as_str().unwrap_or("").to_string(),
                    msgtype: c["msgtype"].as_str().unwrap_or("").to_string(),
                    body: c["body"].as_str().unwrap_or("").to_string(),
                    formatted_body: c["formatted_body"].as_str().map(str::to_string),
                    thread,
                    edits: 0,
                    content: c.clone(),
                });
            }
            _ => {}
        }
    }
    order.retain(|s| !redacted.contains(&s.event_id));
    for s in &mut order {
        if let Some(list) = edits.get(&s.event_id) {
            s.edits = list.len();
            let last = list.last().expect("one edit at least");
            s.body = last["body"].as_str().unwrap_or("").to_string();
            s.formatted_body = last["formatted_body"].as_str().map(str::to_string);
            s.content = last.clone();
        }
    }
    order
}
