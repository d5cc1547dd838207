//! Authorization: deny by default on chat platforms, per-platform allowlists of sender ids
//! (from config, plus senders an operator approved through pairing), the local web chat
//! allowed on loopback. A denied sender costs zero model calls and leaves nothing in the
//! transcript; an unknown sender in a private chat is offered a one-time pairing code.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use rand::Rng;

use super::{HookOutcome, PreDispatchHook};
use crate::config::{spec, specs, Access, Admit, Config, PairingConfig};
use crate::domain::{ChatType, MessageEvent, Platform};
use crate::store::{PairingAsk, PairingOutcome, Store};

/// The allowlist decision, shared by the auth hook and any hook that must re-check it (the
/// handoff trigger does).
///
/// Every clone shares one set of rules, which a configuration reload replaces in place
/// ([`Authorizer::replace`]): each check reads the rules current at that moment.
#[derive(Debug, Clone, Default)]
pub struct Authorizer {
    rules: Arc<std::sync::RwLock<Arc<Rules>>>,
}

#[derive(Debug, Default)]
struct Rules {
    /// The allowlists of the platforms that admit people by id, by platform.
    lists: HashMap<Platform, Allowlist>,
    /// Non-loopback web requests are authenticated by the bearer token at the HTTP layer.
    web_token_set: bool,
    /// `approvals.admins` as identities (`telegram:<id>`): may stop and reset for a group.
    admins: HashSet<String>,
}

/// One platform's [`Access`] as sets.
#[derive(Debug, Clone, Default)]
struct Allowlist {
    all: bool,
    users: HashSet<String>,
    roles: HashSet<String>,
}

impl Authorizer {
    pub fn from_config(c: &Config) -> Authorizer {
        let mut lists = HashMap::new();
        for spec in specs() {
            if !matches!(spec.admit, Admit::Allowlist { .. }) {
                continue;
            }
            let Access { all, users, roles } = (spec.access)(c);
            if all && (spec.configured)(c) {
                tracing::warn!(platform = %spec.name,
                    "{}.allow_all_users is on: anyone who can message the bot can use the agent",
                    spec.name);
            }
            let list = Allowlist {
                all,
                users: users.into_iter().collect(),
                roles: roles.into_iter().collect(),
            };
            lists.insert(spec.name, list);
        }
        Authorizer {
            rules: Arc::new(std::sync::RwLock::new(Arc::new(Rules {
                lists,
                web_token_set: c.web.token.is_some(),
                admins: admin_identities(c),
            }))),
        }
    }

    /// Replaces the rules of this authorizer and every clone with those of `c` (a reload).
    pub fn replace(&self, c: &Config) {
        let fresh = Authorizer::from_config(c).rules();
        *self.rules.write().expect("auth rules lock") = fresh;
    }

    fn rules(&self) -> Arc<Rules> {
        self.rules.read().expect("auth rules lock").clone()
    }

    /// Whether `ev` came from a chat several people share, where `/stop` and `/new` act only
    /// on the sender's own turn and session unless [`Authorizer::is_admin`].
    pub fn in_group(ev: &MessageEvent) -> bool {
        ev.chat_type != ChatType::Dm
    }

    /// The sender of `ev` is listed in `approvals.admins` (by identity or `[[people]]` name).
    /// The platform's own chat admins are not known here: events do not carry them.
    pub fn is_admin(&self, ev: &MessageEvent) -> bool {
        self.rules().admins.contains(&ev.person().to_string())
    }

    pub fn is_allowed(&self, ev: &MessageEvent) -> bool {
        if ev.is_internal() {
            return true;
        }
        let rules = self.rules();
        match spec(ev.platform).map(|s| s.admit) {
            Some(Admit::Local) => ev.from_loopback() || rules.web_token_set,
            Some(Admit::Allowlist { .. }) => rules.lists.get(&ev.platform).is_some_and(|l| {
                l.all
                    || l.users.contains(&ev.sender_id)
                    || ev.sender_roles.iter().any(|r| l.roles.contains(r))
            }),
            // Only the API's routes write these, behind their key guard (`http/openai/`).
            Some(Admit::Keyed) => true,
            Some(Admit::Never) | None => false,
        }
    }
}

/// `approvals.admins` with each `[[people]]` name replaced by its identities.
fn admin_identities(c: &Config) -> HashSet<String> {
    let mut out = HashSet::new();
    for a in &c.approvals.admins {
        match c.people.iter().find(|p| &p.name == a) {
            Some(p) => out.extend(p.ids.iter().cloned()),
            None => {
                out.insert(a.clone());
            }
        }
    }
    out
}

impl Authorizer {
    /// Whether `platform` lets people in by a role list, which only a message carries: a
    /// check without a message (a cron job's owner) cannot tell them apart.
    pub fn decides_by_roles(&self, platform: Platform) -> bool {
        self.rules()
            .lists
            .get(&platform)
            .is_some_and(|l| !l.all && !l.roles.is_empty())
    }

    /// The config allowlist, then the senders approved through pairing. A store error counts
    /// as "not approved" (and is logged): authorization fails closed.
    pub async fn is_allowed_or_paired(&self, ev: &MessageEvent, store: &dyn Store) -> bool {
        if self.is_allowed(ev) {
            return true;
        }
        if !pairs(ev.platform) {
            return false;
        }
        match store
            .sender_approved(ev.platform.as_str(), &ev.sender_id)
            .await
        {
            Ok(approved) => approved,
            Err(e) => {
                tracing::error!(error = %e, "cannot read approved senders; denying");
                false
            }
        }
    }
}

/// The platform offers pairing codes to unknown senders (and so has paired senders).
fn pairs(p: Platform) -> bool {
    spec(p).is_some_and(|s| s.admit == Admit::Allowlist { pairing: true })
}

pub struct AuthHook {
    auth: Authorizer,
    store: Arc<dyn Store>,
    pairing: PairingConfig,
}

impl AuthHook {
    pub fn new(auth: Authorizer, store: Arc<dyn Store>, pairing: PairingConfig) -> AuthHook {
        AuthHook {
            auth,
            store,
            pairing,
        }
    }

    /// Offers a pairing code to an unknown sender in a private chat.
    async fn pairing_reply(&self, ev: &MessageEvent) -> Option<String> {
        if !self.pairing.enabled || ev.chat_type != ChatType::Dm || !pairs(ev.platform) {
            return None;
        }
        let code = new_code();
        let outcome = self
            .store
            .pairing_request(&PairingAsk {
                platform: ev.platform.as_str(),
                sender_id: &ev.sender_id,
                sender_name: &ev.sender_name,
                chat_id: &ev.chat_id,
                new_code: &code,
                ttl_ms: self.pairing.code_ttl_secs as i64 * 1000,
                remind_every_ms: self.pairing.remind_every_secs as i64 * 1000,
                max_pending: self.pairing.max_pending,
            })
            .await;
        let platform = ev.platform.as_str();
        let issued = match outcome {
            Ok(PairingOutcome::IssuedEvicting {
                code,
                evicted_sender,
                evicted_code,
            }) => {
                tracing::warn!(platform, sender = %ev.sender_id, evicted_sender = %evicted_sender,
                    evicted_code = %evicted_code, max_pending = self.pairing.max_pending,
                    "pairing codes at pairing.max_pending: the oldest pending code was evicted for a new sender");
                metrics::counter!("herald_pairing_evictions_total", "platform" => platform.to_string())
                    .increment(1);
                Ok(PairingOutcome::Issued(code))
            }
            other => other,
        };
        match issued {
            Ok(PairingOutcome::Issued(code)) => {
                tracing::info!(platform, sender = %ev.sender_id, "pairing code issued");
                metrics::counter!("herald_pairing_codes_total", "platform" => platform.to_string())
                    .increment(1);
                Some(format!(
                    "Hi! I don't know you yet. Your pairing code is {code}. Ask the operator to run \
                     `herald pairing approve {platform} {code}`; the code is valid for {} minutes. \
                     You will hear from me when you are approved, and I will answer this message then.",
                    self.pairing.code_ttl_secs / 60
                ))
            }
            Ok(PairingOutcome::Pending { code, remind: true }) => Some(format!(
                "Your pairing code {code} is still waiting for the operator's approval."
            )),
            Ok(PairingOutcome::Pending { remind: false, .. }) => None,
            Ok(PairingOutcome::Full | PairingOutcome::IssuedEvicting { .. }) => {
                tracing::warn!(
                    platform,
                    "pairing.max_pending is 0; unknown sender not answered"
                );
                None
            }
            Err(e) => {
                tracing::error!(error = %e, "pairing request failed");
                None
            }
        }
    }
}

/// Eight characters from an alphabet without look-alikes (no 0/O, 1/I/L).
fn new_code() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";
    let mut rng = rand::rng();
    (0..8)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

#[async_trait]
impl PreDispatchHook for AuthHook {
    fn name(&self) -> &'static str {
        "auth"
    }

    async fn on_event(&self, ev: &MessageEvent) -> HookOutcome {
        if self.auth.is_allowed_or_paired(ev, &*self.store).await {
            return HookOutcome::Continue;
        }
        tracing::info!(platform = %ev.platform, sender = %ev.sender_id, "sender not allowed; event dropped");
        HookOutcome::Skip {
            reason: "unauthorized".into(),
            reply: self.pairing_reply(ev).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{MessageKind, Origin};

    fn authorizer(toml: &str) -> Authorizer {
        Authorizer::from_config(&crate::config::from_toml(toml).unwrap())
    }

    #[test]
    fn auth_table() {
        let strict = authorizer("[telegram]\nallowed_users = [42]");
        let open = authorizer("[telegram]\nallow_all_users = true");
        let mut tg_42 = MessageEvent::text(Platform::named("telegram"), "1", "42", "hi");
        let tg_7 = MessageEvent::text(Platform::named("telegram"), "1", "7", "hi");
        let mut web_local = MessageEvent::text(Platform::WEB, "a", "a", "hi");
        web_local.origin = Origin::Person {
            kind: MessageKind::Text,
            from_loopback: true,
        };
        let web_remote = MessageEvent::text(Platform::WEB, "a", "a", "hi");
        let discord = MessageEvent::text(Platform::named("discord"), "1", "42", "hi");
        let mut internal = MessageEvent::text(Platform::named("telegram"), "1", "7", "brief");
        internal.origin = Origin::Scheduled {
            deliver_to: Vec::new(),
        };
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
