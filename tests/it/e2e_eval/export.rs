//! `herald export` of a conversation the core recorded, the exported case evaluated green on
//! the configuration that recorded it and red on one whose prompt changes the answer, the live
//! store untouched by either, and `herald replay` of it against a second model with deltas.

use std::path::Path;

use herald::app::App;
use herald::config::{self, LoadOptions};
use herald_test_support::fake_llm::{Billing, FakeLlm};
use herald_test_support::harness::{self, Client};
use herald_test_support::herald::write_config;

use super::{herald, text, PRICED};

/// Sessions of the live store as `herald sessions list` prints them.
fn sessions(config: &Path) -> String {
    let out = herald(config, &["sessions", "list"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exported_conversation_passes_on_its_prompt_fails_on_a_changed_one_and_replays() {
    harness::init();
    let llm = FakeLlm::start().await;
    llm.set_billing(Billing::Fixed(120));
    llm.answer_when_system("The favourite colour is blue.", "Your colour is blue.");
    llm.answer_when_system("The favourite colour is red.", "Your colour is red.");
    let live = tempfile::tempdir().unwrap();
    let people = "[[people]]\nname = \"zoe\"\nids = [\"telegram:4242777\"]\n\n";
    let prompt = |colour: &str| {
        format!(
            "[agent]\nsystem_message = \"The favourite colour is {colour}.\"\n\n{people}{PRICED}"
        )
    };
    let blue = write_config(live.path(), "127.0.0.1:0", &llm.base_url(), &prompt("blue"));
    // A real conversation, recorded by the core in the live store.
    let options = LoadOptions {
        file: Some(blue.clone()),
        data_dir: None,
        listen: None,
        use_env: false,
    };
    let app = App::start(config::load(&options).unwrap()).await.unwrap();
    let client = Client::new(&app);
    for words in [
        "what is my colour? mail me at ana@example.com",
        "4242777 asked the same",
    ] {
        let body = serde_json::json!({"lane": "web:ana", "text": words, "sender": "ana"});
        let (status, reply) = client.chat_body(body).await;
        assert_eq!(
            (status, reply["reply"].as_str()),
            (200, Some("Your colour is blue."))
        );
    }
    harness::quiet(app.store.as_ref()).await;
    app.shutdown().await;

    let case = live.path().join("case.toml");
    let out = herald(
        &blue,
        &["export", "web:ana", "--out", case.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let file = std::fs::read_to_string(&case).unwrap();
    assert!(
        file.contains("reference = \"Your colour is blue.\""),
        "{file}"
    );
    assert!(
        file.contains("reply_contains = [\"Your colour is blue.\"]"),
        "{file}"
    );
    assert!(file.contains("person = \"ana\""), "{file}");
    assert!(
        !file.contains("ana@example.com") && !file.contains("4242777"),
        "{file}"
    );
    assert!(file.contains("someone asked the same"), "{file}");

    let before = sessions(&blue);
    let green = herald(&blue, &["eval", case.to_str().unwrap()]);
    let table = text(&green.stdout);
    assert!(green.status.success(), "{table}\n{}", text(&green.stderr));
    assert!(table.contains("1 cases: 1 passed, 0 failed"), "{table}");
    assert_eq!(sessions(&blue), before, "an eval wrote to the live store");

    let elsewhere = tempfile::tempdir().unwrap();
    let red = write_config(
        elsewhere.path(),
        "127.0.0.1:0",
        &llm.base_url(),
        &prompt("red"),
    );
    let failed = herald(&red, &["eval", case.to_str().unwrap()]);
    let table = text(&failed.stdout);
    assert_eq!(failed.status.code(), Some(1), "{table}");
    assert!(
        table.contains("reply lacks \"Your colour is blue.\""),
        "{table}"
    );
    assert!(text(&failed.stderr).contains("herald: 1 of 1 cases failed"));

    // The same conversation against a second model that bills more.
    let second_llm = FakeLlm::start().await;
    second_llm.set_billing(Billing::Fixed(500));
    let second_dir = tempfile::tempdir().unwrap();
    let second = write_config(
        second_dir.path(),
        "127.0.0.1:0",
        &second_llm.base_url(),
        PRICED,
    );
    let out = herald(
        &second,
        &[
            "replay",
            "web:ana",
            "--store-config",
            blue.to_str().unwrap(),
        ],
    );
    let shown = text(&out.stdout);
    assert!(out.status.success(), "{shown}\n{}", text(&out.stderr));
    assert!(shown.contains("recorded: Your colour is blue."), "{shown}");
    assert!(
        shown.contains("new:      reply to: someone asked the same"),
        "{shown}"
    );
    assert_eq!(
        shown
            .matches("tokens in 120 → 500 (+380), cost 0.000136 USD → 0.000516 USD (+0.00038 USD)")
            .count(),
        2,
        "{shown}"
    );
    assert!(
        shown.contains("total: tokens in 240 → 1000 (+760)"),
        "{shown}"
    );
    assert_eq!(second_llm.request_count(), 2);
}
