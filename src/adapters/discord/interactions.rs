//! Slash (application) commands: registered on connect, answered inside Discord's 3-second
//! interaction deadline.
//!
//! The command itself is carried out by the core, exactly as if the person had typed `/new`
//! (the interaction becomes an ingested event), so the answer arrives in the channel through
//! the normal reply flow. Here we only defer at once (ephemeral "thinking…") and then replace
//! that with a short acknowledgement. This file must not run commands itself.

use serenity::all::{
    Command, CommandInteraction, Context, CreateCommand, CreateInteractionResponse,
    CreateInteractionResponseMessage, EditInteractionResponse, Http,
};

use super::super::Edge;
use super::inbound::{ingest_with_retry, Place};
use crate::domain::{ChatType, MessageEvent, MessageKind, Platform};
use crate::hooks::Authorizer;

/// (name, description, acknowledgement shown to the person who used it).
const COMMANDS: &[(&str, &str, &str)] = &[
    (
        "new",
        "Start a fresh session in this conversation",
        "Starting a new session; the confirmation follows in this channel.",
    ),
    (
        "stop",
        "Stop the answer in progress",
        "Stopping the answer in progress.",
    ),
    (
        "status",
        "Show this conversation's state",
        "Checking; the status follows in this channel.",
    ),
    (
        "wrapup",
        "Write a handoff note for the next session",
        "Writing a handoff note for the next session; it follows in this channel.",
    ),
];

pub(super) const NOT_ALLOWED: &str = "You are not allowed to use this bot.";
pub(super) const NOT_TAKEN: &str =
    "Sorry, I could not take that command right now. Please try again.";

pub(super) fn acknowledgement(name: &str) -> Option<&'static str> {
    COMMANDS.iter().find(|c| c.0 == name).map(|c| c.2)
}

/// Registers the global commands (a PUT: idempotent, replaces stale ones).
pub(super) async fn register(http: &Http) {
    let defs: Vec<CreateCommand> = COMMANDS
        .iter()
        .map(|(name, desc, _)| CreateCommand::new(*name).description(*desc))
        .collect();
    match Command::set_global_commands(http, defs).await {
        Ok(cmds) => tracing::info!(count = cmds.len(), "discord slash commands registered"),
        Err(e) => tracing::warn!(error = %e, "could not register discord slash commands"),
    }
}

/// The event an interaction stands for. Its id is prefixed so that it can never be taken for a
/// message id (the reply must not reference it).
pub(super) fn event_for(cmd: &CommandInteraction, place: Place) -> MessageEvent {
    let (chat_id, chat_type, thread_id) = match place {
        Place::Dm => (cmd.channel_id, ChatType::Dm, None),
        Place::Channel => (cmd.channel_id, ChatType::Group, None),
        Place::Thread { parent } => (parent, ChatType::Thread, Some(cmd.channel_id)),
    };
    let mut ev = MessageEvent::text(
        Platform::Discord,
        &chat_id.get().to_string(),
        &cmd.user.id.get().to_string(),
        &format!("/{}", cmd.data.name),
    );
    ev.chat_type = chat_type;
    ev.thread_id = thread_id.map(|t| t.get().to_string());
    ev.kind = MessageKind::Command;
    ev.platform_message_id = format!("interaction:{}", cmd.id.get());
    ev.sender_name = cmd
        .member
        .as_ref()
        .and_then(|m| m.nick.clone())
        .unwrap_or_else(|| cmd.user.display_name().to_string());
    ev.sender_roles = cmd
        .member
        .as_ref()
        .map(|m| m.roles.iter().map(|r| r.get().to_string()).collect())
        .unwrap_or_default();
    ev
}

/// First thing on an interaction, inside Discord's 3-second deadline: an ephemeral "thinking…".
pub(super) async fn defer(ctx: &Context, cmd: &CommandInteraction) {
    let defer =
        CreateInteractionResponse::Defer(CreateInteractionResponseMessage::new().ephemeral(true));
    if let Err(e) = cmd.create_response(&ctx.http, defer).await {
        // Past the deadline or a network failure: Discord shows "did not respond", but the
        // command is still carried out below.
        tracing::warn!(error = %e, command = %cmd.data.name, "could not defer a discord interaction");
    }
}

/// Hands the command to the core, then replaces the deferred answer with an acknowledgement.
pub(super) async fn finish(
    ctx: &Context,
    cmd: &CommandInteraction,
    place: Place,
    edge: &Edge,
    auth: &Authorizer,
) {
    let ev = event_for(cmd, place);
    let text = match acknowledgement(&cmd.data.name) {
        None => "Unknown command.",
        // The full check, as the core's auth hook makes it: senders approved through pairing
        // are allowed too.
        Some(_) if !auth.is_allowed_or_paired(&ev, &*edge.store).await => {
            // Still recorded: the core's auth hook drops it, as it does a typed message.
            ingest_with_retry(&edge.ingest, &ev).await;
            NOT_ALLOWED
        }
        Some(ack) => {
            if ingest_with_retry(&edge.ingest, &ev).await {
                ack
            } else {
                NOT_TAKEN
            }
        }
    };
    let edit = EditInteractionResponse::new().content(text);
    if let Err(e) = cmd.edit_response(&ctx.http, edit).await {
        tracing::warn!(error = %e, command = %cmd.data.name, "could not answer a discord interaction");
    }
}
