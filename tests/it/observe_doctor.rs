//! `herald doctor` as an operator runs it: the real binary, its printed report and exit code.

use std::process::Command;

use herald_test_support::fake_discord::FakeDiscord;
use herald_test_support::fake_llm::FakeLlm;
use herald_test_support::fake_telegram::FakeTelegram;
use herald_test_support::harness::init;
use herald_test_support::herald::Herald;

const TG_TOKEN: &str = "4242:doctor-telegram-token-xyz";
const DC_TOKEN: &str = "doctor.discord.token-abc";

/// Runs the binary with a clean environment plus `env`; returns (exit code, stdout + stderr).
fn herald(args: &[&str], env: &[(&str, String)]) -> (i32, String) {
    let out = Herald::new()
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn doctor_names_the_broken_key_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let table: &[(&str, &str)] = &[
        ("[server]\nlisten = \"nowhere\"\n", "server.listen"),
        (
            "[server]\nlisten = \"0.0.0.0:8080\"\n",
            "web.token", // public listen address without a token
        ),
        (
            "[llm]\nprovider = \"openai\"\nbase_url = \"not a url\"\nmodel = \"m\"\n",
            "llm.base_url",
        ),
        ("[llm]\nbase_ulr = \"http://x\"\n", "base_ulr"),
        ("[lanes]\nidle_secs = \"soon\"\n", "lanes.idle_secs"),
    ];
    for (i, (toml, key)) in table.iter().enumerate() {
        let file = dir.path().join(format!("bad{i}.toml"));
        std::fs::write(&file, toml).unwrap();
        let (code, out) = herald(&["doctor", "--config", file.to_str().unwrap()], &[]);
        assert_eq!(code, 2, "a configuration error exits 2: {toml}\n{out}");
        let line = out
            .lines()
            .find(|l| l.starts_with("✗ config:"))
            .unwrap_or_else(|| panic!("no failed config line for {toml:?}:\n{out}"));
        assert!(line.contains(key), "{key} not named in: {line}");
        assert!(out.contains("1 check failed"), "{out}");
    }
}

#[tokio::test]
async fn doctor_checks_store_model_and_adapters_without_printing_tokens() {
    init();
    let llm = FakeLlm::start().await;
    let telegram = FakeTelegram::start(TG_TOKEN).await;
    let discord = FakeDiscord::start(DC_TOKEN).await;
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().to_str().unwrap().to_string();
    let env = |tg: &str, dc: &str| {
        vec![
            ("HERALD_LLM__BASE_URL", llm.base_url()),
            ("HERALD_LLM__MODEL", "fake-model".to_string()),
            ("OPENAI_API_KEY", "sk-doctor-key-123".to_string()),
            ("TELEGRAM_BOT_TOKEN", tg.to_string()),
            ("HERALD_TELEGRAM__API_URL", telegram.url()),
            ("DISCORD_BOT_TOKEN", dc.to_string()),
            ("HERALD_DISCORD__API_URL", discord.api_url()),
            ("HERALD_DISCORD__RATELIMITER", "false".to_string()),
        ]
    };
    let good = env(TG_TOKEN, DC_TOKEN);

    // A fresh data folder: nothing created yet, and doctor does not create it either.
    let (code, out) = tokio::task::spawn_blocking({
        let (d, e) = (data_dir.clone(), good.clone());
        move || herald(&["doctor", "--data-dir", &d], &e)
    })
    .await
    .unwrap();
    // A fresh install before its first `serve` is not a failure: a `!` line says what comes.
    assert_eq!(code, 0, "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("! store: no database yet at ")
                && l.contains("`herald serve` (or `herald migrate`) creates it")),
        "{out}"
    );
    assert!(out.contains("all checks passed"), "{out}");
    assert!(!data.path().join("herald.db").exists());

    let (code, out) = herald(&["migrate", "--data-dir", &data_dir], &good);
    assert_eq!(code, 0, "{out}");
    let (code, out) = tokio::task::spawn_blocking({
        let (d, e) = (data_dir.clone(), good.clone());
        move || herald(&["doctor", "--data-dir", &d], &e)
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{out}");
    for want in [
        "✓ config:",
        "✓ store: sqlite reachable",
        "✓ migrations: all applied",
        "✓ model:",
        "lists fake-model",
        "✓ telegram: token accepted: bot @",
        "✓ discord: token accepted",
        "all checks passed",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }

    // Wrong adapter tokens: both fail, by name, and the tokens stay unprinted.
    let bad = env("4242:wrong-telegram-token", "wrong.discord.token");
    let (code, out) = tokio::task::spawn_blocking({
        let d = data_dir.clone();
        move || herald(&["doctor", "--data-dir", &d], &bad)
    })
    .await
    .unwrap();
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("✗ telegram:") && out.contains("telegram.token"),
        "{out}"
    );
    assert!(
        out.contains("✗ discord:") && out.contains("discord.token"),
        "{out}"
    );
    assert!(out.contains("2 checks failed"), "{out}");
    for secret in [
        "wrong-telegram-token",
        "wrong.discord.token",
        "sk-doctor-key-123",
    ] {
        assert!(!out.contains(secret), "{secret} printed:\n{out}");
    }
    telegram.shutdown().await;
}

/// getting-started: `cp config/herald.example.toml herald.toml`, then `OPENAI_BASE_URL` and
/// `OPENAI_MODEL`. The copied file must not beat the environment, and doctor says where each
/// model key came from.
#[tokio::test]
async fn a_copied_example_config_lets_the_environment_choose_the_model() {
    init();
    let llm = FakeLlm::start().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("herald.toml");
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/config/herald.example.toml"),
        &file,
    )
    .unwrap();
    let data = dir.path().join("data").to_str().unwrap().to_string();
    let env = vec![
        ("OPENAI_BASE_URL", llm.base_url()),
        ("OPENAI_MODEL", "fake-model".to_string()),
    ];
    let (code, out) = herald(&["migrate", "--data-dir", &data], &env);
    assert_eq!(code, 0, "{out}");
    let doctor = {
        let (f, d) = (file.to_str().unwrap().to_string(), data.clone());
        move |env: Vec<(&'static str, String)>| {
            let (f, d) = (f.clone(), d.clone());
            tokio::task::spawn_blocking(move || {
                herald(&["doctor", "--config", &f, "--data-dir", &d], &env)
            })
        }
    };
    let (code, out) = doctor(env.clone()).await.unwrap();
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("lists fake-model"), "{out}");
    let keys = out
        .lines()
        .find(|l| l.starts_with("✓ model keys:"))
        .unwrap_or_else(|| panic!("no model keys line:\n{out}"));
    for want in [
        // The example sets provider = "auto", which is the default.
        format!("provider auto → openai ({})", file.display()),
        format!("base_url {} (OPENAI_BASE_URL)", llm.base_url()),
        "model fake-model (OPENAI_MODEL)".to_string(),
        "api_key unset (default)".to_string(),
    ] {
        assert!(keys.contains(&want), "{want:?} not in {keys}");
    }

    // A key set in the file wins over OPENAI_*, and doctor names the file.
    std::fs::write(&file, "[llm]\nmodel = \"from-file\"\n").unwrap();
    let (_, out) = doctor(env).await.unwrap();
    assert!(
        out.contains(&format!("model from-file ({})", file.display())),
        "{out}"
    );
}

/// The systemd mistake: a config the service user may not read is "permission denied", not
/// "does not exist"; both exit 2 like every configuration error.
#[test]
fn an_unreadable_config_is_not_reported_as_missing() {
    let dir = tempfile::tempdir().unwrap();
    let locked = dir.path().join("etc");
    std::fs::create_dir(&locked).unwrap();
    let file = locked.join("herald.toml");
    std::fs::write(&file, "").unwrap();
    use std::os::unix::fs::PermissionsExt;
    // No one but root may enter (not even the owner, for a run as an ordinary user).
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // root reads everything: run as nobody, as the service's own user would.
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"));
    let run = |args: &[&str]| {
        let mut cmd = if root {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(env!("CARGO_BIN_EXE_herald"));
            c
        } else {
            Command::new(env!("CARGO_BIN_EXE_herald"))
        };
        let out = cmd
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .output()
            .expect("run herald");
        (
            out.status.code().unwrap_or(-1),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    let path = file.to_str().unwrap();
    for args in [
        vec!["--config", path, "serve", "--data-dir", "/nonexistent"],
        vec!["--config", path, "doctor"],
    ] {
        let (code, out) = run(&args);
        assert_eq!(code, 2, "{args:?}: {out}");
        assert!(out.contains("permission denied"), "{args:?}: {out}");
        assert!(!out.contains("does not exist"), "{args:?}: {out}");
    }
    let missing = dir.path().join("nope.toml");
    let (code, out) = run(&["--config", missing.to_str().unwrap(), "serve"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("does not exist"), "{out}");
    // So the temporary folder can be removed.
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// serve, migrate and doctor agree about a database a newer release migrated.
#[tokio::test]
async fn a_migration_unknown_to_this_binary_is_refused_by_every_command() {
    let data = tempfile::tempdir().unwrap();
    let d = data.path().to_str().unwrap().to_string();
    let (code, out) = herald(&["migrate", "--data-dir", &d], &[]);
    assert_eq!(code, 0, "{out}");
    let url = format!("sqlite://{}", data.path().join("herald.db").display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (99990101000000, 'from the future', 1, x'00', 0)",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    let want = "the database has migration 99990101000000 applied, which this binary does not know";
    let (code, out) = herald(&["migrate", "--data-dir", &d], &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(want), "migrate: {out}");
    let (code, out) = herald(&["doctor", "--data-dir", &d], &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("✗ migrations:") && l.contains(want)),
        "doctor: {out}"
    );
    let (code, out) = herald(&["serve", "--listen", "127.0.0.1:0", "--data-dir", &d], &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(want), "serve: {out}");
}

/// What stops `serve` stops doctor's config check too; an empty allowlist is worth a `!`.
#[test]
fn doctor_catches_the_discord_proxy_conflict_and_empty_allowlists() {
    let data = tempfile::tempdir().unwrap();
    let d = data.path().to_str().unwrap().to_string();
    let conflict = [
        ("DISCORD_BOT_TOKEN", "x.y.z".to_string()),
        ("HERALD_DISCORD__API_URL", "http://127.0.0.1:9".to_string()),
    ];
    let (code, out) = herald(&["doctor", "--data-dir", &d], &conflict);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("✗ config:") && l.contains("discord.ratelimiter")),
        "{out}"
    );
    let (code, out) = herald(
        &["serve", "--listen", "127.0.0.1:0", "--data-dir", &d],
        &conflict,
    );
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("discord.ratelimiter"), "{out}");

    let file = data.path().join("herald.toml");
    std::fs::write(
        &file,
        "[telegram]\ntoken = \"1:unreachable\"\napi_url = \"http://127.0.0.1:9\"\n\
         [discord]\ntoken = \"x.y.z\"\napi_url = \"http://127.0.0.1:9\"\nratelimiter = false\n\
         allowed_roles = [\"42\"]\n",
    )
    .unwrap();
    let (_, out) = herald(
        &[
            "doctor",
            "--config",
            file.to_str().unwrap(),
            "--data-dir",
            &d,
        ],
        &[],
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("! telegram access:") && l.contains("telegram.allowed_users")),
        "{out}"
    );
    assert!(
        !out.contains("discord access"),
        "a role is an allowlist:\n{out}"
    );
}
