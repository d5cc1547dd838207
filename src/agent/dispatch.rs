//! One model answer's tool calls, run side by side where that is safe.
//!
//! The batch is walked in the order the model emitted it and cut into runs: consecutive calls
//! that may overlap (a known tool that only reads, that the policy lets through without asking,
//! with arguments that parse: [`Tools::may_overlap`]) form one run, and every other call — one
//! that writes, asks a person, is unknown or delegates — is a barrier, a run of its own. Runs go
//! one after another; the calls of a run go concurrently (in this task, no spawn), each under
//! its own tool's timeout. Results are handed back in emission order whatever finished first,
//! and each call keeps the `call_index` of its position, so a retried turn names its calls as
//! the first attempt did. Approval questions therefore still appear in call order: a call that
//! asks is a barrier, and barriers run alone and in order.

use std::ops::Range;

use futures::future::join_all;
use tracing::Instrument;

use super::context::in_turn;
use super::context::spill::TurnSpill;
use super::delegate;
use super::tools::{ToolContext, ToolOutput, Tools};
use super::turn::{TurnInput, TurnOutput};
use super::turn_files;
use crate::domain::{Role, ToolCall};
use crate::llm::{ChatMessage, ProviderChain, ToolSpec};
use crate::store::NewMessage;

/// Cuts a batch into runs: `overlaps[i]` says whether call `i` may run alongside its
/// neighbours. Each maximal stretch of such calls is one run; every other call is a run of
/// its own. The runs cover the batch, in order.
pub fn segments(overlaps: &[bool]) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, &may) in overlaps.iter().enumerate() {
        if !may {
            if start < i {
                out.push(start..i);
            }
            out.push(i..i + 1);
            start = i + 1;
        }
    }
    if start < overlaps.len() {
        out.push(start..overlaps.len());
    }
    out
}

/// What a batch needs of its turn.
pub(super) struct Batch<'a, 'i> {
    pub chain: &'a ProviderChain,
    pub tools: &'a Tools,
    pub input: &'a TurnInput<'i>,
    pub specs: &'a [ToolSpec],
    /// The turn's span: child agents are traced under it.
    pub span: &'a tracing::Span,
}

impl Batch<'_, '_> {
    /// Runs one answer's tool calls; each result becomes a stored row (whole, with its files by
    /// reference) and a wire message (what later turns will see, with the images when the
    /// model sees), both in emission order.
    pub async fn run(
        &self,
        calls: &[ToolCall],
        call_index: &mut usize,
        spill: &mut TurnSpill<'_>,
        out: &mut TurnOutput,
        wire: &mut Vec<ChatMessage>,
    ) {
        let first = *call_index;
        *call_index += calls.len();
        let overlaps: Vec<bool> = calls
            .iter()
            .map(|c| self.tools.may_overlap(&c.name, &c.arguments))
            .collect();
        for run in segments(&overlaps) {
            let ctx = ToolContext {
                turn_files: turn_files(out),
                ..self.input.tool_ctx.clone()
            };
            // A delegation's summaries share half of what the context still has room for.
            let headroom = self.headroom(wire);
            let results = join_all(run.clone().map(|i| {
                let (ctx, spill) = (&ctx, &*spill);
                async move {
                    let call = &calls[i];
                    if let Some(page) = spill.page(&call.name, &call.arguments) {
                        return ToolOutput::text(page);
                    }
                    self.one(ctx, first + i, call, headroom).await
                }
            }))
            .await;
            for (call, output) in calls[run].iter().zip(results) {
                self.land(call, output, spill, out, wire, headroom).await;
            }
        }
    }

    /// One call: `delegate` runs its children here (they need the model chain); every other
    /// tool goes through the registry.
    async fn one(
        &self,
        ctx: &ToolContext,
        index: usize,
        call: &ToolCall,
        headroom: Option<usize>,
    ) -> ToolOutput {
        if let Some(p) = self.input.progress {
            p.tool_call(&call.name);
        }
        let span = tracing::info_span!("tool", name = %call.name);
        let delegate = self.tools.get(&call.name).and_then(|t| t.delegation());
        match delegate {
            Some(d) => {
                let children = delegate::Children {
                    delegate: d,
                    chain: self.chain,
                    tools: delegate::child_tools(self.tools),
                    parent: self.input,
                    budget_chars: d.budget_chars(headroom, &call.arguments),
                    span: self.span.clone(),
                };
                self.tools
                    .call_as(ctx, self.input.approvals, index, &call.arguments, &children)
                    .instrument(span)
                    .await
            }
            None => {
                self.tools
                    .call(
                        ctx,
                        self.input.approvals,
                        index,
                        &call.name,
                        &call.arguments,
                    )
                    .instrument(span)
                    .await
            }
        }
    }

    /// Tokens the context still has room for, when the window is known.
    fn headroom(&self, wire: &[ChatMessage]) -> Option<usize> {
        let window = self.input.in_turn?.window;
        Some(window.saturating_sub(in_turn::estimate(wire, self.specs)))
    }

    /// Records one call's result: the row keeps it whole, the wire shows what fits.
    async fn land(
        &self,
        call: &ToolCall,
        output: ToolOutput,
        spill: &mut TurnSpill<'_>,
        out: &mut TurnOutput,
        wire: &mut Vec<ChatMessage>,
        headroom: Option<usize>,
    ) {
        let input = self.input;
        let kept = turn_files::keep(input.media_cache, output.files, input.vision).await;
        turn_files::add_unique(&mut out.files, output.attach);
        let mut result = output.text;
        for line in &kept.lines {
            result.push('\n');
            result.push_str(line);
        }
        let delegated = self.tools.get(&call.name).and_then(|t| t.delegation());
        let shown = match delegated.and_then(|d| {
            let budget = d.budget_chars(headroom, &call.arguments);
            delegate::wire(&result, budget, spill)
        }) {
            Some(shown) => shown,
            None => spill.wire(Some(&call.name), &result),
        };
        let mut sent = ChatMessage::tool_result(&call.id, shown);
        sent.parts = kept.parts;
        let mut msg = NewMessage::new(Role::Tool, result);
        msg.tool_call_id = Some(call.id.clone());
        msg.tool_name = Some(call.name.clone());
        msg.media = kept.media;
        out.messages.push(msg);
        wire.push(sent);
    }
}

/// The files this turn's tool rows hold so far.
fn turn_files(out: &TurnOutput) -> Vec<crate::domain::Attachment> {
    out.messages
        .iter()
        .flat_map(|m| m.media.iter().cloned())
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::segments;
    use crate::agent::skill_manage::SkillManage;
    use crate::agent::skills::SkillView;
    use crate::agent::tools::{Policy, ToolCatalog, Tools};

    fn tools(policy: Policy) -> Tools {
        let dir = std::env::temp_dir();
        let mut c = ToolCatalog::new(policy);
        c.builtin(Arc::new(SkillView { dir: dir.clone() }));
        c.builtin(Arc::new(SkillManage { dir }));
        c.snapshot()
    }

    #[test]
    fn only_a_known_reader_that_runs_unasked_with_sound_arguments_may_overlap() {
        let t = tools(Policy::default());
        assert!(t.may_overlap("skill_view", r#"{"name":"x"}"#));
        assert!(t.may_overlap("skill_view", ""));
        // A writer, an unknown tool, arguments that do not parse: barriers.
        assert!(!t.may_overlap("skill_manage", r#"{"name":"x"}"#));
        assert!(!t.may_overlap("no_such_tool", "{}"));
        assert!(!t.may_overlap("skill_view", "{not json"));
        // A reader the policy asks about (or refuses) is a barrier too.
        let asks = tools(Policy::new(false, &["skill_view"], &[] as &[&str]).unwrap());
        assert!(!asks.may_overlap("skill_view", "{}"));
        let denied = tools(Policy::new(false, &[] as &[&str], &["skill_*"]).unwrap());
        assert!(!denied.may_overlap("skill_view", "{}"));
    }

    #[test]
    fn reads_side_by_side_form_one_run_and_each_barrier_stands_alone() {
        // read, read, write, read, read, read
        assert_eq!(
            segments(&[true, true, false, true, true, true]),
            vec![0..2, 2..3, 3..6]
        );
        // Barriers back to back, one at each end.
        assert_eq!(
            segments(&[false, false, true, false]),
            vec![0..1, 1..2, 2..3, 3..4]
        );
        assert_eq!(segments(&[true]), vec![0..1]);
        assert!(segments(&[]).is_empty());
        // Every call is in exactly one run, in emission order.
        let flags = [true, false, true, true, false, false, true];
        let covered: Vec<usize> = segments(&flags).into_iter().flatten().collect();
        assert_eq!(covered, (0..flags.len()).collect::<Vec<_>>());
    }
}
