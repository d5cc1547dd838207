//! Starts the real daemon core (`App::start`) on 127.0.0.1:0 against a fake model, with a
//! temporary SQLite store, and talks to it over HTTP like a user's browser would.

use std::time::Duration;

use herald::app::App;
use herald::config::{ApiKeyConfig, Config, Person, ProviderKind, Secret};
use herald::store::{InboxRow, InboxStatus, Store};
use serde_json::{json, Value};

use super::fake_llm::FakeLlm;

pub fn init() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_test_writer()
        .try_init();
}

/// A config for tests: fake model, temp data dir, fast leases and retries.
pub fn test_config(llm: &FakeLlm, data: &tempfile::TempDir) -> Config {
    let mut c = Config::default();
    c.server.listen = "127.0.0.1:0".parse().unwrap();
    c.server.data_dir = data.path().to_path_buf();
    c.server.shutdown_grace_secs = 5;
    c.llm.provider = ProviderKind::Openai;
    c.llm.base_url = Some(llm.base_url().parse().unwrap());
    c.llm.model = Some("fake-model".into());
    c.llm.timeout_secs = 10;
    c.llm.max_retries = 2;
    c.lanes.lease_ttl_secs = 4;
    c.lanes.heartbeat_secs = 1;
    c.lanes.idle_secs = 2;
    c.lanes.rescan_secs = 1;
    c.outbox.poll_ms = 100;
    // The tests built on this config assert unstreamed sends (one message per chunk); a test
    // about streaming turns it on, and the default (private chats stream) has its own tests.
    c.streaming.enabled = Some(false);
    c
}

/// The core in process with the OpenAI-compatible API on and one key, `key`, whose person is
/// `ana` (cron off); `tune` adjusts the config before start.
pub async fn start_api(
    key: &str,
    tune: impl FnOnce(&mut Config),
) -> (FakeLlm, App, tempfile::TempDir) {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut c = test_config(&llm, &data);
    c.cron.enabled = false;
    c.people = vec![Person {
        name: "ana".into(),
        ids: vec![],
    }];
    c.api.enabled = true;
    c.api.keys = vec![ApiKeyConfig {
        name: "laptop".into(),
        key: Some(Secret::new(key)),
        key_env: None,
        person: "ana".into(),
    }];
    tune(&mut c);
    let app = App::start(c).await.expect("app starts");
    (llm, app, data)
}

/// A port on 127.0.0.1 that was free a moment ago (for a daemon started as its own process).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// Polls `cond` every 20 ms; panics with `what` after `timeout`.
pub async fn wait_until<F, Fut>(what: &str, timeout: Duration, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    wait_for(what, timeout, async || cond().await.then_some(())).await
}

/// Polls `probe` every 20 ms until it yields a value, and returns it; panics with `what`
/// after `timeout`. The one polling loop of the tests: [`wait_until`] is this for a yes/no.
pub async fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits (up to 10 s) until the daemon storing its SQLite file in `data_dir` has recorded the
/// platform message id of `n` approval questions. A SIGKILL between sending a question and
/// recording its id is the one window where a restart asks again; a test that means to kill
/// the daemon *during the wait* kills it after this.
pub async fn approval_questions_recorded(data_dir: &std::path::Path, n: i64) {
    let url = format!("sqlite://{}?mode=ro", data_dir.join("herald.db").display());
    let pool = sqlx::SqlitePool::connect(&url)
        .await
        .expect("open the daemon's store");
    wait_until(
        "the approval question's message id recorded",
        Duration::from_secs(10),
        || {
            let pool = pool.clone();
            async move {
                sqlx::query_scalar::<_, i64>(
                    "SELECT count(*) FROM approvals WHERE prompt_message_id IS NOT NULL",
                )
                .fetch_one(&pool)
                .await
                .unwrap_or(0)
                    >= n
            }
        },
    )
    .await;
    pool.close().await;
}

/// Waits (up to 10 s) until inbox event `id` leaves `pending`, and returns its row.
pub async fn settled(store: &dyn Store, id: i64) -> InboxRow {
    wait_for(
        &format!("inbox event {id} to settle"),
        Duration::from_secs(10),
        async || {
            let row = store.inbox_get(id).await.unwrap().expect("inbox row");
            (row.status != InboxStatus::Pending).then_some(row)
        },
    )
    .await
}

/// Waits (up to 10 s) until the store holds no work for the chats: no lane with a pending
/// inbox event and no outbox row waiting or being sent. Whatever the platform fakes received
/// by then is all that these events send — a retried turn or a resent row would first show
/// here — so a test counts replies after this instead of sleeping "long enough" for a
/// duplicate to show up.
pub async fn quiet(store: &dyn Store) {
    wait_until(
        "no pending inbox event and no unsent outbox row",
        Duration::from_secs(10),
        || async {
            let lanes = store.inbox_pending_lanes(1).await.unwrap();
            let out = store.outbox_counts().await.unwrap();
            lanes.is_empty() && out.pending == 0 && out.sending == 0
        },
    )
    .await;
}

/// [`quiet`] for a daemon running as its own process on the SQLite store in `data_dir`, read
/// through a read-only connection of its own.
pub async fn quiet_at(data_dir: &std::path::Path) {
    let url = format!("sqlite://{}?mode=ro", data_dir.join("herald.db").display());
    let pool = sqlx::SqlitePool::connect(&url)
        .await
        .expect("open the daemon's store");
    wait_until(
        "no pending inbox event and no unsent outbox row",
        Duration::from_secs(10),
        || {
            let pool = pool.clone();
            async move {
                sqlx::query_scalar::<_, i64>(
                    "SELECT (SELECT count(*) FROM inbox WHERE status = 'pending') \
                     + (SELECT count(*) FROM outbox WHERE status IN ('pending', 'sending'))",
                )
                .fetch_one(&pool)
                .await
                .is_ok_and(|n| n == 0)
            }
        },
    )
    .await;
    pool.close().await;
}

/// The daemon core on `db` with the web chat, a fake model and no cron: what a test that
/// talks to one web lane starts.
pub struct WebApp {
    pub llm: FakeLlm,
    pub data: tempfile::TempDir,
    pub app: App,
    pub client: Client,
}

impl WebApp {
    pub async fn start(db: super::db::Db) -> WebApp {
        init();
        let llm = FakeLlm::start().await;
        let data = tempfile::tempdir().unwrap();
        let mut config = test_config(&llm, &data);
        config.cron.enabled = false;
        db.apply(&mut config);
        let app = App::start(config).await.unwrap();
        let client = Client::new(&app);
        WebApp {
            llm,
            data,
            app,
            client,
        }
    }
}

pub struct Client {
    pub base: String,
    http: reqwest::Client,
}

impl Client {
    pub fn new(app: &App) -> Client {
        Client::for_addr(&app.addr.to_string())
    }

    pub fn for_addr(addr: &str) -> Client {
        Client {
            base: format!("http://{addr}"),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .unwrap(),
        }
    }

    /// Posts a chat message and returns (HTTP status, JSON body).
    pub async fn chat(&self, lane: &str, text: &str) -> (u16, Value) {
        self.chat_body(json!({"lane": lane, "text": text, "sender": "tester"}))
            .await
    }

    pub async fn chat_body(&self, body: Value) -> (u16, Value) {
        let r = self
            .http
            .post(format!("{}/api/v1/chat", self.base))
            .json(&body)
            .send()
            .await
            .expect("chat request");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// The lane's live transcript as (role, content) pairs.
    pub async fn transcript(&self, lane: &str) -> Vec<(String, String)> {
        let v: Value = self
            .http
            .get(format!("{}/api/v1/lanes/{lane}/messages", self.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["role"].as_str().unwrap().to_string(),
                    m["content"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    pub async fn get(&self, path: &str) -> (u16, String) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }
}
