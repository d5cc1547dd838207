//! `herald doctor` as an operator runs it: the real binary, its printed report and exit code.

mod support;

use std::process::Command;

use support::fake_discord::FakeDiscord;
use support::fake_llm::FakeLlm;
use support::fake_telegram::FakeTelegram;
use support::harness::init;

const TG_TOKEN: &str = "4242:doctor-telegram-token-xyz";
const DC_TOKEN: &str = "doctor.discord.token-abc";

/// Runs the binary with a clean environment plus `env`; returns (exit code, stdout + stderr).
fn herald(args: &[&str], env: &[(&str, String)]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("run herald");
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
        assert_eq!(code, 1, "{toml}\n{out}");
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
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("✗ store:") && out.contains("herald migrate"),
        "{out}"
    );
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
