//! Postgres restarted under load: the `herald` binary takes a chat load on a private Postgres
//! server this test starts itself (it has to stop it, so never the shared `DATABASE_URL` one),
//! the server is stopped with `pg_ctl stop -m fast` for a few seconds and started again. Every
//! message must still be answered exactly once, `/readyz` must say unready while the database
//! is away and ready after, and the outage must show where an operator looks: the log and
//! `herald_store_up` in `/metrics`.
//!
//! Runs when `DATABASE_URL` is set (CI's Postgres pass; the URL itself is not used) and
//! `initdb`/`pg_ctl` are found under /usr/lib/postgresql/*/bin; otherwise it prints why it
//! skipped.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use herald_test_support::{fake_llm, promise};

use fake_llm::FakeLlm;
use promise::census;
use promise::daemon::{free_port, herald_bin, Backend, Daemon, Spec};
use promise::load::{self, LoadSpec, WebChannel};

/// A throwaway Postgres cluster in a temp dir, on its own port; stopped when dropped.
struct PrivatePg {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    as_postgres: bool,
}

impl PrivatePg {
    /// `None` (with the reason) when no server binaries are installed.
    fn init() -> Result<PrivatePg, String> {
        let mut bins: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .map_err(|e| format!("/usr/lib/postgresql: {e}"))?
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .filter(|b| b.join("initdb").exists() && b.join("pg_ctl").exists())
            .collect();
        bins.sort();
        let bin = bins
            .pop()
            .ok_or("no initdb and pg_ctl under /usr/lib/postgresql/*/bin")?;
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        // Postgres refuses to run as root; as root, run it as the postgres user.
        let as_postgres = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
        let pg = PrivatePg {
            bin,
            dir,
            port: free_port(),
            as_postgres,
        };
        if as_postgres {
            pg.run(
                "chown",
                &["postgres", &pg.path().display().to_string()],
                false,
            )?;
        }
        let data = pg.data();
        pg.run(
            "initdb",
            &["-D", &data, "-U", "postgres", "--auth=trust"],
            true,
        )?;
        Ok(pg)
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn data(&self) -> String {
        self.path().join("data").display().to_string()
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn run(&self, tool: &str, args: &[&str], pg_tool: bool) -> Result<(), String> {
        let program = if pg_tool {
            self.bin.join(tool)
        } else {
            PathBuf::from(tool)
        };
        let mut cmd = if self.as_postgres && pg_tool {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&program);
            c
        } else {
            Command::new(&program)
        };
        let out = cmd
            .args(args)
            .output()
            .map_err(|e| format!("{}: {e}", program.display()))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{tool} {args:?}: {}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    fn start(&self) {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.path().display()
        );
        let log = self.path().join("log").display().to_string();
        let data = self.data();
        self.run(
            "pg_ctl",
            &["-D", &data, "-l", &log, "-w", "start", "-o", &opts],
            true,
        )
        .expect("start postgres");
    }

    fn stop(&self) {
        let data = self.data();
        self.run("pg_ctl", &["-D", &data, "-m", "fast", "-w", "stop"], true)
            .expect("stop postgres");
    }
}

impl Drop for PrivatePg {
    fn drop(&mut self) {
        let data = self.data();
        let _ = self.run(
            "pg_ctl",
            &["-D", &data, "-m", "immediate", "-w", "stop"],
            true,
        );
    }
}

/// `/readyz`'s status code, or 0 when it did not answer within the client timeout.
async fn readyz(http: &reqwest::Client, base: &str) -> u16 {
    match http.get(format!("{base}/readyz")).send().await {
        Ok(r) => r.status().as_u16(),
        Err(_) => 0,
    }
}

async fn metric(http: &reqwest::Client, base: &str, name: &str) -> Option<f64> {
    let text = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    text.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// Polls until `/readyz` answers `want` (or the time runs out); returns how long it took.
async fn wait_readyz(http: &reqwest::Client, base: &str, want: u16, within: Duration) -> f64 {
    let started = Instant::now();
    loop {
        let got = readyz(http, base).await;
        if got == want {
            return promise::ms_since(started);
        }
        assert!(
            started.elapsed() < within,
            "/readyz still {got}, wanted {want}, after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_stopped_and_restarted_mid_load_answers_every_message_once() {
    if std::env::var("DATABASE_URL").map_or(true, |u| u.is_empty()) {
        herald_test_support::skip_or_fail(
            "pg_restart: DATABASE_URL not set (the Postgres pass runs it)",
        );
        return;
    }
    let pg = match PrivatePg::init() {
        Ok(pg) => pg,
        Err(why) => {
            herald_test_support::skip_or_fail(&format!("pg_restart: {why}"));
            return;
        }
    };
    pg.start();
    promise::init();
    let llm = FakeLlm::start().await;
    llm.set_jitter(Duration::from_millis(100));
    let backend = Backend::postgres(&pg.url()).await;
    let spec =
        Spec::new(&herald_bin(), "pgr", &backend, &llm.base_url()).set("HERALD_LOG__LEVEL", "info");
    let daemon = Daemon::start(&spec, 0).await;
    let base = spec.base_url();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("http client");
    assert_eq!(metric(&http, &base, "herald_store_up").await, Some(1.0));

    let keep_going = Arc::new(AtomicBool::new(true));
    let load = tokio::spawn(load::run(
        WebChannel::new(vec![base.clone()]),
        LoadSpec {
            lanes: 4,
            min_per_lane: 6,
            keep_going: keep_going.clone(),
            lane_prefix: "pgr".into(),
            give_up: Duration::from_secs(120),
        },
    ));

    tokio::time::sleep(Duration::from_millis(2000)).await;
    pg.stop();
    let stopped = Instant::now();
    let unready_ms = wait_readyz(&http, &base, 503, Duration::from_secs(10)).await;
    let store_up_during = metric(&http, &base, "herald_store_up").await;
    tokio::time::sleep(Duration::from_secs(4).saturating_sub(stopped.elapsed())).await;
    pg.start();
    let outage_s = stopped.elapsed().as_secs_f64();
    let ready_again_ms = wait_readyz(&http, &base, 200, Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_millis(2000)).await;
    keep_going.store(false, Ordering::Relaxed);

    let sent = load.await.expect("load");
    assert!(
        census::drain(&backend.url, "web", Duration::from_secs(90)).await,
        "work left undone after the database came back"
    );
    let store_up_after = metric(&http, &base, "herald_store_up").await;
    let log = std::fs::read_to_string(spec.log_path()).unwrap_or_default();
    drop(daemon);
    let c = census::take(&backend.url, "web", &sent, &[]).await;
    backend.cleanup().await;
    println!(
        "outage {outage_s:.1}s; /readyz unready after {unready_ms:.0} ms, ready again \
         {ready_again_ms:.0} ms after the restart; client retries {}",
        c.client_retries
    );
    println!("{}", serde_json::to_string_pretty(&c).unwrap());
    c.assert_promise();
    assert_eq!(c.inbox_rows, c.client_messages, "retries deduplicated");
    assert_eq!(store_up_during, Some(0.0), "the scrape shows the outage");
    assert_eq!(store_up_after, Some(1.0), "and the recovery");
    let errors = log
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .count();
    assert!(errors >= 1, "the outage is in the log:\n{log}");
}
