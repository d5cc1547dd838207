//! Starting the real core against the fake Bot API and the fake model, for the Telegram tests
//! (`tests/it/e2e_telegram.rs` and its `durability` part): the fakes, the config and the app start
//! are the same in every test, so they are written once here.

use herald::app::App;
use herald::config::{Config, Secret};

use super::fake_llm::FakeLlm;
use super::fake_telegram::FakeTelegram;
use super::harness::{init, test_config};

pub const TOKEN: &str = "123456:TEST-token";
/// The one sender on the allowlist.
pub const USER: i64 = 1001;

/// A fresh fake Bot API, fake model and data folder (logging and TLS set up once).
pub async fn fakes() -> (FakeTelegram, FakeLlm, tempfile::TempDir) {
    init();
    (
        FakeTelegram::start(TOKEN).await,
        FakeLlm::start().await,
        tempfile::tempdir().expect("temp dir"),
    )
}

/// The test config with Telegram polling the fake, `USER` allowed, and a short poll timeout.
pub fn tg_config(tg: &FakeTelegram, llm: &FakeLlm, data: &tempfile::TempDir) -> Config {
    let mut c = test_config(llm, data);
    c.telegram.token = Some(Secret::new(tg.token()));
    c.telegram.api_url = tg.url().parse().expect("the fake's URL");
    c.telegram.allowed_users = vec![USER.to_string()];
    c.telegram.poll_timeout_secs = 1;
    c
}

/// Starts the core with [`tg_config`].
pub async fn start(tg: &FakeTelegram, llm: &FakeLlm, data: &tempfile::TempDir) -> App {
    App::start(tg_config(tg, llm, data))
        .await
        .expect("app starts")
}
