//! Approval questions on Discord: a message with Approve / Deny buttons whose `custom_id`
//! names the approval, the press that answers it (a MESSAGE_COMPONENT interaction, answered
//! with an ephemeral line only the presser sees), and the edit that closes the question.
//!
//! The press is translated here and judged by the approval desk, which checks the chat and the
//! presser's authorization (user id or member roles) like a typed message.

use serenity::all::{
    ButtonStyle, ComponentInteraction, Context, CreateActionRow, CreateButton,
    CreateInteractionResponse, CreateInteractionResponseMessage, CreateMessage, EditMessage,
    MessageId,
};

use super::outbound::{allowed_mentions, classify, target_channel, DiscordOutbound};
use crate::delivery::{approval_button_data, parse_approval_button, Ask, SendError};
use crate::domain::Platform;
use crate::lanes::{Approvals, Press};

impl DiscordOutbound {
    pub(super) async fn ask_with_buttons(&self, ask: &Ask<'_>) -> Result<String, SendError> {
        let channel = target_channel(ask.chat_id, ask.thread_id)
            .ok_or_else(|| SendError::Permanent("the chat id is not a Discord channel".into()))?;
        let buttons = CreateActionRow::Buttons(vec![
            CreateButton::new(approval_button_data(ask.approval_id, true))
                .label("Approve")
                .style(ButtonStyle::Success),
            CreateButton::new(approval_button_data(ask.approval_id, false))
                .label("Deny")
                .style(ButtonStyle::Danger),
        ]);
        let msg = CreateMessage::new()
            .content(ask.text)
            .allowed_mentions(allowed_mentions(false))
            .components(vec![buttons]);
        channel
            .send_message(&*self.http, msg)
            .await
            .map(|m| m.id.get().to_string())
            .map_err(|e| classify(&e, self.rate_limit_wait))
    }

    /// Replaces the question with `text` and removes its buttons.
    pub(super) async fn close_question(
        &self,
        chat_id: &str,
        thread_id: Option<&str>,
        message_id: &str,
        text: &str,
    ) {
        let (Some(channel), Ok(id)) = (
            target_channel(chat_id, thread_id),
            message_id.parse::<u64>(),
        ) else {
            return;
        };
        let edit = EditMessage::new().content(text).components(vec![]);
        if let Err(e) = channel
            .edit_message(&*self.http, MessageId::new(id), edit)
            .await
        {
            tracing::debug!(error = %e, "approval question not closed");
        }
    }
}

/// The press a component interaction stands for, when it is one of our approval buttons.
pub(super) fn press_of(c: &ComponentInteraction) -> Option<Press> {
    let (id, approve) = parse_approval_button(&c.data.custom_id)?;
    Some(Press {
        approval_id: id.to_string(),
        approve,
        platform: Platform::named("discord"),
        // The channel or thread the button sits in; the desk matches either with the request.
        chat_id: c.channel_id.get().to_string(),
        sender_id: c.user.id.get().to_string(),
        sender_roles: c
            .member
            .as_ref()
            .map(|m| m.roles.iter().map(|r| r.get().to_string()).collect())
            .unwrap_or_default(),
    })
}

/// Answers a press: the desk decides, the presser alone sees the outcome.
pub(super) async fn answer(ctx: &Context, c: &ComponentInteraction, approvals: &Approvals) {
    let Some(press) = press_of(c) else {
        return;
    };
    let outcome = approvals.press(&press).await;
    let reply = CreateInteractionResponse::Message(
        CreateInteractionResponseMessage::new()
            .content(outcome.text())
            .ephemeral(true),
    );
    if let Err(e) = c.create_response(&ctx.http, reply).await {
        tracing::warn!(error = %e, "could not answer an approval button press");
    }
}
