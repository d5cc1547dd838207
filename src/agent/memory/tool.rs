//! The `memory` tool: add, replace or remove one entry of the asker's MEMORY.md or USER.md.
//!
//! Whose memory is written comes only from the call's `ToolContext.person` (the sender of the
//! message being answered, mapped through `[[people]]`), never from the arguments: there is no
//! argument that names a person. Scheduled runs serve nobody, so the tool refuses there. The
//! answer never lists the file's entries, so a group chat cannot read a person's memory
//! through it. Each agent keeps its own files: a call reads and writes the files of the turn's
//! agent (`ToolContext.agent`), the same directory `Config::for_agent` gives that agent's
//! prompt snapshot, never another agent's.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

use super::{Edit, MemoryError, MemoryFiles, Target};
use crate::agent::tools::{Tool, ToolContext, ToolError};
use crate::config::{person_key, Person};
use crate::llm::ToolSpec;

pub struct MemoryTool {
    /// The default agent's files.
    pub files: MemoryFiles,
    pub people: Vec<Person>,
    /// Each named agent's files (`memory.dir` of `Config::for_agent`), as at start.
    pub agents: std::collections::BTreeMap<String, MemoryFiles>,
    /// The live roster, when the daemon runs one: the turn's agent's files and `[[people]]` are
    /// read from its current generation, so an agent or a person added by reload is whole.
    pub roster: Option<std::sync::Arc<crate::agent::roster::LiveAgents>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    action: String,
    target: String,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    old_text: Option<String>,
}

impl MemoryTool {
    /// The person the call serves, from the context only.
    pub fn person(&self, ctx: &ToolContext) -> Option<String> {
        let p = crate::domain::Person::parse(&ctx.person)?;
        match self
            .roster
            .as_ref()
            .and_then(|r| r.current().get(&ctx.agent).cloned())
        {
            Some(a) => person_key(&a.config.people, p.platform.as_str(), &p.id),
            None => person_key(&self.people, p.platform.as_str(), &p.id),
        }
    }

    /// The files of the turn's agent: from the live roster when there is one (an agent with
    /// memory off has none), else as at start. An agent neither knows has none: the tool
    /// never falls back to another agent's files.
    fn files_of(&self, ctx: &ToolContext) -> Result<MemoryFiles, MemoryError> {
        if let Some(roster) = &self.roster {
            let agents = roster.current();
            let agent = agents.get(&ctx.agent).ok_or(MemoryError::Unavailable)?;
            if !agent.config.memory.enabled {
                return Err(MemoryError::Unavailable);
            }
            return Ok(MemoryFiles::from_config(&agent.config));
        }
        if ctx.agent == crate::config::DEFAULT_AGENT {
            return Ok(self.files.clone());
        }
        self.agents
            .get(&ctx.agent)
            .cloned()
            .ok_or(MemoryError::Unavailable)
    }

    /// The tool's logic: the line for the model, or why nothing changed.
    pub fn run(&self, ctx: &ToolContext, arguments: &str) -> Result<String, MemoryError> {
        let person = self.person(ctx).ok_or(MemoryError::NoPerson)?;
        let files = self.files_of(ctx)?;
        let args: Args = serde_json::from_str(arguments)
            .map_err(|e| MemoryError::BadArguments(e.to_string()))?;
        let target = Target::parse(&args.target)
            .ok_or_else(|| MemoryError::UnknownTarget(args.target.clone()))?;
        let need = |v: Option<String>, field: &'static str| {
            v.filter(|s| !s.trim().is_empty())
                .ok_or_else(|| MemoryError::Missing {
                    field,
                    action: args.action.clone(),
                })
        };
        let edit = match args.action.as_str() {
            "add" => Edit::Add(need(args.content, "content")?),
            "replace" => Edit::Replace {
                old: need(args.old_text.clone(), "old_text")?,
                new: need(args.content, "content")?,
            },
            "remove" => Edit::Remove {
                old: need(args.old_text, "old_text")?,
            },
            other => return Err(MemoryError::UnknownAction(other.to_string())),
        };
        let out = files.edit(&person, target, &edit);
        match &out {
            Ok(_) => {
                tracing::info!(%person, agent = %ctx.agent, target = target.as_str(), action = %args.action, "memory written")
            }
            Err(why) => {
                tracing::info!(%person, agent = %ctx.agent, target = target.as_str(), action = %args.action, %why, "memory write refused")
            }
        }
        out
    }
}

/// The memory files of each named agent with memory on, as `Config::for_agent` places them.
pub fn agent_files(
    config: &crate::config::Config,
) -> std::collections::BTreeMap<String, MemoryFiles> {
    config
        .agents
        .iter()
        .filter_map(|a| Some((a.name.clone(), config.for_agent(&a.name)?)))
        .filter(|(_, c)| c.memory.enabled)
        .map(|(name, c)| (name, MemoryFiles::from_config(&c)))
        .collect()
}

#[async_trait]
impl Tool for MemoryTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "memory".into(),
            description: format!(
                "Save durable facts for future sessions with this person. target \"user\": facts \
                 about the person (name, preferences, timezone); target \"memory\": your own notes \
                 (conventions agreed, lessons learned). One short line per entry. add needs \
                 content; replace needs old_text (a unique part of the entry) and content; \
                 remove needs old_text. Caps: memory {} and user {} characters; when full, \
                 consolidate with replace/remove. Saved facts appear in the next session's \
                 prompt, not this one. Never save secrets or instructions.",
                self.files.memory_chars, self.files.user_chars
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["add", "replace", "remove"]},
                    "target": {"type": "string", "enum": ["memory", "user"]},
                    "content": {"type": "string", "description": "the entry (add, replace)"},
                    "old_text": {"type": "string", "description": "a unique part of the entry to change (replace, remove)"}
                },
                "required": ["action", "target"]
            }),
        }
    }

    async fn call(&self, ctx: &ToolContext, arguments: &str) -> Result<String, ToolError> {
        self.run(ctx, arguments)
            .map_err(|e| ToolError::Failed(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MemoryConfig;
    use crate::domain::LaneKey;

    fn ctx(person: &str) -> ToolContext {
        ToolContext {
            lane: LaneKey::parse("telegram:1"),
            person: person.into(),
            session_id: "s".into(),
            turn_id: None,
            inbox_id: None,
            call_index: 0,
            turn_files: Vec::new(),
            agent: crate::config::DEFAULT_AGENT.to_string(),
        }
    }

    #[test]
    fn the_person_comes_from_the_context_only() {
        let dir = tempfile::tempdir().unwrap();
        let tool = MemoryTool {
            files: MemoryFiles::new(dir.path(), &MemoryConfig::default()),
            people: vec![Person {
                name: "owner".into(),
                ids: vec!["telegram:1".into()],
            }],
            agents: [("coder".to_string(), {
                let cfg = MemoryConfig {
                    dir: Some(dir.path().join("agents/coder/memory")),
                    ..MemoryConfig::default()
                };
                MemoryFiles::new(dir.path(), &cfg)
            })]
            .into(),
            roster: None,
        };
        let add = r#"{"action":"add","target":"user","content":"likes tea"}"#;
        assert!(tool.run(&ctx("telegram:1"), add).is_ok());
        assert!(dir.path().join("memory/owner/USER.md").is_file());
        // Another agent writes its own files; an agent the tool does not know writes nothing.
        let coder = ToolContext {
            agent: "coder".into(),
            ..ctx("telegram:1")
        };
        assert!(tool.run(&coder, add).is_ok());
        assert!(dir
            .path()
            .join("agents/coder/memory/owner/USER.md")
            .is_file());
        let stranger = ToolContext {
            agent: "stranger".into(),
            ..ctx("telegram:1")
        };
        assert!(matches!(
            tool.run(&stranger, add),
            Err(MemoryError::Unavailable)
        ));
        // No argument names a person: one that tries is not valid arguments.
        let sneaky = r#"{"action":"add","target":"user","content":"x","person":"other"}"#;
        assert!(matches!(
            tool.run(&ctx("telegram:1"), sneaky),
            Err(MemoryError::BadArguments(_))
        ));
        // A scheduled run has no person.
        let cron = tool.run(&ctx("cron:scheduler"), add).unwrap_err();
        assert!(matches!(cron, MemoryError::NoPerson));
        assert!(cron.to_string().contains("scheduled run"), "{cron}");
        let bad = r#"{"action":"wipe","target":"user"}"#;
        assert!(tool
            .run(&ctx("telegram:1"), bad)
            .unwrap_err()
            .to_string()
            .contains("\"wipe\""));
    }
}
