//! A submitted request's progress as a stream: the answer's text as the model writes it (from
//! the lanes' in-process hub, this replica only), then the settled answer read from the store.
//!
//! An OpenAI stream can only add text. When the model starts over (a tool call after some
//! text, a retry), the text already sent stays and the new text follows after a blank line;
//! at the end, whatever of the committed answer the deltas did not carry is sent, so the
//! client ends with the committed answer's text (after any words written before a tool call).

use std::time::Duration;

use futures::Stream;
use tokio::sync::broadcast;

use super::turn::{settled, Answer, Submitted};
use super::OaiError;
use crate::http::turn_watch::TurnWatch;
use crate::http::HttpState;
use crate::lanes::StreamKind;

/// One step of a streamed answer.
pub(super) enum Progress {
    Text(String),
    Done(Result<Answer, OaiError>),
}

struct Run {
    state: HttpState,
    inbox_id: i64,
    watch: TurnWatch,
    deadline: tokio::time::Instant,
    fresh: bool,
    over: bool,
    text: Sent,
}

/// The answer's text the client has been sent.
#[derive(Default)]
struct Sent {
    /// Text sent since the model last started over.
    segment: String,
    /// The model started over after text was sent: the next text begins a new paragraph.
    paragraph: bool,
}

/// The progress of `sub` until its answer (or error); then the stream ends.
pub(super) fn progress(state: HttpState, sub: Submitted) -> impl Stream<Item = Progress> {
    let deadline =
        tokio::time::Instant::now() + Duration::from_secs(state.config.web.reply_timeout_secs);
    let run = Run {
        state,
        inbox_id: sub.inbox_id,
        watch: TurnWatch::new(
            sub.inbox_id,
            sub.deltas.unwrap_or_else(|| broadcast::channel(1).1),
            sub.finished,
        ),
        deadline,
        fresh: sub.fresh,
        over: false,
        text: Sent::default(),
    };
    futures::stream::unfold(run, |mut run| async move {
        if run.over {
            return None;
        }
        let step = run.next().await;
        Some((step, run))
    })
}

impl Run {
    async fn next(&mut self) -> Progress {
        loop {
            if !self.fresh {
                if let Some(done) = settled(&self.state, self.inbox_id).await {
                    self.over = true;
                    return self.finish(done);
                }
            }
            self.fresh = false;
            if tokio::time::Instant::now() > self.deadline {
                self.over = true;
                return Progress::Done(Err(OaiError::unavailable(
                    "the answer is taking longer than web.reply_timeout_secs; send the same \
                     request again (same Idempotency-Key) to read it when it is ready",
                )));
            }
            let Run { watch, text, .. } = self;
            if let Some(t) = watch.next(|kind| text.delta(kind)).await {
                return Progress::Text(t);
            }
        }
    }

    /// The settled answer, with the part of its text the deltas did not carry.
    fn finish(&mut self, done: Result<Answer, OaiError>) -> Progress {
        let Ok(mut answer) = done else {
            return Progress::Done(done);
        };
        answer.text = rest(&answer.text, &self.text.segment, self.text.paragraph);
        Progress::Done(Ok(answer))
    }
}

impl Sent {
    /// The text to send for one hub event, if any.
    fn delta(&mut self, kind: StreamKind) -> Option<String> {
        match kind {
            StreamKind::Text(t) if !t.is_empty() => {
                let sep = if std::mem::take(&mut self.paragraph) {
                    "\n\n"
                } else {
                    ""
                };
                self.segment.push_str(&t);
                Some(format!("{sep}{t}"))
            }
            StreamKind::Restart if !self.segment.is_empty() => {
                self.segment.clear();
                self.paragraph = true;
                None
            }
            _ => None,
        }
    }
}

/// What must still be sent so the client ends with `full`, given `segment` was sent since the
/// last start-over (and `paragraph`: text before it was sent too, not yet separated).
fn rest(full: &str, segment: &str, paragraph: bool) -> String {
    match full.strip_prefix(segment) {
        Some(r) if !segment.is_empty() || !paragraph || r.is_empty() => r.to_string(),
        Some(r) => format!("\n\n{r}"),
        None => format!("\n\n{full}"),
    }
}

#[cfg(test)]
mod tests {
    use super::rest;

    #[test]
    fn the_rest_of_the_answer() {
        let cases = [
            ("hello world", "hello ", false, "world"),
            ("hello", "hello", false, ""),
            ("hello", "", false, "hello"),
            ("answer", "", true, "\n\nanswer"),
            ("answer", "let me look", false, "\n\nanswer"),
        ];
        for (full, seg, para, want) in cases {
            assert_eq!(rest(full, seg, para), want, "{full:?} {seg:?}");
        }
    }
}
