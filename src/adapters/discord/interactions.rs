//! Slash (application) commands: registered on connect, answered inside Discord's 3-second
//! interaction deadline.
//!
//! The command itself is carried out by the core, exactly as if the person had typed `/new`
//! (the interaction becomes an ingested event), and its answer goes through the normal reply
//! flow. Here we only defer at once (ephemeral "thinking…") and remember the interaction's
//! token, so that the outbox delivers the answer by editing that deferred response: one
//! answer, not an acknowledgement plus a channel message. A token lives 15 minutes and in
//! memory only; a reply without one (after a restart, or sent by another replica) goes to the
//! channel. This file must not run commands itself.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serenity::all::{
    ApplicationId, Command, CommandInteraction, Context, CreateCommand, CreateInteractionResponse,
    CreateInteractionResponseMessage, EditInteractionResponse, Http,
};

use super::super::Edge;
use super::inbound::{ingest_with_retry, Place};
use crate::domain::{ChatType, MessageEvent, MessageKind, Origin, Platform};
use crate::hooks::Authorizer;

/// (name, description).
const COMMANDS: &[(&str, &str)] = &[
    ("new", "Start a fresh session in this conversation"),
    ("stop", "Stop the answer in progress"),
    ("status", "Show this conversation's state"),
    ("usage", "Show what you have spent"),
    ("wrapup", "Write a handoff note for the next session"),
];

/// How long an interaction token is used: Discord accepts edits for 15 minutes.
const TOKEN_LIFE: Duration = Duration::from_secs(14 * 60);

/// Tokens of deferred interactions, by the `interaction:<id>` their event and reply carry.
#[derive(Default)]
pub struct InteractionTokens(Mutex<HashMap<String, Deferred>>);

/// A deferred interaction the answer may still edit.
#[derive(Clone)]
pub(super) struct Deferred {
    pub token: String,
    pub application: ApplicationId,
    at: Instant,
}

impl InteractionTokens {
    fn put(&self, key: String, token: String, application: ApplicationId) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, d| d.at.elapsed() < TOKEN_LIFE);
        map.insert(
            key,
            Deferred {
                token,
                application,
                at: Instant::now(),
            },
        );
    }

    /// The live interaction a reply answers (by the `reply_to` of its outbox row).
    pub(super) fn get(&self, reply_to: &str) -> Option<Deferred> {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.get(reply_to)
            .filter(|d| d.at.elapsed() < TOKEN_LIFE)
            .cloned()
    }
}

pub(super) const NOT_ALLOWED: &str = "You are not allowed to use this bot.";
pub(super) const NOT_TAKEN: &str =
    "Sorry, I could not take that command right now. Please try again.";

fn is_known(name: &str) -> bool {
    COMMANDS.iter().any(|c| c.0 == name)
}

/// Registers the global commands (a PUT: idempotent, replaces stale ones).
pub(super) async fn register(http: &Http) {
    let defs: Vec<CreateCommand> = COMMANDS
        .iter()
        .map(|(name, desc)| CreateCommand::new(*name).description(*desc))
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
        Platform::named("discord"),
        &chat_id.get().to_string(),
        &cmd.user.id.get().to_string(),
        &format!("/{}", cmd.data.name),
    );
    ev.chat_type = chat_type;
    ev.thread_id = thread_id.map(|t| t.get().to_string());
    ev.origin = Origin::person(MessageKind::Command);
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

/// First thing on an interaction, inside Discord's 3-second deadline: an ephemeral "thinking…",
/// whose token is kept for the answer.
pub(super) async fn defer(ctx: &Context, cmd: &CommandInteraction, tokens: &InteractionTokens) {
    let defer =
        CreateInteractionResponse::Defer(CreateInteractionResponseMessage::new().ephemeral(true));
    if let Err(e) = cmd.create_response(&ctx.http, defer).await {
        // Past the deadline or a network failure: Discord shows "did not respond", but the
        // command is still carried out below.
        tracing::warn!(error = %e, command = %cmd.data.name, "could not defer a discord interaction");
        return;
    }
    tokens.put(
        format!("interaction:{}", cmd.id.get()),
        cmd.token.clone(),
        cmd.application_id,
    );
}

/// Hands the command to the core, whose answer edits the deferred response; answers here only
/// when the core will not (unknown command, sender not allowed, not stored).
pub(super) async fn finish(
    ctx: &Context,
    cmd: &CommandInteraction,
    place: Place,
    edge: &Edge,
    auth: &Authorizer,
) {
    let ev = event_for(cmd, place);
    let text = if !is_known(&cmd.data.name) {
        "Unknown command."
    } else if !auth.is_allowed_or_paired(&ev, &*edge.store).await {
        // The full check, as the core's auth hook makes it: senders approved through pairing
        // are allowed too. Still recorded: the core's auth hook drops it, as it does a typed
        // message.
        ingest_with_retry(&edge.ingest, &ev).await;
        NOT_ALLOWED
    } else if ingest_with_retry(&edge.ingest, &ev).await {
        return;
    } else {
        NOT_TAKEN
    };
    let edit = EditInteractionResponse::new().content(text);
    if let Err(e) = cmd.edit_response(&ctx.http, edit).await {
        tracing::warn!(error = %e, command = %cmd.data.name, "could not answer a discord interaction");
    }
}
