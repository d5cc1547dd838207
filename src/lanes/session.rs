//! Opening a lane's session: its id, its lineage, and the system prompt built once from the
//! prompt files, memory and tool guidance, stored with it so every turn of the session sends
//! the same prefix (the provider's prompt cache stays warm).

use chrono::Utc;

use super::worker::{Failure, Worker};
use crate::agent::prompt::{build_system_prompt, load_sources, PromptParts};
use crate::domain::MessageEvent;
use crate::store::{Lease, Session};

impl Worker {
    /// The lane's open session, or a new one (written under the lease).
    pub(super) async fn session(
        &self,
        lease: &Lease,
        ev: &MessageEvent,
    ) -> Result<Session, Failure> {
        let deps = &self.router.deps;
        if let Some(s) = deps.store.session_current(&self.lane).await? {
            return Ok(s);
        }
        let id = uuid::Uuid::new_v4().to_string();
        let started = Utc::now();
        // Lineage: the lane's previous session, if any.
        let parent_id = deps
            .store
            .sessions_list(Some(&self.lane), 1)
            .await?
            .into_iter()
            .next()
            .map(|p| p.id);
        let model = deps.chain.primary_name();
        // The prompt files are read now, once per session: an edit reaches the next session.
        let window = crate::agent::context::window::context_window(&deps.config.llm).await;
        let mut sources = load_sources(&deps.config, window);
        sources.memory = crate::agent::memory::snapshot_for(&deps.config, ev);
        sources.tool_guidance = deps
            .tools
            .guidance()
            .into_iter()
            .map(|(label, text)| crate::agent::prompt::Block { label, text })
            .collect();
        let system_prompt = build_system_prompt(
            &deps.config.agent,
            &sources,
            &PromptParts {
                platform: ev.platform,
                session_id: &id,
                started_at: started,
                model: &model,
            },
        );
        let s = Session {
            parent_id,
            ..Session::new(
                id,
                self.lane.clone(),
                started.timestamp_millis(),
                system_prompt,
                model,
            )
        };
        deps.store.session_create(lease, &s).await?;
        tracing::info!(session = %s.id, "session opened");
        Ok(s)
    }
}
