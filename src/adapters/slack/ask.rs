//! Approval questions on Slack: a Block Kit message (the question as plain text, then Approve
//! and Deny buttons whose `value` names the approval), built with slack-morphism's Block Kit
//! models. Closing it (`ask_closed`) replaces the blocks with none.
//!
//! The question is plain text: it quotes model-written arguments, which must never be read
//! as markup or mentions.

use serde_json::Value;
use slack_morphism::blocks::{
    SlackActionBlockElement, SlackActionsBlock, SlackBlock, SlackBlockButtonElement,
    SlackBlockPlainText, SlackBlockText, SlackSectionBlock,
};
use slack_morphism::SlackActionId;

use crate::delivery::{approval_button_data, Ask};

/// Slack's limit for a section's text.
const SECTION_LIMIT: usize = 3000;

pub fn question_blocks(ask: &Ask<'_>) -> Value {
    let text: String = ask.text.chars().take(SECTION_LIMIT).collect();
    let section = SlackSectionBlock {
        block_id: None,
        text: Some(SlackBlockText::Plain(SlackBlockPlainText {
            text,
            emoji: None,
        })),
        fields: None,
        accessory: None,
        expand: None,
    };
    let button = |label: &str, approve: bool| {
        SlackActionBlockElement::Button(SlackBlockButtonElement {
            action_id: Some(SlackActionId(format!(
                "herald_approval_{}",
                if approve { "yes" } else { "no" }
            ))),
            text: SlackBlockPlainText {
                text: label.to_string(),
                emoji: None,
            }
            .into(),
            url: None,
            value: Some(approval_button_data(ask.approval_id, approve)),
            style: None,
            confirm: None,
            accessibility_label: None,
        })
    };
    let actions = SlackActionsBlock {
        block_id: None,
        elements: vec![button("Approve", true), button("Deny", false)],
    };
    let blocks = vec![SlackBlock::Section(section), SlackBlock::Actions(actions)];
    serde_json::to_value(blocks).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::parse_approval_button;

    #[test]
    fn question_has_two_buttons_naming_the_approval() {
        let ask = Ask {
            chat_id: "C1",
            thread_id: Some("1700000000.000100"),
            approval_id: "abc123",
            text: "Run `rm -rf /tmp/x`? <@U1>",
        };
        let blocks = question_blocks(&ask);
        assert_eq!(blocks[0]["type"], "section");
        assert_eq!(blocks[0]["text"]["type"], "plain_text");
        assert_eq!(blocks[0]["text"]["text"], ask.text);
        let buttons = blocks[1]["elements"].as_array().expect("buttons");
        let answers: Vec<_> = buttons
            .iter()
            .map(|b| {
                assert_eq!(b["type"], "button");
                parse_approval_button(b["value"].as_str().unwrap()).unwrap()
            })
            .collect();
        assert_eq!(answers, [("abc123", true), ("abc123", false)]);
    }
}
