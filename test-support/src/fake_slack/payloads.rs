//! The JSON shapes Slack sends: event callbacks and their events, block actions, slash
//! commands, files, users and conversations. Field names follow Slack's payloads (checked
//! against slack-morphism 2.31's models), so a client's parser meets what it would meet live.
//!
//! Must not: decide anything; each function only shapes what its caller passes in.

use serde_json::{json, Map, Value};

use super::state::{Channel, Kind, StoredFile, User};
use super::FakeSlackConfig;

/// A stored message rendered for history, made into the message event of `channel`.
pub(crate) fn in_channel(mut rendered: Value, channel: &str, kind: Kind, ts: &str) -> Value {
    if let Value::Object(o) = &mut rendered {
        o.insert("channel".into(), json!(channel));
        o.insert("event_ts".into(), json!(ts));
        o.insert("channel_type".into(), json!(kind.channel_type()));
    }
    rendered
}

/// The `app_mention` twin of a person's message that names the bot.
pub(crate) fn app_mention(rendered: &Value, channel: &str) -> Value {
    let mut o = Map::new();
    o.insert("type".into(), json!("app_mention"));
    for k in [
        "user",
        "text",
        "ts",
        "team",
        "client_msg_id",
        "thread_ts",
        "blocks",
        "files",
    ] {
        if let Some(v) = rendered.get(k) {
            o.insert(k.into(), v.clone());
        }
    }
    o.insert("channel".into(), json!(channel));
    o.insert("event_ts".into(), rendered["ts"].clone());
    Value::Object(o)
}

pub(crate) fn message_changed(
    channel: &str,
    kind: Kind,
    event_ts: &str,
    message: Value,
    previous: Value,
) -> Value {
    json!({
        "type": "message",
        "subtype": "message_changed",
        "hidden": true,
        "channel": channel,
        "channel_type": kind.channel_type(),
        "ts": event_ts,
        "event_ts": event_ts,
        "message": message,
        "previous_message": previous,
    })
}

pub(crate) fn message_deleted(
    channel: &str,
    kind: Kind,
    event_ts: &str,
    deleted_ts: &str,
    previous: Value,
) -> Value {
    json!({
        "type": "message",
        "subtype": "message_deleted",
        "hidden": true,
        "channel": channel,
        "channel_type": kind.channel_type(),
        "ts": event_ts,
        "event_ts": event_ts,
        "deleted_ts": deleted_ts,
        "previous_message": previous,
    })
}

/// The `event_callback` body that carries `event` (Socket Mode payload or Events API post).
pub(crate) fn event_callback(
    cfg: &FakeSlackConfig,
    event: Value,
    event_id: &str,
    event_time: i64,
) -> Value {
    json!({
        "token": cfg.verification_token,
        "team_id": cfg.team_id,
        "context_team_id": cfg.team_id,
        "context_enterprise_id": null,
        "api_app_id": cfg.app_id,
        "event": event,
        "type": "event_callback",
        "event_id": event_id,
        "event_time": event_time,
        "authorizations": [{
            "enterprise_id": null,
            "team_id": cfg.team_id,
            "user_id": cfg.bot_user_id,
            "is_bot": true,
            "is_enterprise_install": false,
        }],
        "is_ext_shared_channel": false,
        "event_context": format!("4-{event_id}"),
    })
}

/// Where one click happened and what was clicked.
pub(crate) struct Click<'a> {
    pub user: &'a str,
    pub user_name: &'a str,
    pub channel: &'a str,
    pub channel_name: &'a str,
    /// The clicked message as history renders it.
    pub message: Value,
    pub action_id: &'a str,
    pub block_id: &'a str,
    pub button_text: &'a str,
    pub value: &'a str,
    pub action_ts: &'a str,
    pub trigger_id: &'a str,
    pub response_url: &'a str,
}

pub(crate) fn block_actions(cfg: &FakeSlackConfig, c: Click<'_>) -> Value {
    let message_ts = c.message["ts"].clone();
    json!({
        "type": "block_actions",
        "user": {"id": c.user, "username": c.user_name, "name": c.user_name, "team_id": cfg.team_id},
        "api_app_id": cfg.app_id,
        "token": cfg.verification_token,
        "container": {
            "type": "message",
            "message_ts": message_ts,
            "channel_id": c.channel,
            "is_ephemeral": false,
        },
        "trigger_id": c.trigger_id,
        "team": {"id": cfg.team_id, "domain": cfg.team_domain},
        "enterprise": null,
        "is_enterprise_install": false,
        "channel": {"id": c.channel, "name": c.channel_name},
        "message": c.message,
        "state": {"values": {}},
        "response_url": c.response_url,
        "actions": [{
            "action_id": c.action_id,
            "block_id": c.block_id,
            "text": {"type": "plain_text", "text": c.button_text, "emoji": true},
            "value": c.value,
            "type": "button",
            "action_ts": c.action_ts,
        }],
    })
}

/// A slash command's fields; Socket Mode sends them as JSON, an HTTP post as a form.
pub(crate) struct Command<'a> {
    pub command: &'a str,
    pub text: &'a str,
    pub user: &'a str,
    pub user_name: &'a str,
    pub channel: &'a str,
    pub channel_name: &'a str,
    pub response_url: &'a str,
    pub trigger_id: &'a str,
}

pub(crate) fn slash_command(cfg: &FakeSlackConfig, c: Command<'_>) -> Value {
    json!({
        "token": cfg.verification_token,
        "team_id": cfg.team_id,
        "team_domain": cfg.team_domain,
        "channel_id": c.channel,
        "channel_name": c.channel_name,
        "user_id": c.user,
        "user_name": c.user_name,
        "command": c.command,
        "text": c.text,
        "api_app_id": cfg.app_id,
        "is_enterprise_install": "false",
        "response_url": c.response_url,
        "trigger_id": c.trigger_id,
    })
}

/// `filetype` and `pretty_type` from a file name's extension.
fn file_type(name: &str) -> (&'static str, &'static str) {
    let ext = name
        .rsplit('.')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    match ext.as_str() {
        "png" => ("png", "PNG"),
        "jpg" | "jpeg" => ("jpg", "JPEG"),
        "gif" => ("gif", "GIF"),
        "webp" => ("webp", "WebP"),
        "pdf" => ("pdf", "PDF"),
        "txt" => ("text", "Plain Text"),
        "md" => ("markdown", "Markdown (raw)"),
        "csv" => ("csv", "CSV"),
        "json" => ("json", "JSON"),
        "docx" => ("docx", "Word Document"),
        "ogg" | "oga" => ("ogg", "Ogg"),
        "mp3" => ("mp3", "MP3"),
        "m4a" => ("m4a", "M4A"),
        _ => ("binary", "Binary"),
    }
}

/// A file object as message events and `files.*` answers carry it.
pub(crate) fn file_json(cfg: &FakeSlackConfig, base: &str, f: &StoredFile) -> Value {
    let (filetype, pretty) = file_type(&f.name);
    let dir = format!("{base}/files-pri/{}-{}", cfg.team_id, f.id);
    json!({
        "id": f.id,
        "created": f.created,
        "timestamp": f.created,
        "name": f.name,
        "title": f.title,
        "mimetype": f.mimetype,
        "filetype": filetype,
        "pretty_type": pretty,
        "user": f.user,
        "user_team": cfg.team_id,
        "editable": false,
        "size": f.bytes.len(),
        "mode": "hosted",
        "is_external": false,
        "external_type": "",
        "is_public": false,
        "public_url_shared": false,
        "display_as_bot": false,
        "username": "",
        "url_private": format!("{dir}/{}", f.name),
        "url_private_download": format!("{dir}/download/{}", f.name),
        "permalink": format!("https://{}.slack.com/files/{}/{}/{}", cfg.team_domain, f.user, f.id, f.name),
        "has_rich_preview": false,
        "file_access": "visible",
    })
}

pub(crate) fn user_json(cfg: &FakeSlackConfig, id: &str, u: &User) -> Value {
    json!({
        "id": id,
        "team_id": cfg.team_id,
        "name": u.name,
        "deleted": false,
        "real_name": u.real_name,
        "tz": "Europe/London",
        "tz_label": "Greenwich Mean Time",
        "tz_offset": 0,
        "profile": {
            "real_name": u.real_name,
            "real_name_normalized": u.real_name,
            "display_name": u.name,
            "display_name_normalized": u.name,
            "team": cfg.team_id,
        },
        "is_admin": false,
        "is_owner": false,
        "is_bot": u.is_bot,
        "is_app_user": false,
        "updated": 1_700_000_000,
    })
}

pub(crate) fn channel_json(c: &Channel) -> Value {
    let mut o = json!({
        "id": c.id,
        "created": c.created,
        "is_archived": false,
        "is_org_shared": false,
        "is_shared": false,
        "is_ext_shared": false,
        "context_team_id": null,
    });
    let extra = match c.kind {
        Kind::Im => json!({
            "is_im": true,
            "is_channel": false,
            "is_group": false,
            "is_mpim": false,
            "is_private": true,
            "user": c.user,
            "is_user_deleted": false,
        }),
        kind => json!({
            "name": c.name,
            "name_normalized": c.name,
            "is_channel": kind == Kind::Public,
            "is_group": kind == Kind::Private,
            "is_im": false,
            "is_mpim": kind == Kind::Mpim,
            "is_private": kind != Kind::Public,
            "is_general": false,
            "is_member": c.bot_member,
            "topic": {"value": "", "creator": "", "last_set": 0},
            "purpose": {"value": "", "creator": "", "last_set": 0},
        }),
    };
    if let (Value::Object(o), Value::Object(e)) = (&mut o, extra) {
        o.extend(e);
    }
    o
}
