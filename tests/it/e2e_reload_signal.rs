//! A SIGHUP while the daemon is still starting does not end it: the real binary, held inside
//! its start by a WhatsApp API that takes the start check's request and does not answer yet,
//! gets a SIGHUP there, lives on, and reloads once it is ready.

use std::time::Duration;

use herald_test_support::fake_llm::FakeLlm;
use herald_test_support::harness::{free_port, init};
use herald_test_support::herald::{write_config, Herald};

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_sighup_during_the_start_is_taken_once_ready() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    // The Graph API: accepts the start check's connection and answers nothing until dropped.
    let graph = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let graph_url = format!("http://{}/v21.0", graph.local_addr().unwrap());
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let section = format!(
        "[whatsapp]\naccess_token = \"wa-token\"\nphone_number_id = \"1555\"\n\
         app_secret = \"wa-app-secret\"\nverify_token = \"wa-verify\"\napi_url = {graph_url:?}\n"
    );
    let file = write_config(data.path(), &listen, &llm.base_url(), &section);
    let log = data.path().join("herald.log");
    let mut daemon = Herald::serve_config(&file, port).log_to(&log).spawn();

    let (held, _) = tokio::time::timeout(WAIT, graph.accept())
        .await
        .expect("the start check reaches the Graph API")
        .unwrap();
    assert!(!daemon.log().contains("herald is ready"), "still starting");
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &daemon.pid().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        daemon.try_wait().is_none(),
        "a SIGHUP while starting ended the daemon"
    );

    // The check fails for a reason that is not the token: the start goes on.
    drop(held);
    drop(graph);
    daemon.wait_ready(WAIT).await;
    daemon
        .wait_log("SIGHUP: reloading the configuration", WAIT)
        .await;
    daemon.wait_log("configuration reloaded", WAIT).await;
    assert!(daemon.try_wait().is_none(), "still running");
}
