//! Tests for session export/import round trips and OpenAI-format imports.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::domain::SessionId;
use crate::store::{MigrationStore, SqliteStore};

async fn store(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    let s = SqliteStore::connect(&format!("sqlite://{}/t.db", dir.path().display()), 2)
        .await
        .unwrap();
    s.migrate().await.unwrap();
    Arc::new(s)
}

/// What must survive a round trip: everything but ids, session ids and times.
fn comparable(jsonl: &str) -> Vec<Value> {
    jsonl
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            for k in [
                "id",
                "session_id",
                "created_at",
                "started_at",
                "lane",
                "model",
            ] {
                v.as_object_mut().unwrap().remove(k);
            }
            v
        })
        .collect()
}

#[tokio::test]
async fn export_then_import_keeps_every_message_and_flag() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let lease = store
        .lease_acquire("web:a", "me", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    let s = Session::new("orig", "web:a".into(), 1, "You are Herald.", "m");
    store.session_create(&lease, &s).await.unwrap();
    let mut call = NewMessage::new(Role::Assistant, "");
    call.tool_calls = vec![ToolCall {
        id: "c1".into(),
        name: "shell".into(),
        arguments: r#"{"cmd":"ls"}"#.into(),
    }];
    let mut result = NewMessage::new(Role::Tool, "a.txt\nexit 0");
    result.tool_call_id = Some("c1".into());
    result.tool_name = Some("shell".into());
    let mut user = NewMessage::new(Role::User, "list files");
    user.api_content = Some("list files\n[context]".into());
    let ids = store
        .append_messages(
            &lease,
            &"orig".into(),
            &[
                user,
                call,
                result,
                NewMessage::new(Role::Assistant, "one file"),
                NewMessage::new(Role::User, "oops"),
            ],
        )
        .await
        .unwrap();
    store
        .compact(&lease, &"orig".into(), &ids[..1], &[])
        .await
        .unwrap();
    store
        .messages_retract(&lease, &"orig".into(), &ids[4..])
        .await
        .unwrap();

    let exported = export_jsonl(store.as_ref(), "orig").await.unwrap();
    let file = dir.path().join("chat.jsonl");
    std::fs::write(&file, &exported).unwrap();
    let (new_id, n) = import_file(store.as_ref(), &file, None, &ProgressBar::hidden())
        .await
        .unwrap();
    assert_eq!(n, 5);
    let imported = store
        .session_get(&SessionId::from(&new_id))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(imported.lane, "import:chat");
    assert_eq!(imported.end_reason.as_deref(), Some("imported"));
    assert_eq!(imported.system_prompt, "You are Herald.");
    let again = export_jsonl(store.as_ref(), &new_id).await.unwrap();
    assert_eq!(comparable(&again), comparable(&exported));
    // Imported rows are searchable like any other (the retracted one is not).
    let hits = store
        .search(crate::store::SearchScope::AllLanes, "files", &[], 10)
        .await
        .unwrap();
    assert!(hits.iter().any(|h| h.session_id == new_id));
    assert!(store
        .search(crate::store::SearchScope::AllLanes, "oops", &[], 10)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn an_openai_message_list_with_tool_calls_imports() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let file = dir.path().join("other-agent.json");
    std::fs::write(
        &file,
        r#"{"messages": [
          {"role": "system", "content": "You are a helpful assistant."},
          {"role": "user", "content": [{"type": "text", "text": "What's the weather in Oslo?"}]},
          {"role": "assistant", "content": null, "tool_calls": [{"id": "call_9", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
          {"role": "tool", "tool_call_id": "call_9", "content": "{\"temp_c\": -3}"},
          {"role": "assistant", "content": "It is -3 °C in Oslo."}
        ]}"#,
    )
    .unwrap();
    let (id, n) = import_file(
        store.as_ref(),
        &file,
        Some("import:weather"),
        &ProgressBar::hidden(),
    )
    .await
    .unwrap();
    assert_eq!(n, 4);
    let s = store
        .session_get(&SessionId::from(&id))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (s.lane.as_str(), s.system_prompt.as_str()),
        ("import:weather", "You are a helpful assistant.")
    );
    let ms = store.messages(&SessionId::from(&id), false).await.unwrap();
    let roles: Vec<_> = ms.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
    assert_eq!(ms[0].content, "What's the weather in Oslo?");
    assert_eq!(
        ms[1].tool_calls,
        vec![ToolCall {
            id: "call_9".into(),
            name: "get_weather".into(),
            arguments: r#"{"city":"Oslo"}"#.into()
        }]
    );
    assert_eq!(ms[2].tool_call_id.as_deref(), Some("call_9"));
    assert_eq!(
        ms[2].tool_name.as_deref(),
        Some("get_weather"),
        "named after its call"
    );
    assert!(ms.iter().all(|m| m.active));
}

#[test]
fn unreadable_transcripts_say_where() {
    let table = [
        (
            "{\"role\": \"user\", \"content\": \"hi\"}\nnot json\n",
            "line 2",
        ),
        (
            "[{\"role\": \"wizard\", \"content\": \"x\"}]",
            "unknown role",
        ),
        ("[{\"role\": \"tool\", \"content\": \"x\"}]", "tool_call_id"),
        ("{\"model\": \"x\"}", "messages"),
    ];
    for (text, want) in table {
        let err = format!("{:#}", parse_transcript(text).unwrap_err());
        assert!(err.contains(want), "{text:?}: {err}");
    }
}
