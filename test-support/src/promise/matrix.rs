//! The Matrix way in for the promise runs, on a real Synapse: lane `i` is direct chat `i` (plain,
//! unencrypted) of one person (`@loader:localhost`) with the bot, each message a real `m.room.message` the person's
//! client sends, and the answer whatever that client then sees the bot say in the room: the
//! user-visible truth, independent of the store the census reads.
//!
//! The rooms are made (and the bot invited) before the daemon first starts; a lane's first
//! message waits until the bot has joined its room (what a room said before the bot joined is
//! history it never answers). A message is sent once per client id, with a transaction id of its
//! own, so a retried attempt can never make a second message. Matrix deduplicates the bot's
//! sends by their transaction id (derived from the outbox key), so the promise allows no
//! resend at all.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use herald::domain::LaneKey;
use matrix_sdk::ruma::events::room::message::RoomMessageEventContent;
use matrix_sdk::ruma::{OwnedRoomId, OwnedTransactionId};
use serde::Serialize;

use super::super::synapse::{Person, Synapse, BOT_PASSWORD};
use super::attempt::{await_reply, daemon_env, Pushed};
use super::census::Kill;
use super::crash::{PeopleSaw, Side};
use super::load::{Answer, Channel};

const LOADER: &str = "loader";
const BOT: &str = "@herald:localhost";

#[derive(Clone)]
pub struct MatrixChannel {
    synapse: Arc<Synapse>,
    person: Arc<Person>,
    rooms: Arc<Vec<OwnedRoomId>>,
    /// client id → (room, event id) of the message sent for it.
    pushed: Pushed<(String, String)>,
}

impl MatrixChannel {
    /// Synapse, the bot and the loader registered, and `lanes` rooms with the bot invited.
    pub async fn start(lanes: usize) -> MatrixChannel {
        let synapse = Synapse::start().await;
        synapse.register("herald", BOT_PASSWORD).await;
        synapse.register(LOADER, LOADER).await;
        let person = Person::login(&synapse.url(), LOADER, LOADER).await;
        let mut rooms = Vec::new();
        for _ in 0..lanes {
            rooms.push(person.invite_room(&[BOT], true).await);
        }
        MatrixChannel {
            synapse: Arc::new(synapse),
            person: Arc::new(person),
            rooms: Arc::new(rooms),
            pushed: Pushed::default(),
        }
    }

    /// Settings for a daemon logging in as the bot, answering everyone.
    pub fn daemon_env(&self) -> Vec<(String, String)> {
        daemon_env(vec![
            ("HERALD_MATRIX__HOMESERVER_URL", self.synapse.url()),
            ("HERALD_MATRIX__USER_ID", BOT.to_string()),
            ("HERALD_MATRIX__PASSWORD", BOT_PASSWORD.to_string()),
            ("HERALD_MATRIX__ALLOW_ALL_USERS", "true".into()),
        ])
    }

    fn room_of(&self, lane: &str) -> Result<OwnedRoomId, String> {
        self.rooms
            .iter()
            .find(|r| LaneKey::from_parts("matrix", r.as_str(), None).as_str() == lane)
            .cloned()
            .ok_or_else(|| format!("not a lane of this channel: {lane}"))
    }

    /// Counts what the loader saw: the bot's answers to each message in its room.
    pub fn receipts(&self) -> MatrixReceipts {
        let pushed = self.pushed.lock().clone();
        let mut r = MatrixReceipts {
            messages: pushed.len(),
            ..MatrixReceipts::default()
        };
        let mut texts: HashMap<String, String> = HashMap::new();
        for room in self.rooms.iter() {
            let room_id = room.as_str().to_string();
            let shown = self.person.shown(room);
            for s in &shown {
                if s.sender != BOT {
                    texts.insert(s.event_id.clone(), s.body.clone());
                }
            }
            for s in shown.iter().filter(|s| s.sender == BOT) {
                r.bot_messages += 1;
                let answers = pushed.values().any(|(room, ev)| {
                    *room == room_id
                        && texts
                            .get(ev)
                            .is_some_and(|t| s.body == format!("reply to: {t}"))
                });
                if !answers {
                    r.not_replies += 1;
                }
            }
        }
        for (room, event) in pushed.values() {
            let Some(text) = texts.get(event) else {
                r.unanswered += 1;
                continue;
            };
            let id: OwnedRoomId = room.as_str().try_into().expect("a room id");
            let n = self
                .person
                .from(&id, BOT)
                .iter()
                .filter(|s| s.body == format!("reply to: {text}"))
                .count();
            match n {
                0 => r.unanswered += 1,
                1 => r.answered_exactly_once += 1,
                _ => r.answered_more_than_once += 1,
            }
        }
        r
    }
}

impl Channel for MatrixChannel {
    fn platform(&self) -> &'static str {
        "matrix"
    }

    fn lane(&self, _prefix: &str, index: usize) -> String {
        LaneKey::from_parts("matrix", self.rooms[index].as_str(), None)
            .as_str()
            .to_string()
    }

    fn platform_id(&self, client_id: &str) -> String {
        self.pushed
            .platform_id(client_id, |(_, event)| event.clone())
    }

    fn deliver(
        &self,
        lane: &str,
        client_id: &str,
        text: &str,
    ) -> impl Future<Output = Result<Answer, String>> + Send {
        let this = self.clone();
        let lane = lane.to_string();
        let client_id = client_id.to_string();
        let text = text.to_string();
        async move {
            let room_id = this.room_of(&lane)?;
            let known = this.pushed.lock().get(&client_id).cloned();
            if known.is_none() {
                let room = this
                    .person
                    .client
                    .get_room(&room_id)
                    .ok_or("the loader's room is not known yet")?;
                if !this.person.has_joined(&room_id, BOT).await {
                    return Err("the bot has not joined yet".into());
                }
                let txn = OwnedTransactionId::from(format!("load-{client_id}"));
                let sent = room
                    .send(RoomMessageEventContent::text_plain(&text))
                    .with_transaction_id(txn)
                    .await
                    .map_err(|e| format!("send: {e}"))?;
                this.pushed.lock().insert(
                    client_id.clone(),
                    (room_id.to_string(), sent.response.event_id.to_string()),
                );
            }
            let expected = format!("reply to: {text}");
            let person = this.person.clone();
            await_reply(format!("{room_id}/{client_id}"), || {
                person
                    .from(&room_id, BOT)
                    .into_iter()
                    .find(|s| s.body == expected)
                    .map(|s| s.body)
            })
            .await
        }
    }
}

impl Side for MatrixChannel {
    type Receipts = MatrixReceipts;

    fn daemon_env(&self) -> Vec<(String, String)> {
        MatrixChannel::daemon_env(self)
    }

    fn receipts(&self, _kills: &[Kill]) -> Option<MatrixReceipts> {
        Some(MatrixChannel::receipts(self))
    }
}

/// What the loader saw on Synapse.
#[derive(Debug, Default, Serialize)]
pub struct MatrixReceipts {
    pub messages: usize,
    pub bot_messages: usize,
    pub answered_exactly_once: usize,
    pub unanswered: usize,
    pub answered_more_than_once: usize,
    /// Bot messages that answer no message of the load.
    pub not_replies: usize,
}

impl PeopleSaw for MatrixReceipts {
    fn promise_held(&self) -> bool {
        self.unanswered == 0
            && self.answered_more_than_once == 0
            && self.not_replies == 0
            && self.answered_exactly_once == self.messages
    }
    fn messages(&self) -> usize {
        self.messages
    }
    fn unanswered(&self) -> usize {
        self.unanswered
    }
    fn resends_across_a_kill(&self) -> usize {
        // The homeserver deduplicates a resend by its transaction id: none is allowed.
        self.answered_more_than_once
    }
}
