//! Issue 25, the poison byte: a message, a model answer or a tool result holding U+0000 is
//! answered normally on both backends (Postgres refused it, and the worker retried the turn
//! forever, calling the model and re-running tools each time), and a store that keeps
//! refusing one event's turn ends it after `inbox.max_attempts` with a reply to the person,
//! runs no tool twice across those attempts, and lets the lane's next message through.

use std::path::Path;
use std::time::Duration;

use herald::app::App;
use herald::domain::LaneKey;
use herald::store::InboxStatus;
use herald_test_support::db::Db;
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::harness::{init, test_config, wait_until, Client, WebApp};
use herald_test_support::mcp::stdio_server;
use herald_test_support::on_each_backend;
use herald_test_support::promise::daemon::{herald_bin, Backend, Daemon, Spec};
use herald_test_support::promise::load::{Channel, WebChannel};

const POISON: &str = "poison\u{0}byte";

async fn a_nul_message_gets_a_normal_reply(db: Db) {
    let WebApp {
        llm,
        data: _data,
        app,
        client,
    } = WebApp::start(db).await;

    llm.push(Step::Reply("I read it: \u{0} (a NUL of my own).".into()));
    let (status, body) = client.chat("web:nul", POISON).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["reply"], "I read it: \u{FFFD} (a NUL of my own).",
        "{body}"
    );
    let transcript = client.transcript("web:nul").await;
    assert_eq!(transcript[0], ("user".into(), "poison\u{FFFD}byte".into()));

    // The lane is free: the next message is answered too.
    llm.push(Step::Reply("Next one.".into()));
    let (status, body) = client.chat("web:nul", "hello again").await;
    assert_eq!((status, body["reply"].as_str()), (200, Some("Next one.")));
    app.shutdown().await;
}

on_each_backend!(
    sqlite_a_nul_message_gets_a_normal_reply,
    postgres_a_nul_message_gets_a_normal_reply,
    a_nul_message_gets_a_normal_reply
);

fn calls(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .map(|s| s.lines().map(str::to_string).collect())
        .unwrap_or_default()
}

/// A database that refuses every transcript row of one message: the store answers, and says no.
const REFUSE_SQLITE: &str = "CREATE TRIGGER refuse_one BEFORE INSERT ON messages \
     WHEN NEW.content = 'refund order A-1001' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END";
const REFUSE_POSTGRES: &str = "CREATE FUNCTION refuse_one() RETURNS trigger AS $$ BEGIN \
     IF NEW.content = 'refund order A-1001' THEN RAISE EXCEPTION 'refused by the test'; END IF; \
     RETURN NEW; END $$ LANGUAGE plpgsql; \
     CREATE TRIGGER refuse_one BEFORE INSERT ON messages FOR EACH ROW EXECUTE FUNCTION refuse_one()";

async fn a_refused_turn_ends_in_a_reply_and_runs_no_tool_twice(db: Db) {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let calls_file = data.path().join("calls");
    let starts = data.path().join("starts");
    let mut config = test_config(&llm, &data);
    config.cron.enabled = false;
    config.inbox.max_attempts = 3;
    config.mcp.servers = vec![stdio_server(
        "shop",
        "normal",
        &[
            "--calls",
            &calls_file.display().to_string(),
            "--starts",
            &starts.display().to_string(),
        ],
    )];
    db.apply(&mut config);
    let app = App::start(config.clone()).await.unwrap();
    let client = Client::new(&app);
    wait_until("the shop lists its tools", Duration::from_secs(30), || {
        let ok = starts.exists();
        async move { ok }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sql = match db {
        Db::Sqlite => REFUSE_SQLITE,
        Db::Postgres(_) => REFUSE_POSTGRES,
    };
    db.execute(&config, sql).await;

    // Each attempt: the model looks the order up (a tool that needs no approval), then answers.
    for _ in 0..3 {
        llm.push(Step::ToolCall(
            "shop__lookup_order".into(),
            r#"{"id":"A-1001"}"#.into(),
        ));
        llm.push(Step::Reply("Order A-1001 is on its way.".into()));
    }
    let before = llm.request_count();
    let (status, body) = client.chat("web:refused", "refund order A-1001").await;
    assert_eq!(status, 200, "{body}");
    let reply = body["reply"].as_str().unwrap_or_default();
    assert!(
        reply.contains("could not save this conversation") && reply.contains("3 times"),
        "the person hears why there is no answer: {body}"
    );
    // Bounded: three attempts, two model calls each, then no more.
    assert_eq!(llm.request_count() - before, 6, "model calls");
    assert_eq!(
        calls(&calls_file),
        ["lookup_order"],
        "the tool ran on the first attempt only; the retries got its kept result"
    );
    let turns = app
        .store
        .turns(&LaneKey::new("web:refused"), 10)
        .await
        .unwrap();
    let inbox_id = turns[0].inbox_id.expect("the turn answered an event");
    let row = app.store.inbox_get(inbox_id).await.unwrap().unwrap();
    assert_eq!(row.status, InboxStatus::Dead);

    // The lane goes on.
    llm.push(Step::Reply("Anything else?".into()));
    let (status, body) = client.chat("web:refused", "thanks").await;
    assert_eq!(
        (status, body["reply"].as_str()),
        (200, Some("Anything else?"))
    );
    herald_test_support::harness::quiet(&*app.store).await;
    assert_eq!(calls(&calls_file).len(), 1, "no late run of the tool");
    // The refused attempts' turn rows are closed (the next start under the lease sweeps them,
    // which a start after a committed turn skips): none reads as a turn still running.
    let turns = app
        .store
        .turns(&LaneKey::new("web:refused"), 10)
        .await
        .unwrap();
    let open: Vec<_> = turns.iter().filter(|t| t.ended_at.is_none()).collect();
    assert!(turns.len() >= 4 && open.is_empty(), "{turns:#?}");
    app.shutdown().await;
}

on_each_backend!(
    sqlite_a_refused_turn_ends_in_a_reply_and_runs_no_tool_twice,
    postgres_a_refused_turn_ends_in_a_reply_and_runs_no_tool_twice,
    a_refused_turn_ends_in_a_reply_and_runs_no_tool_twice
);

/// The release binary on Postgres (skipped without `DATABASE_URL`): a web chat message holding
/// a NUL is answered, and the next one in the lane too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_binary_on_postgres_answers_a_nul_message() {
    let Ok(url) = std::env::var("DATABASE_URL") else {
        herald_test_support::skip_or_fail("DATABASE_URL not set");
        return;
    };
    herald_test_support::promise::init();
    let llm = FakeLlm::start().await;
    let backend = Backend::postgres(&url).await;
    let spec = Spec::new(&herald_bin(), "nul", &backend, &llm.base_url());
    let daemon = Daemon::start(&spec, 0).await;
    let web = WebChannel::new(vec![spec.base_url()]);
    llm.push(Step::Reply("Got it.".into()));
    let first = answer(&web, "nul-1", POISON).await;
    llm.push(Step::Reply("And this.".into()));
    let second = answer(&web, "nul-2", "and after it?").await;
    let log = daemon.log_tail();
    daemon.kill();
    backend.cleanup().await;
    let first = first.unwrap_or_else(|e| panic!("no answer to the NUL message: {e}\n{log}"));
    assert_eq!(
        (first.status.as_str(), first.reply.as_str()),
        ("done", "Got it."),
        "{log}"
    );
    let second = second.expect("the next message is answered");
    assert_eq!(second.reply, "And this.");
    assert!(
        !log.contains("0x00"),
        "no store error about the byte: {log}"
    );
}

/// Delivers (again, with the same client id, until answered or 30 s pass).
async fn answer(
    web: &WebChannel,
    client_id: &str,
    text: &str,
) -> Result<herald_test_support::promise::load::Answer, String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        match web.deliver("web:nul", client_id, text).await {
            Ok(a) if !a.status.is_empty() => return Ok(a),
            Ok(_) | Err(_) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await
            }
            Ok(a) => return Err(format!("unresolved: {}", a.reply)),
            Err(e) => return Err(e),
        }
    }
}
