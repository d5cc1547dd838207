//! Hook chains: the pre-dispatch chain every inbound event passes before it can become a turn,
//! and the pre-LLM chain whose context is appended to the turn's user message.
//!
//! Both chains are built in one place ([`build_pre_dispatch`]), in a fixed order. The
//! pre-dispatch chain runs when a lane worker takes the event from the inbox, so a crash
//! between the inbox write and dispatch can never let an event skip authorization.
//! Pre-LLM context never touches the system prompt: it is appended to the user message and
//! stored as that message's `api_content`, so the cached prompt prefix stays byte-identical.

mod auth;
mod recall;

use std::sync::Arc;

use async_trait::async_trait;

use crate::config::Config;
use crate::domain::{LaneKey, MessageEvent, SessionId};
use crate::store::Store;

pub use auth::{AuthHook, Authorizer};
pub use recall::MemoryRecall;

/// What a pre-dispatch hook decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookOutcome {
    Continue,
    /// Replace the text the turn sees.
    Rewrite(String),
    /// Drop the event before any model call; `reply` is sent to the chat when present.
    Skip {
        reason: String,
        reply: Option<String>,
    },
}

#[async_trait]
pub trait PreDispatchHook: Send + Sync {
    fn name(&self) -> &'static str;
    async fn on_event(&self, ev: &MessageEvent) -> HookOutcome;
    /// The event is this hook's own control word (the `handoff` word): it is handled alone,
    /// never merged into a running turn.
    fn claims(&self, _ev: &MessageEvent) -> bool {
        false
    }
}

/// The ordered pre-dispatch chain.
#[derive(Clone, Default)]
pub struct HookChain {
    hooks: Vec<Arc<dyn PreDispatchHook>>,
}

/// The chain's verdict for one event.
#[derive(Debug, Clone, PartialEq)]
pub enum Dispatch {
    Turn(Box<MessageEvent>),
    Skip {
        hook: &'static str,
        reason: String,
        reply: Option<String>,
    },
}

impl HookChain {
    pub fn new(hooks: Vec<Arc<dyn PreDispatchHook>>) -> HookChain {
        HookChain { hooks }
    }

    pub fn push(&mut self, hook: Arc<dyn PreDispatchHook>) {
        self.hooks.push(hook);
    }

    /// Whether a hook of the chain takes the event as its own control word.
    pub fn claims(&self, ev: &MessageEvent) -> bool {
        self.hooks.iter().any(|h| h.claims(ev))
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.hooks.iter().map(|h| h.name()).collect()
    }

    pub async fn run(&self, ev: &MessageEvent) -> Dispatch {
        let mut ev = ev.clone();
        for hook in &self.hooks {
            match hook.on_event(&ev).await {
                HookOutcome::Continue => {}
                HookOutcome::Rewrite(text) => ev.text = text,
                HookOutcome::Skip { reason, reply } => {
                    metrics::counter!("herald_hook_skips_total", "hook" => hook.name())
                        .increment(1);
                    return Dispatch::Skip {
                        hook: hook.name(),
                        reason,
                        reply,
                    };
                }
            }
        }
        Dispatch::Turn(Box::new(ev))
    }
}

/// Builds the pre-dispatch chain in its fixed order: authorization first, by `auth` (the
/// app's one authorizer, whose rules a reload replaces).
pub fn build_pre_dispatch(
    config: &Config,
    auth: Authorizer,
    store: Arc<dyn Store>,
    extra: Vec<Arc<dyn PreDispatchHook>>,
) -> HookChain {
    let mut chain = HookChain::new(vec![Arc::new(AuthHook::new(
        auth,
        store,
        config.pairing.clone(),
    ))]);
    for h in extra {
        chain.push(h);
    }
    chain
}

/// What a pre-LLM hook sees.
pub struct PreLlmContext<'a> {
    pub lane: &'a LaneKey,
    pub session_id: &'a SessionId,
    /// True on the first turn of a session (no earlier user message in it).
    pub first_turn: bool,
    pub event: &'a MessageEvent,
    /// The agent serving the turn: context kept per agent (handoff capsules) is read for it.
    pub agent: &'a str,
}

#[async_trait]
pub trait PreLlmHook: Send + Sync {
    fn name(&self) -> &'static str;
    /// Context to append to the user message, if any.
    async fn context(&self, ctx: &PreLlmContext<'_>) -> Option<String>;
}

#[derive(Clone, Default)]
pub struct PreLlmChain {
    hooks: Vec<Arc<dyn PreLlmHook>>,
}

impl PreLlmChain {
    pub fn new(hooks: Vec<Arc<dyn PreLlmHook>>) -> PreLlmChain {
        PreLlmChain { hooks }
    }

    /// The user message as sent to the model: the text, then each hook's context block.
    /// `None` when no hook added anything (then `content` is sent as is).
    pub async fn api_content(&self, text: &str, ctx: &PreLlmContext<'_>) -> Option<String> {
        let mut extra = Vec::new();
        for h in &self.hooks {
            if let Some(c) = h.context(ctx).await {
                extra.push(c);
            }
        }
        if extra.is_empty() {
            None
        } else {
            Some(format!("{text}\n\n{}", extra.join("\n\n")))
        }
    }
}
