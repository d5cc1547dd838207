//! Corrections that land mid-turn: a person's message that arrives while their turn runs joins
//! that turn as a real user message at its next safe point, instead of waiting for the next
//! turn.
//!
//! The safe points are before each model call (between tool iterations) and during a model
//! call that has not answered yet, which is cancelled. Either way the request keeps every
//! earlier message byte for byte (the cached prefix); a cancelled call leaves only the text it
//! had shown, as ordinary assistant text, and never its reasoning. Where corrections come from
//! (the lane's inbox) is the lane's business: the loop only sees [`Steer`].

use std::sync::Mutex;

use async_trait::async_trait;

use crate::domain::Role;
use crate::llm::ProviderChain;
use crate::llm::{CallOpts, ChatMessage, ChatRequest, ChatResponse, DeltaSink, LlmError};
use crate::store::NewMessage;

/// A source of corrections for the running turn.
#[async_trait]
pub trait Steer: Send + Sync {
    /// Resolves when a correction may be waiting (a wake; spurious ones are allowed).
    async fn arrived(&self);
    /// The corrections that join the turn now, in arrival order, as the user rows to store
    /// (empty: none). Cancel-safe: a dropped call takes nothing.
    async fn take(&self) -> Vec<NewMessage>;
}

/// How a model call ended when corrections may cut in.
pub(super) enum Called {
    Answered(ChatResponse),
    /// Corrections arrived first: the call was dropped, these join the turn.
    Steered(Vec<NewMessage>),
}

/// Appends corrections after everything so far: to the stored rows and to the request.
pub(super) fn join(
    corrections: Vec<NewMessage>,
    out: &mut Vec<NewMessage>,
    wire: &mut Vec<ChatMessage>,
) {
    for c in corrections {
        wire.push(ChatMessage::new(
            Role::User,
            c.api_content.clone().unwrap_or_else(|| c.content.clone()),
        ));
        out.push(c);
    }
}

/// Makes one model call; with a steer source, a correction that arrives before the answer
/// cancels the call. The text the call had shown then becomes ordinary assistant text (before
/// the corrections); its reasoning is dropped.
pub(super) async fn call(
    chain: &ProviderChain,
    req: &ChatRequest,
    opts: CallOpts<'_>,
    steer: Option<&dyn Steer>,
    out: &mut Vec<NewMessage>,
    wire: &mut Vec<ChatMessage>,
) -> Result<Option<ChatResponse>, LlmError> {
    let Some(steer) = steer else {
        return chain.call(req, opts).await.map(Some);
    };
    let shown = Shown {
        inner: opts.sink,
        text: Mutex::new(String::new()),
    };
    let watched = CallOpts {
        sink: opts.sink.map(|_| &shown as &dyn DeltaSink),
        ..opts
    };
    let called = tokio::select! {
        r = chain.call(req, watched) => Called::Answered(r?),
        c = corrections(steer) => Called::Steered(c),
    };
    match called {
        Called::Answered(resp) => Ok(Some(resp)),
        Called::Steered(c) => {
            let text = shown.text.into_inner().unwrap_or_else(|e| e.into_inner());
            if !text.trim().is_empty() {
                wire.push(ChatMessage::new(Role::Assistant, text.clone()));
                out.push(NewMessage::new(Role::Assistant, text));
            }
            if let Some(sink) = opts.sink {
                sink.restart();
            }
            join(c, out, wire);
            Ok(None)
        }
    }
}

/// Waits for at least one correction (a wake for something else, such as `/status`, is not one).
async fn corrections(steer: &dyn Steer) -> Vec<NewMessage> {
    loop {
        steer.arrived().await;
        let c = steer.take().await;
        if !c.is_empty() {
            return c;
        }
    }
}

/// Passes deltas on and remembers the answer text shown since the last restart.
struct Shown<'a> {
    inner: Option<&'a dyn DeltaSink>,
    text: Mutex<String>,
}

impl DeltaSink for Shown<'_> {
    fn text(&self, delta: &str) {
        self.text
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_str(delta);
        if let Some(s) = self.inner {
            s.text(delta);
        }
    }

    fn reasoning(&self, delta: &str) {
        if let Some(s) = self.inner {
            s.reasoning(delta);
        }
    }

    fn restart(&self) {
        self.text.lock().unwrap_or_else(|e| e.into_inner()).clear();
        if let Some(s) = self.inner {
            s.restart();
        }
    }
}
