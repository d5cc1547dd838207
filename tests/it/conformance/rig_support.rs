//! What every conformance rig holds and does alike, whatever its platform: the real core with
//! the fake model and its data folder ([`Core`]), how long a rig waits for what a person
//! should see, and reading a press's answer from the fake's record of them.

use std::time::Duration;

use herald::app::App;
use herald::config::Config;
use herald_test_support::fake_llm::FakeLlm;
use herald_test_support::harness::{init, wait_for};
use tempfile::TempDir;

/// How long a rig waits for something a person should see.
pub const WAIT: Duration = Duration::from_secs(20);

/// The core a rig runs: the fake model, the real `App` and the folder it keeps its data in.
pub struct Core {
    llm: FakeLlm,
    app: App,
    _data: TempDir,
}

impl Core {
    /// Starts a fresh fake model, a data folder and the core on them: `config` is the rig's
    /// settings over the two (usually `harness::test_config` and its platform), then `tune`
    /// is the case's.
    pub async fn start(
        config: impl FnOnce(&FakeLlm, &TempDir) -> Config,
        tune: impl FnOnce(&mut Config),
    ) -> Core {
        init();
        let llm = FakeLlm::start().await;
        let data = tempfile::tempdir().expect("temp dir");
        let mut c = config(&llm, &data);
        tune(&mut c);
        let app = App::start(c).await.expect("herald starts");
        Core {
            llm,
            app,
            _data: data,
        }
    }

    pub fn llm(&self) -> &FakeLlm {
        &self.llm
    }

    pub fn app(&self) -> &App {
        &self.app
    }

    pub async fn stop(self) {
        self.app.shutdown().await;
    }
}

/// Waits for a press's answer: the first of the fake's `answers` (read again on each look)
/// past the `before` it held when the press was made, as `said` reads it.
pub async fn press_answer<T>(
    before: usize,
    answers: impl Fn() -> Vec<T>,
    said: impl Fn(&T) -> String,
) -> String {
    wait_for("the press to be answered", WAIT, async || {
        answers().get(before).map(&said)
    })
    .await
}
