//! Real `herald serve` processes for the promise tests: started with a store URL and a fake
//! model, killed with SIGKILL (no shutdown path runs, exactly like a power cut or an OOM kill),
//! and started again on the same store.
//!
//! Each start gets its own replica id (`<name>-g<generation>`), so the census can tell which
//! process held a lease or left a turn behind.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sqlx::{Connection, Executor};

use crate::herald::{Herald, Running};

/// Where the daemons keep their state: a SQLite file in a temp dir, or a fresh schema in the
/// `DATABASE_URL` Postgres (dropped by [`Backend::cleanup`]).
pub struct Backend {
    pub dir: tempfile::TempDir,
    pub url: String,
    pg: Option<(String, String)>,
}

impl Backend {
    pub fn sqlite() -> Backend {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("herald.db").display());
        Backend { dir, url, pg: None }
    }

    /// A fresh schema in `admin_url`'s database; every pooled connection of the daemons gets
    /// only that schema on its search path.
    pub async fn postgres(admin_url: &str) -> Backend {
        let schema = format!("herald_promise_{}", uuid::Uuid::new_v4().simple());
        let mut admin = sqlx::PgConnection::connect(admin_url)
            .await
            .expect("connect to DATABASE_URL");
        admin
            .execute(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
            .await
            .expect("create schema");
        let _ = admin.close().await;
        let sep = if admin_url.contains('?') { '&' } else { '?' };
        let url = format!("{admin_url}{sep}options[search_path]={schema}");
        Backend {
            dir: tempfile::tempdir().expect("temp dir"),
            url,
            pg: Some((admin_url.to_string(), schema)),
        }
    }

    /// Postgres when `DATABASE_URL` is set, SQLite otherwise.
    pub async fn from_env() -> Backend {
        match std::env::var("DATABASE_URL") {
            Ok(u) if !u.is_empty() => Backend::postgres(&u).await,
            _ => Backend::sqlite(),
        }
    }

    pub fn name(&self) -> &'static str {
        if self.pg.is_some() {
            "postgres"
        } else {
            "sqlite"
        }
    }

    pub async fn cleanup(&self) {
        if let Some((admin_url, schema)) = &self.pg {
            if let Ok(mut admin) = sqlx::PgConnection::connect(admin_url).await {
                let _ = admin
                    .execute(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
                    .await;
                let _ = admin.close().await;
            }
        }
    }
}

pub use crate::harness::free_port;
pub use crate::herald::herald_bin;

/// How to start one replica; [`Daemon::start`] may be called again after a kill.
#[derive(Clone)]
pub struct Spec {
    pub bin: PathBuf,
    pub name: String,
    pub port: u16,
    pub store_url: String,
    pub data_dir: PathBuf,
    pub llm_url: String,
    /// Extra `HERALD_*` settings (timeouts, attempts…).
    pub env: Vec<(String, String)>,
}

impl Spec {
    /// Settings every promise run shares: short leases so a killed holder's lanes come back in
    /// about two seconds, a fast rescan for crash leftovers, and enough attempts that a message
    /// hit by several kills is still answered by the model rather than set aside.
    ///
    /// `HERALD_*` variables of the calling environment are passed on (after these defaults, so
    /// they win), except the store URL, replica id and model URL the harness owns: e.g.
    /// `HERALD_STORE__MAX_CONNECTIONS=32 cargo run --example crash_loop`.
    pub fn new(bin: &Path, name: &str, backend: &Backend, llm_url: &str) -> Spec {
        let data_dir = backend.dir.path().join(name);
        std::fs::create_dir_all(&data_dir).expect("data dir");
        let owned = [
            "HERALD_STORE__URL",
            "HERALD_SERVER__REPLICA_ID",
            "HERALD_LLM__BASE_URL",
        ];
        let inherited: Vec<(String, String)> = std::env::vars()
            .filter(|(k, _)| k.starts_with("HERALD_") && !owned.contains(&k.as_str()))
            .collect();
        let mut spec = Spec {
            bin: bin.to_path_buf(),
            name: name.to_string(),
            port: free_port(),
            store_url: backend.url.clone(),
            data_dir,
            llm_url: llm_url.to_string(),
            env: vec![
                ("HERALD_LANES__LEASE_TTL_SECS".into(), "2".into()),
                ("HERALD_LANES__HEARTBEAT_SECS".into(), "1".into()),
                ("HERALD_LANES__RESCAN_SECS".into(), "1".into()),
                ("HERALD_LANES__MAX_ATTEMPTS".into(), "50".into()),
                ("HERALD_OUTBOX__POLL_MS".into(), "100".into()),
                ("HERALD_LLM__TIMEOUT_SECS".into(), "30".into()),
            ],
        };
        for (k, v) in inherited {
            spec = spec.set(&k, &v);
        }
        spec
    }

    pub fn set(mut self, key: &str, value: &str) -> Spec {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn log_path(&self) -> PathBuf {
        self.data_dir.join("daemon.log")
    }
}

/// One running process of a replica.
pub struct Daemon {
    pub spec: Spec,
    pub generation: u32,
    process: Running,
    pub ready_ms: f64,
}

impl Daemon {
    pub fn replica_id(spec: &Spec, generation: u32) -> String {
        format!("{}-g{generation}", spec.name)
    }

    /// Starts the process and waits for `/readyz`.
    pub async fn start(spec: &Spec, generation: u32) -> Daemon {
        let started = Instant::now();
        let process = Herald::serve(spec.port, &spec.data_dir)
            .bin(&spec.bin)
            .env("HERALD_STORE__URL", &spec.store_url)
            .env(
                "HERALD_SERVER__REPLICA_ID",
                Self::replica_id(spec, generation),
            )
            .fake_model(&spec.llm_url)
            .env("HERALD_LOG__LEVEL", "warn")
            .envs(spec.env.iter().cloned())
            .log_to(&spec.log_path())
            .spawn();
        let mut d = Daemon {
            spec: spec.clone(),
            generation,
            process,
            ready_ms: 0.0,
        };
        d.wait_ready(started).await;
        d
    }

    async fn wait_ready(&mut self, started: Instant) {
        let http = reqwest::Client::new();
        let url = format!("{}/readyz", self.spec.base_url());
        let deadline = started + Duration::from_secs(60);
        loop {
            if let Ok(r) = http.get(&url).send().await {
                if r.status().is_success() {
                    self.ready_ms = super::ms_since(started);
                    return;
                }
            }
            if let Some(status) = self.process.try_wait() {
                panic!(
                    "{} exited before ready ({status}); log:\n{}",
                    self.spec.name,
                    self.log_tail()
                );
            }
            assert!(
                Instant::now() < deadline,
                "{} never became ready; log:\n{}",
                self.spec.name,
                self.log_tail()
            );
            // Fine-grained: the load benchmark reports this time against a 200 ms target.
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// SIGKILL: no drain, no lease release, no flush.
    pub fn kill(mut self) {
        self.process.kill();
    }

    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.spec.log_path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}
