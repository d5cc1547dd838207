//! JSON bodies shaped exactly as serenity 0.12.5 deserializes them.
//!
//! serenity drops a gateway dispatch it cannot parse with only a DEBUG log (the handler never
//! runs), so every required field of its models must be present here. The field lists below were
//! read from serenity's model structs; widen them only by checking those structs again. Nothing
//! here touches shared state.

use serde_json::{json, Value};

/// The bot user's id; also the application id, as for most real bots.
pub const BOT_USER_ID: u64 = 1000;
pub const BOT_USERNAME: &str = "herald-fake";

/// What Discord grants a bot without boosts (25 MiB); serenity requires the field on interactions.
const ATTACHMENT_SIZE_LIMIT: u64 = 26_214_400;

pub fn now_timestamp() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

pub fn user(id: u64) -> Value {
    let (name, bot) = if id == BOT_USER_ID {
        (BOT_USERNAME.to_string(), true)
    } else {
        (format!("user{id}"), false)
    };
    json!({
        "id": id.to_string(),
        "username": name,
        "discriminator": "0",
        "global_name": null,
        "avatar": null,
        "bot": bot,
    })
}

pub struct MessageParts<'a> {
    pub id: u64,
    pub channel_id: u64,
    pub guild_id: Option<u64>,
    pub author_id: u64,
    pub content: &'a str,
    pub mentions: Vec<Value>,
    /// `(message_id, the referenced message if known)`.
    pub reference: Option<(u64, Option<Value>)>,
}

pub fn message(p: MessageParts<'_>) -> Value {
    let (kind, reference, referenced) = match p.reference {
        // type 19 is a reply; Discord sends `referenced_message: null` when the target is gone.
        Some((id, target)) => (
            19,
            json!({
                "message_id": id.to_string(),
                "channel_id": p.channel_id.to_string(),
                "guild_id": p.guild_id.map(|g| g.to_string()),
            }),
            target.unwrap_or(Value::Null),
        ),
        None => (0, Value::Null, Value::Null),
    };
    let mut m = json!({
        "id": p.id.to_string(),
        "channel_id": p.channel_id.to_string(),
        "author": user(p.author_id),
        "content": p.content,
        "timestamp": now_timestamp(),
        "edited_timestamp": null,
        "tts": false,
        "mention_everyone": false,
        "mentions": p.mentions,
        "mention_roles": [],
        "attachments": [],
        "embeds": [],
        "pinned": false,
        "type": kind,
        "flags": 0,
    });
    if !reference.is_null() {
        m["message_reference"] = reference;
        m["referenced_message"] = referenced;
    }
    if let Some(g) = p.guild_id {
        m["guild_id"] = json!(g.to_string());
    }
    m
}

pub fn ready(session_id: &str, resume_url: &str, shard: [u64; 2]) -> Value {
    json!({
        "v": 10,
        "user": user(BOT_USER_ID),
        "guilds": [],
        "session_id": session_id,
        "resume_gateway_url": resume_url,
        "shard": shard,
        "application": { "id": BOT_USER_ID.to_string(), "flags": 0 },
    })
}

pub fn application_info() -> Value {
    json!({
        "id": BOT_USER_ID.to_string(),
        "name": BOT_USERNAME,
        "icon": null,
        "description": "",
        "bot_public": false,
        "bot_require_code_grant": false,
        "owner": user(1),
        "verify_key": "00",
        "team": null,
        "flags": 0,
    })
}

/// A guild member with no roles; `joined_at` is required by serenity's `Member`.
pub fn member(user_id: u64) -> Value {
    json!({
        "user": user(user_id),
        "roles": [],
        "joined_at": now_timestamp(),
        "deaf": false,
        "mute": false,
        "flags": 0,
    })
}

pub struct InteractionParts<'a> {
    pub id: u64,
    pub token: &'a str,
    pub command_id: u64,
    pub channel_id: u64,
    pub guild_id: Option<u64>,
    pub user_id: u64,
    pub command: &'a str,
    pub string_options: &'a [(&'a str, &'a str)],
}

/// An APPLICATION_COMMAND interaction (type 2) for a chat-input slash command.
pub fn interaction(p: InteractionParts<'_>) -> Value {
    let options: Vec<Value> = p
        .string_options
        .iter()
        .map(|(name, value)| json!({"name": name, "type": 3, "value": value}))
        .collect();
    let mut i = json!({
        "id": p.id.to_string(),
        "application_id": BOT_USER_ID.to_string(),
        "type": 2,
        "data": {
            "id": p.command_id.to_string(),
            "name": p.command,
            "type": 1,
            "options": options,
        },
        "channel_id": p.channel_id.to_string(),
        "token": p.token,
        "version": 1,
        "app_permissions": "0",
        "locale": "en-US",
        "entitlements": [],
        "authorizing_integration_owners": {},
        "attachment_size_limit": ATTACHMENT_SIZE_LIMIT,
    });
    match p.guild_id {
        Some(g) => {
            i["guild_id"] = json!(g.to_string());
            i["guild_locale"] = json!("en-US");
            i["member"] = member(p.user_id);
            i["context"] = json!(0);
        }
        None => {
            i["user"] = user(p.user_id);
            i["context"] = json!(1);
        }
    }
    i
}

/// A guild text channel (type 0) or public thread (type 11, with `parent_id`).
pub fn channel(id: u64, guild_id: u64, name: &str, parent_id: Option<u64>) -> Value {
    let mut c = json!({
        "id": id.to_string(),
        "guild_id": guild_id.to_string(),
        "name": name,
        "type": if parent_id.is_some() { 11 } else { 0 },
        "position": 0,
        "permission_overwrites": [],
        "nsfw": false,
        "flags": 0,
    });
    if let Some(parent) = parent_id {
        c["parent_id"] = json!(parent.to_string());
        c["owner_id"] = json!(BOT_USER_ID.to_string());
        c["thread_metadata"] = json!({
            "archived": false,
            "auto_archive_duration": 1440,
            "archive_timestamp": now_timestamp(),
            "locked": false,
        });
    }
    c
}

/// GUILD_CREATE with no roles (a role without the `colors` object drops the whole event).
pub fn guild_create(guild_id: u64, channels: Vec<Value>, threads: Vec<Value>) -> Value {
    json!({
        "id": guild_id.to_string(),
        "name": format!("guild{guild_id}"),
        "icon": null,
        "icon_hash": null,
        "splash": null,
        "discovery_splash": null,
        "owner_id": "1",
        "verification_level": 0,
        "default_message_notifications": 0,
        "explicit_content_filter": 0,
        "roles": [],
        "emojis": [],
        "features": [],
        "mfa_level": 0,
        "application_id": null,
        "system_channel_id": null,
        "system_channel_flags": 0,
        "rules_channel_id": null,
        "vanity_url_code": null,
        "description": null,
        "banner": null,
        "premium_tier": 0,
        "preferred_locale": "en-US",
        "public_updates_channel_id": null,
        "nsfw_level": 0,
        "stickers": [],
        "premium_progress_bar_enabled": false,
        "joined_at": now_timestamp(),
        "large": false,
        "unavailable": false,
        "member_count": 1,
        "voice_states": [],
        "members": [member(BOT_USER_ID)],
        "channels": channels,
        "threads": threads,
        "presences": [],
        "stage_instances": [],
        "guild_scheduled_events": [],
        "safety_alerts_channel_id": null,
    })
}

/// Discord's 429 body; `retry_after` is in seconds (fractional).
pub fn rate_limited(retry_after_secs: f64) -> Value {
    json!({"message": "You are being rate limited.", "retry_after": retry_after_secs, "global": false})
}

pub fn error(code: u64, message: &str) -> Value {
    json!({"message": message, "code": code})
}

/// A MESSAGE_COMPONENT interaction (type 3): a button with `custom_id` pressed under `message`.
pub fn component_interaction(
    p: InteractionParts<'_>,
    roles: &[u64],
    message: Value,
    custom_id: &str,
) -> Value {
    let mut i = interaction(p);
    i["type"] = json!(3);
    i["data"] = json!({"custom_id": custom_id, "component_type": 2});
    i["message"] = message;
    if i.get("member").is_some() {
        i["member"]["roles"] = json!(roles.iter().map(|r| r.to_string()).collect::<Vec<_>>());
    }
    i
}
