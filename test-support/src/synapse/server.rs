//! A real Synapse homeserver for one test: started from the venv scripts/synapse.sh makes, on a
//! free 127.0.0.1 port, with a config written into a temp dir (SQLite, registration only by
//! the shared secret, no federation, rate limits out of the way), and killed on drop.
//!
//! Users are registered through Synapse's shared-secret admin API
//! (`/_synapse/admin/v1/register`: a nonce, then an HMAC-SHA1 over nonce, user, password and
//! admin flag), the way `register_new_matrix_user` does.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha1::Sha1;

use crate::harness::wait_for;

/// The server name of every test homeserver: user ids are `@name:localhost`.
pub const SERVER_NAME: &str = "localhost";
const SHARED_SECRET: &str = "herald-test-shared-secret";

pub struct Synapse {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
    http: reqwest::Client,
}

/// The Python of the venv with Synapse (`HERALD_SYNAPSE_PYTHON`, else `<repo>/.synapse-venv`).
/// Panics with the command that makes it when there is none: a Matrix test never skips.
pub fn synapse_python() -> String {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.synapse-venv/bin/python3");
    let candidates = [
        std::env::var("HERALD_SYNAPSE_PYTHON").ok(),
        Some(venv.display().to_string()),
    ];
    for p in candidates.into_iter().flatten() {
        let ok = Command::new(&p)
            .args(["-c", "import synapse.app.homeserver"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return p;
        }
    }
    panic!(
        "no Synapse for the Matrix tests: run scripts/test (it sources scripts/synapse.sh, which \
         makes .synapse-venv with `pip install matrix-synapse`) or set HERALD_SYNAPSE_PYTHON"
    );
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    l.local_addr().expect("its address").port()
}

impl Synapse {
    /// Starts a fresh homeserver and waits until its client API answers.
    pub async fn start() -> Synapse {
        let python = synapse_python();
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        write_config(dir.path(), port);
        let config = dir.path().join("homeserver.yaml");
        let keys = Command::new(&python)
            .args(["-m", "synapse.app.homeserver", "-c"])
            .arg(&config)
            .arg("--generate-keys")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .expect("synapse --generate-keys runs");
        assert!(
            keys.status.success(),
            "synapse --generate-keys: {}",
            String::from_utf8_lossy(&keys.stderr)
        );
        let log = std::fs::File::create(dir.path().join("stderr.log")).expect("log file");
        let child = Command::new(&python)
            .args(["-m", "synapse.app.homeserver", "-c"])
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("synapse starts");
        let mut s = Synapse {
            child,
            port,
            dir,
            http: reqwest::Client::new(),
        };
        s.wait_ready().await;
        s
    }

    async fn wait_ready(&mut self) {
        let url = format!("{}/_matrix/client/versions", self.url());
        let http = self.http.clone();
        let child = &mut self.child;
        let log = self.dir.path().join("homeserver.log");
        wait_for("synapse to answer", Duration::from_secs(60), async || {
            if let Ok(Some(status)) = child.try_wait() {
                let tail = std::fs::read_to_string(&log).unwrap_or_default();
                panic!("synapse exited ({status}) before answering: {tail}");
            }
            let ok = http
                .get(&url)
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            ok.then_some(())
        })
        .await;
    }

    /// The client-server API base, `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `@name:localhost`.
    pub fn user_id(name: &str) -> String {
        format!("@{name}:{SERVER_NAME}")
    }

    /// Registers `name` with `password` through the shared-secret admin API; returns the user id.
    pub async fn register(&self, name: &str, password: &str) -> String {
        let endpoint = format!("{}/_synapse/admin/v1/register", self.url());
        let nonce: Value = self
            .http
            .get(&endpoint)
            .send()
            .await
            .expect("register nonce")
            .json()
            .await
            .expect("nonce JSON");
        let nonce = nonce["nonce"].as_str().expect("a nonce").to_string();
        let mut mac =
            Hmac::<Sha1>::new_from_slice(SHARED_SECRET.as_bytes()).expect("any key length");
        for (i, part) in [nonce.as_str(), name, password, "notadmin"]
            .iter()
            .enumerate()
        {
            if i > 0 {
                mac.update(b"\x00");
            }
            mac.update(part.as_bytes());
        }
        let body = json!({
            "nonce": nonce, "username": name, "password": password, "admin": false,
            "mac": hex::encode(mac.finalize().into_bytes()),
        });
        let answer = self
            .http
            .post(&endpoint)
            .json(&body)
            .send()
            .await
            .expect("register");
        let status = answer.status();
        let v: Value = answer.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "registering {name}: {status} {v}");
        v["user_id"].as_str().expect("a user id").to_string()
    }

    /// The data folder (the SQLite database, the log).
    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }
}

impl Drop for Synapse {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The homeserver's config: everything local, nothing rate-limited in the way of a test.
fn write_config(dir: &Path, port: u16) {
    let d = dir.display();
    let relaxed = "{per_second: 10000, burst_count: 10000}";
    let config = format!(
        "server_name: \"{SERVER_NAME}\"\n\
         pid_file: {d}/homeserver.pid\n\
         listeners:\n  - port: {port}\n    bind_addresses: ['127.0.0.1']\n    type: http\n    \
         tls: false\n    x_forwarded: false\n    resources:\n      - names: [client]\n        \
         compress: false\n\
         database:\n  name: sqlite3\n  args:\n    database: {d}/homeserver.db\n\
         log_config: {d}/log.yaml\n\
         media_store_path: {d}/media\n\
         signing_key_path: {d}/signing.key\n\
         registration_shared_secret: \"{SHARED_SECRET}\"\n\
         enable_registration: false\n\
         report_stats: false\n\
         federation_domain_whitelist: []\n\
         trusted_key_servers: []\n\
         suppress_key_server_warning: true\n\
         macaroon_secret_key: \"herald-test-macaroon\"\n\
         form_secret: \"herald-test-form\"\n\
         enable_authenticated_media: true\n\
         rc_message: {relaxed}\n\
         rc_login:\n  address: {relaxed}\n  account: {relaxed}\n  failed_attempts: {relaxed}\n\
         rc_registration: {relaxed}\n\
         rc_joins:\n  local: {relaxed}\n  remote: {relaxed}\n\
         rc_invites:\n  per_room: {relaxed}\n  per_user: {relaxed}\n  per_issuer: {relaxed}\n\
         rc_key_requests: {relaxed}\n\
         rc_admin_redaction: {relaxed}\n\
         rc_media_create: {relaxed}\n\
         rc_room_creation: {relaxed}\n\
         rc_joins_per_room: {relaxed}\n"
    );
    std::fs::write(dir.join("homeserver.yaml"), config).expect("homeserver.yaml");
    let log = format!(
        "version: 1\n\
         formatters:\n  precise: {{format: '%(asctime)s %(levelname)s %(name)s %(message)s'}}\n\
         handlers:\n  file: {{class: logging.FileHandler, formatter: precise, filename: {d}/homeserver.log}}\n\
         root: {{level: WARNING, handlers: [file]}}\n\
         disable_existing_loggers: false\n"
    );
    std::fs::write(dir.join("log.yaml"), log).expect("log.yaml");
}
