//! What people do on the fake Signal: a message in a direct chat or a group, with mentions,
//! files, a quote (a reply) or a reaction, or a kind of message Herald does not read. Each
//! becomes one envelope in signal-cli's JSON (`JsonMessageEnvelope`, `JsonDataMessage`) on
//! the event stream, and returns its timestamp (with the sender, the message's id on Signal).

use serde_json::{json, Value};

use super::state::Stored;
use super::FakeSignal;

/// The object-replacement character Signal puts in the text where a mention is.
pub const MENTION: char = '\u{FFFC}';

/// Someone on Signal: a number, the account's uuid (ACI) and a profile name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Person {
    pub number: String,
    pub uuid: String,
    pub name: String,
}

impl Person {
    /// A person with `number` (E.164) and a uuid made from its digits.
    pub fn new(number: &str, name: &str) -> Person {
        let digits: String = number.chars().filter(char::is_ascii_digit).collect();
        Person {
            number: number.to_string(),
            uuid: format!("5e1a0000-0000-4000-8000-{digits:0>12}"),
            name: name.to_string(),
        }
    }

    /// A person with a uuid and no number shown (phone number privacy).
    pub fn without_number(uuid: &str, name: &str) -> Person {
        Person {
            number: String::new(),
            uuid: uuid.to_string(),
            name: name.to_string(),
        }
    }

    /// How the bot addresses them: the number when it is shown, else the uuid.
    pub fn address(&self) -> String {
        if self.number.is_empty() {
            self.uuid.clone()
        } else {
            self.number.clone()
        }
    }

    fn number_or_null(&self) -> Value {
        if self.number.is_empty() {
            Value::Null
        } else {
            json!(self.number)
        }
    }
}

/// A file a person attaches.
pub struct File<'a> {
    pub name: &'a str,
    pub mime: &'a str,
    pub bytes: &'a [u8],
}

impl FakeSignal {
    /// `from` writes `text` to the bot directly.
    pub fn dm(&self, from: &Person, text: &str) -> u64 {
        self.inject(from, None, json!({"message": text}))
    }

    /// `from` writes `text` in `group`; with `mention_bot` the text starts with a mention of
    /// the bot (the placeholder character and a `mentions` entry, as Signal sends it).
    pub fn group_message(&self, group: &str, from: &Person, text: &str, mention_bot: bool) -> u64 {
        if !mention_bot {
            return self.inject(from, Some(group), json!({"message": text}));
        }
        let bot = self.bot();
        let data = json!({
            "message": format!("{MENTION} {text}"),
            "mentions": [{"name": bot.number, "number": bot.number, "uuid": bot.uuid,
                "start": 0, "length": 1}],
        });
        self.inject(from, Some(group), data)
    }

    /// `from` sends `file` with `caption` (empty: none); the daemon stores it under a fresh id
    /// that `getAttachment` serves.
    pub fn file_message(
        &self,
        group: Option<&str>,
        from: &Person,
        caption: &str,
        file: File<'_>,
    ) -> u64 {
        let id = {
            let mut st = self.shared.lock();
            let ext = file.name.rsplit_once('.').map_or("bin", |(_, e)| e);
            let id = format!("att{}.{ext}", st.stamp());
            // signal-cli finds an attachment by its id alone (the sender or group a call
            // names is not checked against it).
            st.attachments.insert(
                id.clone(),
                Stored {
                    bytes: file.bytes.to_vec(),
                },
            );
            id
        };
        let message = (!caption.is_empty()).then_some(caption);
        let data = json!({
            "message": message,
            "attachments": [{"contentType": file.mime, "filename": file.name, "id": id,
                "size": file.bytes.len(), "width": null, "height": null, "caption": null,
                "uploadTimestamp": null}],
        });
        self.inject(from, group, data)
    }

    /// `from` replies with `text` quoting the message `(author, timestamp)`.
    pub fn reply(
        &self,
        group: Option<&str>,
        from: &Person,
        text: &str,
        author: &Person,
        timestamp: u64,
    ) -> u64 {
        let data = json!({
            "message": text,
            "quote": {"id": timestamp, "author": author.address(),
                "authorNumber": author.number_or_null(), "authorUuid": author.uuid,
                "text": "", "attachments": []},
        });
        self.inject(from, group, data)
    }

    /// `from` reacts with `emoji` to the message `(author, timestamp)`.
    pub fn react(
        &self,
        group: Option<&str>,
        from: &Person,
        emoji: &str,
        author: &Person,
        timestamp: u64,
    ) -> u64 {
        let data = json!({
            "message": null,
            "reaction": {"emoji": emoji, "targetAuthor": author.address(),
                "targetAuthorNumber": author.number_or_null(), "targetAuthorUuid": author.uuid,
                "targetSentTimestamp": timestamp, "isRemove": false},
        });
        self.inject(from, group, data)
    }

    /// `from` sends a sticker: a message kind Herald does not read.
    pub fn sticker(&self, group: Option<&str>, from: &Person) -> u64 {
        let data = json!({
            "message": null,
            "sticker": {"packId": "9acc9e8aba563d26a4994e69263e3b25", "stickerId": 3},
        });
        self.inject(from, group, data)
    }

    /// One data message from `from` (in `group`, or directly), stamped now; `data`'s fields
    /// are laid over signal-cli's defaults. Returns its timestamp.
    pub fn inject(&self, from: &Person, group: Option<&str>, data: Value) -> u64 {
        let mut st = self.shared.lock();
        let ts = st.stamp();
        let mut message = json!({"timestamp": ts, "message": null, "expiresInSeconds": 0,
            "viewOnce": false});
        if let (Some(m), Some(extra)) = (message.as_object_mut(), data.as_object()) {
            m.extend(extra.clone());
        }
        if let Some(g) = group {
            let name = st.groups.get(g).map(|(n, _)| n.clone()).unwrap_or_default();
            message["groupInfo"] =
                json!({"groupId": g, "groupName": name, "revision": 1, "type": "DELIVER"});
        }
        let envelope = self.envelope(from, ts, json!({"dataMessage": message}));
        let line = envelope.to_string();
        st.injected.insert((from.address(), ts), line.clone());
        st.deliver(line);
        ts
    }

    /// signal-cli's `{"envelope":{…},"account":…}` around `body` (`dataMessage`, or another
    /// kind such as `receiptMessage` or `typingMessage`).
    pub fn envelope(&self, from: &Person, ts: u64, body: Value) -> Value {
        let mut envelope = json!({
            "source": from.address(), "sourceNumber": from.number_or_null(),
            "sourceUuid": from.uuid, "sourceName": from.name, "sourceDevice": 1,
            "timestamp": ts, "serverReceivedTimestamp": ts + 3, "serverDeliveredTimestamp": ts + 5,
        });
        if let (Some(e), Some(b)) = (envelope.as_object_mut(), body.as_object()) {
            e.extend(b.clone());
        }
        json!({"envelope": envelope, "account": self.shared.account.number})
    }

    /// Writes an envelope line as is (another kind of envelope, or one that does not read).
    pub fn inject_raw(&self, line: &str) {
        self.shared.lock().deliver(line.to_string());
    }

    /// Writes the envelope `(from, ts)` again, as a client reconnecting after an outage may see
    /// it again; `false` when there was no such envelope.
    pub fn replay(&self, from: &Person, ts: u64) -> bool {
        let mut st = self.shared.lock();
        match st.injected.get(&(from.address(), ts)).cloned() {
            Some(line) => {
                st.deliver(line);
                true
            }
            None => false,
        }
    }
}
