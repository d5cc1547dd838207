//! Opening a lane's session: its id, its lineage, and the system prompt built once from the
//! prompt files, memory and tool guidance, stored with it so every turn of the session sends
//! the same prefix (the provider's prompt cache stays warm).

use chrono::Utc;

use super::worker::{Failure, Worker};
use crate::agent::prompt::{build_system_prompt, load_sources, PromptParts};
use crate::agent::roster::Agent;
use crate::domain::MessageEvent;
use crate::store::{Lease, Session};

impl Worker {
    /// The lane's open session, or a new one (written under the lease). An open session of
    /// another agent is closed first: a conversation's history belongs to the agent that had it.
    pub(super) async fn session(
        &self,
        lease: &Lease,
        ev: &MessageEvent,
        agent: &Agent,
    ) -> Result<Session, Failure> {
        let deps = &self.router.deps;
        if let Some(s) = deps.store.session_current(&self.lane).await? {
            if s.agent == agent.name {
                return Ok(s);
            }
            tracing::info!(session = %s.id, from = %s.agent, to = %agent.name, "the chat moved to another agent; closing its session");
            deps.store
                .session_close(lease, &s.id, "agent_changed")
                .await?;
        }
        let config = &agent.config;
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
        let model = agent.chain.primary_name();
        // The prompt files are read now, once per session: an edit reaches the next session.
        let window = crate::agent::context::window::context_window(&config.llm).await;
        let mut sources = load_sources(config, window);
        sources.memory = crate::agent::memory::snapshot_for(config, ev);
        sources.tool_guidance = deps
            .tools
            .guidance()
            .into_iter()
            .filter(|(label, _)| agent.offers_guidance(label))
            .map(|(label, text)| crate::agent::prompt::Block { label, text })
            .collect();
        let system_prompt = build_system_prompt(
            &config.agent,
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
            agent: agent.name.clone(),
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
