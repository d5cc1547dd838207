//! The agent loop of one turn: call the model, run the tools it asks for, repeat within an
//! iteration budget, and end with text. A model that answers nothing after using tools gets one
//! tools-stripped retry before the turn settles for "(The model returned an empty answer.)".
//!
//! Pure with respect to the store: it returns the messages to append and the reply, and the
//! lane worker lands them in one transaction. A turn that fails or is cancelled therefore
//! leaves no trace in the transcript.

use crate::domain::Role;
use crate::llm::{
    CallOpts, ChatMessage, ChatRequest, DeltaSink, LlmError, Meter, Part, ProviderChain, ToolSpec,
    Usage,
};
use crate::store::{NewMessage, StoredMessage};

use super::context::in_turn::{self, InTurnBudget};
use super::context::spill::TurnSpill;
use super::dispatch::Batch;
use super::tools::{ApprovalGate, ToolContext, Tools};
use crate::media::images::HistoryImages;

#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error(transparent)]
    Llm(#[from] LlmError),
}

pub struct TurnInput<'a> {
    pub system_prompt: &'a str,
    pub history: &'a [StoredMessage],
    /// The user message as stored.
    pub user_content: &'a str,
    /// The user message as sent (with pre-LLM context), when it differs.
    pub user_api_content: Option<&'a str>,
    /// The images of the user message (a photo the person sent, for a model that sees).
    pub user_parts: &'a [Part],
    /// The images of the history still in view.
    pub history_images: &'a HistoryImages,
    pub max_iterations: u32,
    /// The session the turn belongs to (named in previews of its large tool results).
    pub session_id: &'a str,
    /// Tool results longer than this reach the next request as a preview.
    pub spill_chars: usize,
    /// Whom the turn's tool calls serve; every tool is scoped to it.
    pub tool_ctx: &'a ToolContext,
    /// Asks the person before a call the policy says needs approval.
    pub approvals: &'a dyn ApprovalGate,
    /// Shown the answer as it is written (streaming); `None` calls the model without streaming.
    /// Text of a model call that ends in tool calls is shown, then restarted: only the final
    /// answer remains.
    pub sink: Option<&'a dyn DeltaSink>,
    /// Reserves and settles each model call of the turn (the budget); `None`: unmetered.
    pub meter: Option<&'a dyn Meter>,
    /// The in-loop context check between tool iterations (`None`: off).
    pub in_turn: Option<InTurnBudget>,
    /// Told what the turn starts doing (a model call, a tool), for `/status`.
    pub progress: Option<&'a dyn TurnProgress>,
    /// The model takes images (`llm.vision`): images go to it as image parts.
    pub vision: bool,
    /// Corrections that join the turn at its safe points (`lanes.mid_turn = "steer"`).
    pub steer: Option<&'a dyn super::steer::Steer>,
    /// Where files a tool returns are kept (the tool row references them by hash).
    pub media_cache: &'a crate::media::MediaCache,
}

impl TurnInput<'_> {
    /// How each of the turn's model calls is made: streamed to its sink, metered by its meter.
    pub fn call_opts(&self) -> CallOpts<'_> {
        CallOpts {
            sink: self.sink,
            meter: self.meter,
        }
    }
}

/// Hears the steps of a running turn as they start; display state only.
pub trait TurnProgress: Send + Sync {
    fn model_call(&self);
    fn tool_call(&self, name: &str);
}

#[derive(Debug, Default)]
pub struct TurnOutput {
    /// Everything after the user message: assistant tool calls, tool results, final answer.
    pub messages: Vec<NewMessage>,
    pub reply: String,
    pub usage: Usage,
    pub model_calls: u32,
    /// Billed prompt tokens of each answered request, in order (the context engine anchors
    /// its estimate on the last one and judges a compaction by the first).
    pub prompt_readings: Vec<u64>,
    /// Files the model attached to its reply (`attach_file`), in order, once each.
    pub files: Vec<crate::domain::Attachment>,
}

impl TurnOutput {
    /// An answer that is `text` as it stands, without a model call (a `notify` webhook).
    pub fn text(text: &str) -> TurnOutput {
        TurnOutput {
            messages: vec![NewMessage::new(Role::Assistant, text)],
            reply: text.to_string(),
            ..TurnOutput::default()
        }
    }
}

const EMPTY_REPLY: &str = "(The model returned an empty answer.)";

/// The request's messages for the system prompt and the history, each row with the images it
/// still shows (or their placeholder).
pub fn history_to_wire(
    system_prompt: &str,
    history: &[StoredMessage],
    images: &HistoryImages,
) -> Vec<ChatMessage> {
    let mut out = Vec::with_capacity(history.len() + 2);
    out.push(ChatMessage::new(Role::System, system_prompt));
    for m in history {
        let mut msg = ChatMessage {
            role: m.role,
            content: Some(m.wire_content().to_string()),
            parts: Vec::new(),
            tool_calls: m.tool_calls.clone(),
            tool_call_id: m.tool_call_id.clone(),
        };
        images.apply(m, &mut msg);
        out.push(msg);
    }
    out
}

/// The turn's first request: the system prompt, the history, and the person's message as
/// sent (with its pre-LLM context and its images).
fn opening_request(input: &TurnInput<'_>) -> Vec<ChatMessage> {
    let mut wire = history_to_wire(input.system_prompt, input.history, input.history_images);
    let mut user = ChatMessage::new(
        Role::User,
        input.user_api_content.unwrap_or(input.user_content),
    );
    user.parts = input.user_parts.to_vec();
    wire.push(user);
    wire
}

pub async fn run_turn(
    chain: &ProviderChain,
    tools: &Tools,
    input: TurnInput<'_>,
) -> Result<TurnOutput, TurnError> {
    let mut wire = opening_request(&input);
    let specs = tools.specs();
    // Where the opening request sits in `wire` (an in-turn shrink may fold the history).
    let mut opening = input.history.len() + 1;
    let mut spill = TurnSpill::new(input.session_id, input.spill_chars);
    let mut out = TurnOutput::default();
    // Counts every tool call of the turn, in order: with the inbox id it names a call across
    // retries of the turn (the model answers the same history the same way).
    let mut call_index = 0usize;
    let span = tracing::Span::current();
    let batch = Batch {
        chain,
        tools,
        input: &input,
        specs: &specs,
        span: &span,
    };
    // The iteration budget counts model turns, not attempts: only an answered request spends
    // it. Retries and fallbacks inside the chain are one call; a request the provider refused
    // as too large ends this attempt before spending, and the lane's retry after compacting
    // starts the turn again with the whole budget (its calls redo the turn, with kept results).
    // A call a correction cancelled does not spend one either.
    let mut spent = 0u32;
    while spent < input.max_iterations.max(1) {
        if let Some(steer) = input.steer {
            let corrections = steer.take().await;
            if !corrections.is_empty() {
                super::steer::join(corrections, &mut out.messages, &mut wire);
            }
        }
        // The request takes the in-flight messages for the call and hands them back after it
        // (no copy of the whole history per call); a correction's messages follow them.
        let req = ChatRequest {
            messages: std::mem::take(&mut wire),
            tools: specs.clone(),
        };
        if let Some(p) = input.progress {
            p.model_call();
        }
        let mut steered = Vec::new();
        let called = super::steer::call(
            chain,
            &req,
            input.call_opts(),
            input.steer,
            &mut out.messages,
            &mut steered,
        )
        .await;
        wire = req.messages;
        wire.append(&mut steered);
        let Some(resp) = called? else { continue };
        spent += 1;
        out.model_calls += 1;
        out.usage.add(resp.usage);
        out.prompt_readings.push(resp.usage.prompt_total());
        if resp.tool_calls.is_empty() {
            if is_empty(&resp.content) && !out.messages.is_empty() {
                // No text after tools: one more call without tools asks for the answer.
                return final_call(chain, wire, out, &input).await;
            }
            return Ok(finish(out, resp.content));
        }
        if let Some(sink) = input.sink {
            sink.restart();
        }
        push_tool_calls(&mut out, &mut wire, resp.content, &resp.tool_calls);
        batch
            .run(
                &resp.tool_calls,
                &mut call_index,
                &mut spill,
                &mut out,
                &mut wire,
            )
            .await;
        if let Some(b) = input.in_turn {
            shrink_between(&mut wire, &input, &mut opening, &specs, b);
        }
    }
    // Budget spent while the model still wanted tools: one last call without tools forces text.
    final_call(chain, wire, out, &input).await
}

/// Records the model's tool-call message in the transcript and in the request in flight.
fn push_tool_calls(
    out: &mut TurnOutput,
    wire: &mut Vec<ChatMessage>,
    content: Option<String>,
    calls: &[crate::domain::ToolCall],
) {
    let mut assistant = NewMessage::new(Role::Assistant, content.clone().unwrap_or_default());
    assistant.tool_calls = calls.to_vec();
    out.messages.push(assistant);
    wire.push(ChatMessage::tool_calls(content, calls.to_vec()));
}

/// The in-turn check between tool iterations: shrinks the in-flight request when it has
/// outgrown its budget.
fn shrink_between(
    wire: &mut Vec<ChatMessage>,
    input: &TurnInput<'_>,
    opening: &mut usize,
    specs: &[ToolSpec],
    b: InTurnBudget,
) {
    if let Some(s) = in_turn::shrink(wire, input.history, opening, specs, b) {
        metrics::counter!("herald_in_turn_compactions_total").increment(1);
        tracing::info!(session = %input.session_id, before = s.before, after = s.after,
            stubbed = s.stubbed, projected = s.projected, budget = b.budget_tokens,
            "in-flight request shrunk between tool iterations");
    }
}

/// The tools-stripped call that ends a turn with text: after the iteration budget, or when the
/// model answered nothing after using tools. Only its emptiness becomes [`EMPTY_REPLY`].
async fn final_call(
    chain: &ProviderChain,
    wire: Vec<ChatMessage>,
    mut out: TurnOutput,
    input: &TurnInput<'_>,
) -> Result<TurnOutput, TurnError> {
    if let Some(sink) = input.sink {
        sink.restart();
    }
    if let Some(p) = input.progress {
        p.model_call();
    }
    let req = ChatRequest {
        messages: wire,
        tools: Vec::new(),
    };
    let resp = chain.call(&req, input.call_opts()).await?;
    out.model_calls += 1;
    out.usage.add(resp.usage);
    out.prompt_readings.push(resp.usage.prompt_total());
    Ok(finish(out, resp.content))
}

fn is_empty(content: &Option<String>) -> bool {
    content.as_deref().is_none_or(|c| c.trim().is_empty())
}

fn finish(mut out: TurnOutput, content: Option<String>) -> TurnOutput {
    let text = content
        .filter(|c| !c.trim().is_empty())
        .unwrap_or_else(|| EMPTY_REPLY.to_string());
    let mut answer = NewMessage::new(Role::Assistant, text.clone());
    // The answer row names the files sent with it (the web chat shows them).
    answer.media = out.files.clone();
    out.messages.push(answer);
    out.reply = text;
    out
}
