//! Approval buttons on Discord over serenity: the question carries Approve / Deny buttons, a
//! press answers with an ephemeral line, and only an allowed sender in the question's own
//! channel can answer. The tool is the real `skill_manage`, made to ask by
//! `tools.require_approval`.

use std::path::PathBuf;
use std::time::Duration;

use herald_test_support::fake_llm::Step;
use serde_json::{json, Value};

use super::{bounded, start, CHANNEL, DM, GUILD, STRANGER, USER, WAIT};

fn buttons(body: &Value) -> Option<(String, String)> {
    let row = &body["components"][0]["components"];
    Some((
        row[0]["custom_id"].as_str()?.to_string(),
        row[1]["custom_id"].as_str()?.to_string(),
    ))
}

#[tokio::test]
async fn a_discord_press_answers_only_from_an_allowed_sender_in_the_same_channel() {
    bounded("discord approvals", async {
        let skills = tempfile::tempdir().unwrap();
        let skills_dir: PathBuf = skills.path().to_path_buf();
        let env = start(|c| {
            c.agent.skills_dir = Some(skills_dir.clone());
            c.tools.require_approval = vec!["skill_manage".into()];
        })
        .await;
        let args = json!({"action": "create", "name": "dtriage",
            "description": "Sort bug reports", "body": "1. Label it."});
        env.llm
            .push(Step::ToolCall("skill_manage".into(), args.to_string()));
        env.fake
            .dispatch_message_create(DM, None, USER, "make a skill", false, None);
        env.fake.wait_for_sent(1, WAIT).await;
        let question = env.fake.sent_messages()[0].clone();
        assert_eq!(question.channel_id, DM);
        assert!(
            question.content.contains("skill_manage"),
            "{}",
            question.content
        );
        let (approve, _deny) = buttons(&question.body).expect("two buttons");
        let proposal = skills.path().join(".proposed/dtriage");

        // A stranger, and the right person pressing in another channel: both refused.
        env.fake
            .dispatch_button_press(DM, None, STRANGER, &[], question.message_id, &approve);
        env.fake.dispatch_button_press(
            CHANNEL,
            Some(GUILD),
            USER,
            &[],
            question.message_id,
            &approve,
        );
        let deadline = std::time::Instant::now() + WAIT;
        while env.fake.interaction_callbacks().len() < 2 {
            assert!(std::time::Instant::now() < deadline, "presses not answered");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for cb in env.fake.interaction_callbacks() {
            let data = cb.data.clone().unwrap_or_default();
            assert_eq!(cb.kind, 4, "a message response");
            assert_eq!(data["content"], "You cannot answer this request.");
            assert_eq!(data["flags"], 64, "ephemeral");
        }
        assert!(!proposal.exists());

        env.fake
            .dispatch_button_press(DM, None, USER, &[], question.message_id, &approve);
        let sent = env.sent_settled(2).await;
        assert_eq!(sent.len(), 2, "the question and one answer");
        assert_eq!(sent[1].content, "reply to: make a skill");
        assert!(proposal.exists(), "the approved call ran");
        let result = env.llm.requests()[1].last_tool_result();
        assert!(result.contains("herald skills approve dtriage"), "{result}");
        // The question was closed: new text, no buttons.
        let edits = env.fake.edits();
        let edit = edits.last().expect("the question was edited");
        assert_eq!(edit.message_id, question.message_id);
        assert!(edit.content.starts_with("✅ Approved"), "{}", edit.content);
        assert_eq!(edit.body["components"], json!([]));
        env.stop().await;
    })
    .await;
}
