//! Names and bytes from outside (issue 25): lane ids and sender names that clean to the same
//! text stay two conversations and two memory folders; the memory tool refuses what its loader
//! would drop (control characters, separators) instead of saying "added"; and the real
//! binary's human log lines carry no raw control character from outside text.

use std::time::Duration;

use herald::app::App;
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::harness::{init, test_config, Client};
use herald_test_support::herald::Herald;
use serde_json::{json, Value};

fn session_of(system: &str) -> String {
    let at = system.find("Session: ").expect("a session line");
    system[at + 9..].split(' ').next().unwrap().to_string()
}

fn add_user_fact(content: &str) -> Step {
    Step::ToolCall(
        "memory".into(),
        json!({"action": "add", "target": "user", "content": content}).to_string(),
    )
}

#[tokio::test]
async fn names_that_clean_alike_get_their_own_session_and_memory_folder() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let app = App::start(test_config(&llm, &data)).await.unwrap();
    let client = Client::new(&app);
    let chat = |lane: &'static str, sender: &'static str| {
        let client = &client;
        async move {
            let (status, body) = client
                .chat_body(json!({"lane": lane, "text": "hi", "sender": sender}))
                .await;
            assert_eq!(status, 200, "{body}");
        }
    };

    chat("web:café", "ana").await;
    let first = session_of(&llm.requests()[0].system());
    chat("web:caf?", "ana").await;
    let second = session_of(&llm.requests()[1].system());
    assert_ne!(first, second, "web:café and web:caf? shared a session");

    llm.push(add_user_fact("Is José from Porto"));
    chat("web:j1", "josé").await;
    llm.push(add_user_fact("Is Jos from Ghent"));
    chat("web:j2", "jos?").await;
    let memory = data.path().join("memory");
    let read = |folder: &str| std::fs::read_to_string(memory.join(folder).join("USER.md")).unwrap();
    assert_eq!(read("web-jos_-ede189ff4a645f3f"), "- Is José from Porto\n");
    assert_eq!(read("web-jos_-053d328c9a042c91"), "- Is Jos from Ghent\n");
    // A name that needed no cleaning keeps its folder name byte for byte.
    llm.push(add_user_fact("Likes tea"));
    chat("web:ana", "ana").await;
    assert_eq!(read("web-ana"), "- Likes tea\n");
    app.shutdown().await;
}

#[tokio::test]
async fn the_memory_tool_refuses_control_characters_and_logs_never_carry_them_raw() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    // A hand-edited file with a terminal escape and a bell: the loader drops it and logs it.
    let folder = data.path().join("memory/web-eve");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("MEMORY.md"),
        "- kept fact\n- x\u{1b}[31mred\u{7}bell\n",
    )
    .unwrap();
    let log_path = data.path().join("herald.log");
    let mut child = Herald::serve_anywhere(data.path())
        .fake_model(&llm.base_url())
        .env("HERALD_LOG__FORMAT", "human")
        .env("HERALD_LOG__LEVEL", "info")
        .log_to(&log_path)
        .spawn();
    child.wait_ready(Duration::from_secs(30)).await;
    let client = Client::for_addr(&child.addr());
    let chat = |text: &'static str| {
        let client = &client;
        async move {
            let (status, body): (u16, Value) = client
                .chat_body(json!({"lane": "web:eve", "text": text, "sender": "eve"}))
                .await;
            assert_eq!(status, 200, "{body}");
        }
    };
    let hostile = [
        "a\u{1b}[31mb",
        "bell\u{7}",
        "nul\u{0}byte",
        "line\u{2028}sep",
        "para\u{2029}sep",
        "next\u{85}line",
    ];
    for (i, content) in hostile.iter().enumerate() {
        llm.push(Step::ToolCall(
            "memory".into(),
            json!({"action": "add", "target": "memory", "content": content}).to_string(),
        ));
        let n = llm.request_count();
        chat("remember this").await;
        let answer = llm.requests()[n + 1].last_tool_result();
        assert!(
            answer.starts_with("error: refused: the entry holds control characters"),
            "{i}: {answer}"
        );
    }
    let saved = std::fs::read_to_string(folder.join("MEMORY.md")).unwrap();
    assert_eq!(
        saved, "- kept fact\n- x\u{1b}[31mred\u{7}bell\n",
        "nothing added"
    );
    child.terminate();
    child.wait_exit(Duration::from_secs(30)).await;
    let bytes = std::fs::read(&log_path).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("memory entry left out"), "{text}");
    assert!(
        text.contains("x\\u{1b}[31mred\\u{7}bell"),
        "escaped: {text}"
    );
    for (byte, name) in [(0x1b_u8, "ESC"), (0x07, "BEL"), (0x00, "NUL")] {
        assert!(!bytes.contains(&byte), "a raw {name} in the log:\n{text}");
    }
}
