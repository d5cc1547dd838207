//! Authorization: deny by default on chat platforms, per-platform allowlists of sender ids,
//! the local web chat allowed on loopback. A denied sender costs zero model calls and leaves
//! nothing in the transcript.

use std::collections::HashSet;

use async_trait::async_trait;

use super::{HookOutcome, PreDispatchHook};
use crate::config::Config;
use crate::domain::{MessageEvent, Platform};

/// The allowlist decision, shared by the auth hook and any hook that must re-check it (the
/// handoff trigger does).
#[derive(Debug, Clone, Default)]
pub struct Authorizer {
    telegram: HashSet<String>,
    telegram_all: bool,
    discord: HashSet<String>,
    discord_roles: HashSet<String>,
    discord_all: bool,
    /// Non-loopback web requests are authenticated by the bearer token at the HTTP layer.
    web_token_set: bool,
}

impl Authorizer {
    pub fn from_config(c: &Config) -> Authorizer {
        if c.telegram.allow_all_users && c.telegram.token.is_some() {
            tracing::warn!(
                "telegram.allow_all_users is on: anyone who finds the bot can use the agent"
            );
        }
        if c.discord.allow_all_users && c.discord.token.is_some() {
            tracing::warn!(
                "discord.allow_all_users is on: anyone who can message the bot can use the agent"
            );
        }
        Authorizer {
            telegram: c.telegram.allowed_users.iter().cloned().collect(),
            telegram_all: c.telegram.allow_all_users,
            discord: c.discord.allowed_users.iter().cloned().collect(),
            discord_roles: c.discord.allowed_roles.iter().cloned().collect(),
            discord_all: c.discord.allow_all_users,
            web_token_set: c.web.token.is_some(),
        }
    }

    pub fn is_allowed(&self, ev: &MessageEvent) -> bool {
        if ev.internal {
            return true;
        }
        match ev.platform {
            Platform::Web => ev.from_loopback || self.web_token_set,
            Platform::Telegram => self.telegram_all || self.telegram.contains(&ev.sender_id),
            Platform::Discord => {
                self.discord_all
                    || self.discord.contains(&ev.sender_id)
                    || ev
                        .sender_roles
                        .iter()
                        .any(|r| self.discord_roles.contains(r))
            }
            Platform::Cron => false,
        }
    }
}

pub struct AuthHook {
    auth: Authorizer,
}

impl AuthHook {
    pub fn new(auth: Authorizer) -> AuthHook {
        AuthHook { auth }
    }
}

#[async_trait]
impl PreDispatchHook for AuthHook {
    fn name(&self) -> &'static str {
        "auth"
    }

    async fn on_event(&self, ev: &MessageEvent) -> HookOutcome {
        if self.auth.is_allowed(ev) {
            HookOutcome::Continue
        } else {
            tracing::info!(platform = %ev.platform, sender = %ev.sender_id, "sender not allowed; event dropped");
            HookOutcome::Skip {
                reason: "unauthorized".into(),
                reply: None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn authorizer(toml: &str) -> Authorizer {
        Authorizer::from_config(&crate::config::from_toml(toml).unwrap())
    }

    #[test]
    fn auth_table() {
        let strict = authorizer("[telegram]\nallowed_users = [42]");
        let open = authorizer("[telegram]\nallow_all_users = true");
        let mut tg_42 = MessageEvent::text(Platform::Telegram, "1", "42", "hi");
        let tg_7 = MessageEvent::text(Platform::Telegram, "1", "7", "hi");
        let mut web_local = MessageEvent::text(Platform::Web, "a", "a", "hi");
        web_local.from_loopback = true;
        let web_remote = MessageEvent::text(Platform::Web, "a", "a", "hi");
        let discord = MessageEvent::text(Platform::Discord, "1", "42", "hi");
        let mut internal = MessageEvent::text(Platform::Telegram, "1", "7", "brief");
        internal.internal = true;
        assert!(strict.is_allowed(&tg_42));
        assert!(!strict.is_allowed(&tg_7));
        assert!(open.is_allowed(&tg_7));
        assert!(strict.is_allowed(&web_local));
        assert!(
            !strict.is_allowed(&web_remote),
            "remote web needs the token"
        );
        assert!(!strict.is_allowed(&discord), "deny by default");
        assert!(authorizer("[discord]\nallowed_users = [42]").is_allowed(&discord));
        let by_role = authorizer("[discord]\nallowed_roles = [900]");
        let mut member = discord.clone();
        assert!(!by_role.is_allowed(&member), "no roles, not listed");
        member.sender_roles = vec!["899".into(), "900".into()];
        assert!(by_role.is_allowed(&member), "one allowed role is enough");
        member.sender_roles = vec!["9000".into()];
        assert!(!by_role.is_allowed(&member), "exact role ids");
        assert!(strict.is_allowed(&internal));
        tg_42.sender_id = "420".into();
        assert!(!strict.is_allowed(&tg_42), "exact ids, no prefix match");
    }
}
