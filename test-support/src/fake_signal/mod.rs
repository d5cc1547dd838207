//! A fake signal-cli HTTP daemon (`signal-cli -a ACCOUNT daemon --http`) on 127.0.0.1 for
//! end-to-end tests: JSON-RPC 2.0 on `POST /api/v1/rpc`, the Server-Sent Events stream on
//! `GET /api/v1/events`, and `GET /api/v1/check`. Proven with plain reqwest in
//! `tests/it/fake_signal_selftest.rs`.
//!
//! It exists because signal-cli cannot run here (Java 21 and a number registered with
//! Signal's servers). It speaks signal-cli's wire format as its sources write it (method and
//! parameter names, `{"timestamp","results"}` answers, error codes, envelope JSON, SSE
//! framing) and must not be kinder than the daemon where the adapter's correctness depends on
//! it: errors come with HTTP 200 in the JSON-RPC body, a rate limit is error -5 with the
//! per-recipient `retryAfterSeconds`, an attachment is sent from a path the daemon reads
//! itself, an event written to a stream whose reader died is gone, and the stream has no
//! acknowledgement and no replay of its own.
//!
//! Deliberate differences from signal-cli, to keep tests fast and deterministic:
//! - Envelopes injected while no stream is open wait for the next one (signal-cli with
//!   `--receive-mode=on-connection` leaves them on Signal's server; in the default mode it
//!   would drop them). [`FakeSignal::replay`] writes one again, as a test's stand-in for the
//!   redelivery Signal's server makes of a message it never got the receipt for.
//! - Timestamps come from one counter (strictly increasing milliseconds).
//! - Groups are whatever the test adds; any member may be named, nobody is invited.

mod events;
mod inject;
mod rpc;
mod state;

pub use inject::{File, Person, MENTION};
pub use state::{Call, Fault, Sent, SentFile, Signalled};

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::routing::{get, post};
use axum::Router;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::harness::wait_for;

/// The version `version` answers.
pub const VERSION: &str = "0.13.22";
/// The bot's number when the test names none.
pub const ACCOUNT: &str = "+15550100000";

pub(crate) struct Shared {
    /// The bot's own account.
    pub account: Person,
    state: Mutex<state::State>,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, state::State> {
        // A panicking test thread must not hide the records from the next assertion.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running fake daemon; its server stops when it is dropped.
pub struct FakeSignal {
    shared: Arc<Shared>,
    base: String,
    task: JoinHandle<()>,
}

impl Drop for FakeSignal {
    fn drop(&mut self) {
        self.task.abort();
        self.drop_streams();
    }
}

impl FakeSignal {
    /// Starts the daemon for the account [`ACCOUNT`] on a free 127.0.0.1 port.
    pub async fn start() -> FakeSignal {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let shared = Arc::new(Shared {
            account: Person::new(ACCOUNT, "Herald"),
            state: Mutex::new(state::State::new()),
        });
        let app = Router::new()
            .route("/api/v1/rpc", post(rpc::handle))
            .route("/api/v1/events", get(events::handle))
            .route("/api/v1/check", get(|| async { "" }))
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeSignal { shared, base, task }
    }

    /// `http://127.0.0.1:P`: what `signal.url` is set to.
    pub fn url(&self) -> String {
        self.base.clone()
    }

    /// The bot's account (its number is `signal.account`).
    pub fn bot(&self) -> Person {
        self.shared.account.clone()
    }

    /// A group the bot is in, with these members (the bot added).
    pub fn add_group(&self, id: &str, name: &str, members: &[&Person]) {
        let mut list: Vec<String> = members.iter().map(|p| p.address()).collect();
        list.push(self.shared.account.number.clone());
        self.shared
            .lock()
            .groups
            .insert(id.to_string(), (name.to_string(), list));
    }

    /// Whether the account is registered; unregistered, every call answers -1 "User is not
    /// registered." and the event stream answers 400.
    pub fn set_registered(&self, on: bool) {
        self.shared.lock().registered = on;
    }

    // ---- faults and the stream ---------------------------------------------------------------

    /// The next `send` fails as a rate limit, retry after `secs`; nothing is sent.
    pub fn rate_limit_next_send(&self, secs: u64) {
        self.fail_next(
            "send",
            1,
            Fault::RateLimited {
                retry_after_secs: secs,
            },
        );
    }

    /// The next `times` calls of `method` meet `fault` (queued after any earlier ones).
    pub fn fail_next(&self, method: &str, times: usize, fault: Fault) {
        let mut st = self.shared.lock();
        let q = st.faults.entry(method.to_string()).or_default();
        q.extend(std::iter::repeat_n(fault, times));
    }

    /// Ends every open event stream, as a daemon restart or a dropped connection does.
    pub fn drop_streams(&self) {
        self.shared.lock().streams.clear();
    }

    /// Event streams opened so far.
    pub fn connections(&self) -> usize {
        self.shared.lock().connections
    }

    /// Event streams open now.
    pub fn open_streams(&self) -> usize {
        let mut st = self.shared.lock();
        st.streams.retain(|s| !s.is_closed());
        st.streams.len()
    }

    /// Waits until `n` event streams were opened in all.
    pub async fn wait_connections(&self, n: usize, timeout: Duration) {
        wait_for("signal event streams", timeout, async || {
            (self.connections() >= n && self.open_streams() > 0).then_some(())
        })
        .await
    }

    // ---- what the bot did --------------------------------------------------------------------

    /// Every `send` the daemon took, edits included, in order.
    pub fn sent(&self) -> Vec<Sent> {
        self.shared.lock().sent.clone()
    }

    /// The sends (edits included) to `chat`: a person's address or `group:<id>`.
    pub fn sent_to(&self, chat: &str) -> Vec<Sent> {
        self.sent().into_iter().filter(|s| s.chat == chat).collect()
    }

    /// What a person in `chat` sees from the bot, in order: each message as its last edit left
    /// it — (timestamp, text, files).
    pub fn view(&self, chat: &str) -> Vec<(u64, String, Vec<SentFile>)> {
        self.shared.lock().view(chat)
    }

    /// Sends that edited an earlier message.
    pub fn edits(&self) -> usize {
        self.shared
            .lock()
            .sent
            .iter()
            .filter(|s| s.edit_of.is_some())
            .count()
    }

    /// Typing indicators and reactions the bot sent, in order.
    pub fn signalled(&self) -> Vec<Signalled> {
        self.shared.lock().signalled.clone()
    }

    /// Every JSON-RPC call as it arrived.
    pub fn calls(&self) -> Vec<Call> {
        self.shared.lock().calls.clone()
    }
}
