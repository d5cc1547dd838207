//! One case, run for real: the whole core (`App::start`) on a throwaway data dir and SQLite
//! store, each message written to the inbox as an adapter would and waited on until its
//! processing ended, then what a person would have received read back from the store — the
//! outbox rows answering each message — with the tool traffic, the capsule and the spend
//! ledger of the run.

use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::sync::broadcast::error::RecvError;

use super::case::{Case, CaseMessage};
use super::sandbox::Sandbox;
use crate::app::App;
use crate::domain::BuildStatus;
use crate::domain::{
    Attachment, LaneKey, MediaKind, MediaSource, MessageEvent, MessageKind, Origin, Platform, Role,
};
use crate::store::{CapsuleRow, InboxInsert, Store};

/// What one message led to.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Turn {
    pub text: String,
    /// What the person would have received (the outbox rows answering the message).
    pub reply: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Billionths of the budget currency; `None` when a call had no price.
    pub cost: Option<i64>,
    pub latency_ms: u64,
}

/// A tool call the model made.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Call {
    pub name: String,
    pub arguments: String,
}

/// Everything a case's expectations are checked against.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub turns: Vec<Turn>,
    pub calls: Vec<Call>,
    /// Tools whose call was put to a person for approval (and denied: nobody answers here).
    pub asked: Vec<String>,
    /// The newest capsule written for the case's lanes.
    pub capsule: Option<String>,
    /// How the newest capsule build ended (`ok`, `degraded`, `too_short`, …), when one ran.
    pub capsule_status: Option<String>,
}

impl Observed {
    pub fn reply(&self) -> &str {
        self.turns.last().map_or("", |t| t.reply.as_str())
    }
    pub fn input_tokens(&self) -> u64 {
        self.turns.iter().map(|t| t.input_tokens).sum()
    }
    pub fn output_tokens(&self) -> u64 {
        self.turns.iter().map(|t| t.output_tokens).sum()
    }
    pub fn cost(&self) -> Option<i64> {
        self.turns.iter().map(|t| t.cost).sum()
    }
    pub fn latency_ms(&self) -> u64 {
        self.turns.iter().map(|t| t.latency_ms).sum()
    }
}

/// How long a capsule build may take after the last message before `capsule_contains` fails.
const CAPSULE_WAIT: Duration = Duration::from_secs(30);

/// Runs `case` on a fresh data dir under `sandbox`; the dir is removed afterwards.
pub async fn run_case(sandbox: &Sandbox, case: &Case) -> anyhow::Result<Observed> {
    let dir = tempfile::Builder::new()
        .prefix("herald-eval-")
        .tempdir()
        .context("making a throwaway data dir")?;
    let config = sandbox
        .on(dir.path())
        .context("copying the migrated store into the data dir")?;
    let turn_limit = Duration::from_secs(config.agent.turn_timeout_secs + 30);
    let media = crate::media::MediaCache::under(dir.path(), config.media.cache_hours);
    let app = App::start(config)
        .await
        .context("starting the case's Herald")?;
    let result = drive(&app, case, &media, turn_limit).await;
    let result = match result {
        Ok(mut seen) => collect(&app, case, &mut seen).await.map(|_| seen),
        Err(e) => Err(e),
    };
    app.shutdown().await;
    drop(dir);
    result
}

/// Sends each message and waits for its processing to end.
async fn drive(
    app: &App,
    case: &Case,
    media: &crate::media::MediaCache,
    limit: Duration,
) -> anyhow::Result<Observed> {
    let mut seen = Observed::default();
    let mut spent = Totals::default();
    for (i, m) in case.messages.iter().enumerate() {
        let ev = event(m, i, media).await?;
        let mut finished = app.ingest.subscribe_finished();
        let started = Instant::now();
        let id = match app.ingest.ingest(&ev).await? {
            InboxInsert::Inserted(id) => id,
            other => anyhow::bail!("message {} was not taken: {other:?}", i + 1),
        };
        tokio::time::timeout(limit, async {
            loop {
                match finished.recv().await {
                    Ok(done) if done == id => return Ok(()),
                    Ok(_) | Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => anyhow::bail!("the app stopped"),
                }
            }
        })
        .await
        .map_err(|_| anyhow::anyhow!("message {} got no answer within {limit:?}", i + 1))??;
        let latency_ms = started.elapsed().as_millis() as u64;
        let rows = app.store.outbox_for_inbox(id).await?;
        let reply = rows.iter().map(|r| r.text.as_str()).collect::<Vec<_>>();
        let now = Totals::read(app.store.as_ref()).await?;
        seen.turns.push(Turn {
            text: m.text.clone(),
            reply: reply.join("\n"),
            input_tokens: now.input - spent.input,
            output_tokens: now.output - spent.output,
            cost: now.cost.zip(spent.cost).map(|(a, b)| a - b),
            latency_ms,
        });
        spent = now;
    }
    Ok(seen)
}

/// The model's tool calls, the approvals asked, and the capsule when one is expected.
async fn collect(app: &App, case: &Case, seen: &mut Observed) -> anyhow::Result<()> {
    let mut lanes: Vec<LaneKey> = Vec::new();
    for m in &case.messages {
        let lane = LaneKey::from_parts(&m.platform, m.chat_id(), None);
        if !lanes.contains(&lane) {
            lanes.push(lane);
        }
    }
    for lane in &lanes {
        let mut sessions = app.store.sessions_list(Some(lane), 1000).await?;
        sessions.reverse();
        for s in sessions {
            for row in app.store.messages(&s.id, false).await? {
                match row.role {
                    Role::Assistant => seen.calls.extend(row.tool_calls.iter().map(|c| Call {
                        name: c.name.clone(),
                        arguments: c.arguments.clone(),
                    })),
                    // The words every denial of an approval carries (`ToolError::Denied`).
                    Role::Tool if row.content.starts_with("denied: ") => {
                        seen.asked.push(row.tool_name.clone().unwrap_or_default())
                    }
                    _ => {}
                }
            }
        }
    }
    if !case.expect.capsule_contains.is_empty() {
        if let Some(c) = capsule(app.store.as_ref(), &lanes).await? {
            let written = matches!(c.status, BuildStatus::Ok | BuildStatus::Degraded);
            seen.capsule = written.then_some(c.text);
            seen.capsule_status = Some(c.status.as_str().to_string());
        }
    }
    Ok(())
}

/// The newest capsule build of `lanes` (written or refused), waiting for one still running.
async fn capsule(store: &dyn Store, lanes: &[LaneKey]) -> anyhow::Result<Option<CapsuleRow>> {
    let until = Instant::now() + CAPSULE_WAIT;
    loop {
        for lane in lanes {
            if let Some(c) = store.capsule_latest(lane).await? {
                return Ok(Some(c));
            }
        }
        if Instant::now() >= until {
            return Ok(None);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The person's message as an adapter would write it; a web message comes from this machine.
async fn event(
    m: &CaseMessage,
    i: usize,
    media: &crate::media::MediaCache,
) -> anyhow::Result<MessageEvent> {
    let platform = m.platform();
    let mut ev = MessageEvent::text(platform, m.chat_id(), m.sender(), &m.text);
    ev.platform_message_id = format!("eval-{}", i + 1);
    let kind = if m.attachments.is_empty() {
        MessageKind::Text
    } else {
        MessageKind::Media
    };
    ev.origin = Origin::Person {
        kind,
        from_loopback: platform == Platform::WEB,
    };
    for path in &m.attachments {
        let bytes = tokio::fs::read(path)
            .await
            .with_context(|| format!("reading attachment {}", path.display()))?;
        let sha = media.put(&bytes).await?;
        let mime = infer::get(&bytes).map(|t| t.mime_type().to_string());
        let kind = match &mime {
            Some(m) if m.starts_with("image/") => MediaKind::Photo,
            Some(m) if m.starts_with("audio/") => MediaKind::Audio,
            _ => MediaKind::Document,
        };
        let mut a = Attachment::new(kind, MediaSource::Cached(sha));
        a.mime = mime;
        a.size = Some(bytes.len() as u64);
        a.name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        ev.attachments.push(a);
    }
    Ok(ev)
}

/// The spend ledger summed: the throwaway store holds only this case's calls.
#[derive(Debug, Clone, Copy)]
struct Totals {
    input: u64,
    output: u64,
    cost: Option<i64>,
}

impl Default for Totals {
    fn default() -> Totals {
        Totals {
            input: 0,
            output: 0,
            cost: Some(0),
        }
    }
}

impl Totals {
    async fn read(store: &dyn Store) -> anyhow::Result<Totals> {
        let mut t = Totals::default();
        for r in store.spend_rows(0).await? {
            t.input += (r.fresh_input + r.cache_read + r.cache_write).max(0) as u64;
            t.output += r.output.max(0) as u64;
            t.cost = t.cost.zip(r.cost).map(|(a, b)| a + b);
        }
        Ok(t)
    }
}
