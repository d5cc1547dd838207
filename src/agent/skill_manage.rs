//! `skill_manage`: the agent proposes a new skill or a patch to one; a person decides.
//!
//! A skill steers every future session, so the agent never writes one directly (the seed's rule:
//! such writes always need a person). A call writes a *proposal* under
//! `<skills_dir>/.proposed/<name>/` — outside the index, which skips dot directories — with a
//! note of who proposed it from where, and the operator applies or drops it with
//! `herald skills approve|reject NAME`. When approvals in the chat exist, this is the write they
//! will guard. The proposed text is screened like every prompt file before it is written.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

use super::skills::{inside, parse, valid_name, SkillError};
use super::tools::{Tool, ToolContext, ToolError};
use crate::llm::ToolSpec;
use crate::screen::{screen, Finding};

/// The folder of pending proposals inside the skills directory.
pub const PROPOSED_DIR: &str = ".proposed";
/// Who proposed a skill, when, and from where; next to its SKILL.md.
pub const PROPOSAL_NOTE: &str = "PROPOSAL.json";
const MAX_DESCRIPTION_CHARS: usize = 160;
const MAX_SKILL_CHARS: usize = 40_000;

pub struct SkillManage {
    pub dir: PathBuf,
}

/// Why a proposal was not written. The `Display` text is what the model reads.
#[derive(Debug, thiserror::Error)]
pub enum ProposalError {
    #[error("name must be 1-64 letters, digits, '.', '_' or '-', not starting with '.'")]
    BadName,
    #[error("a skill named {0:?} exists; use action \"patch\" with old_text and new_text")]
    Exists(String),
    #[error("create needs a description and a body")]
    CreateIncomplete,
    #[error("the description is longer than {MAX_DESCRIPTION_CHARS} characters; say when the skill applies in one line")]
    LongDescription,
    #[error("there is no skill named {0:?}; use action \"create\"")]
    NoSuchSkill(String),
    #[error("patch needs old_text and new_text")]
    PatchIncomplete,
    #[error("old_text does not occur in the skill; view it with skill_view first")]
    NotFound,
    #[error("old_text occurs more than once; quote more of the text around it")]
    Ambiguous,
    #[error("action must be \"create\" or \"patch\", not {0:?}")]
    UnknownAction(String),
    #[error("the skill would be longer than {MAX_SKILL_CHARS} characters")]
    TooLong,
    #[error("the patch would change the skill's name; names stay as they are")]
    Renamed,
    #[error("refused: the skill contains {0}")]
    Screened(Finding),
    #[error(transparent)]
    Skill(#[from] SkillError),
    #[error("cannot write the proposal: {0}")]
    Write(#[from] std::io::Error),
    #[error(
        "refused: a proposal named {0:?} from someone else is waiting for the operator; \
         nothing was written. Propose under another name, or wait until the operator approves \
         or rejects that one."
    )]
    Taken(String),
}

#[derive(Deserialize)]
struct Args {
    action: String,
    name: String,
    description: Option<String>,
    body: Option<String>,
    old_text: Option<String>,
    new_text: Option<String>,
}

/// The proposal folder of skill `name`.
pub fn proposal_dir(skills_dir: &Path, name: &str) -> PathBuf {
    skills_dir.join(PROPOSED_DIR).join(name)
}

fn render(name: &str, description: &str, body: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: {}\n---\n{}\n",
        description.replace('\n', " ").trim(),
        body.trim()
    )
}

impl SkillManage {
    /// The SKILL.md text the call proposes, or the reason it cannot.
    fn proposed_text(&self, a: &Args) -> Result<String, ProposalError> {
        // Held to the skills directory's rule: a symlink out is not a skill to patch.
        let current = inside(&self.dir, &self.dir.join(&a.name).join("SKILL.md"))
            .ok()
            .and_then(|p| std::fs::read_to_string(p).ok());
        match a.action.as_str() {
            "create" => {
                if current.is_some() {
                    return Err(ProposalError::Exists(a.name.clone()));
                }
                let description = a.description.as_deref().unwrap_or("").trim();
                let body = a.body.as_deref().unwrap_or("").trim();
                if description.is_empty() || body.is_empty() {
                    return Err(ProposalError::CreateIncomplete);
                }
                if description.chars().count() > MAX_DESCRIPTION_CHARS {
                    return Err(ProposalError::LongDescription);
                }
                Ok(render(&a.name, description, body))
            }
            "patch" => {
                let current = current.ok_or_else(|| ProposalError::NoSuchSkill(a.name.clone()))?;
                let (Some(old), Some(new)) = (a.old_text.as_deref(), a.new_text.as_deref()) else {
                    return Err(ProposalError::PatchIncomplete);
                };
                match current.matches(old).count() {
                    0 => Err(ProposalError::NotFound),
                    1 if !old.is_empty() => Ok(current.replacen(old, new, 1)),
                    _ => Err(ProposalError::Ambiguous),
                }
            }
            other => Err(ProposalError::UnknownAction(other.to_string())),
        }
    }

    /// The proposal folder of `name` for the caller: made new, or theirs already. A pending
    /// name belongs to whoever proposed it first, so nobody else's text can take its place
    /// before the operator reads it.
    fn claim(&self, ctx: &ToolContext, name: &str) -> Result<PathBuf, ProposalError> {
        let pending = self.dir.join(PROPOSED_DIR);
        std::fs::create_dir_all(&pending)?;
        inside(&self.dir, &pending)?;
        let dir = proposal_dir(&self.dir, name);
        match std::fs::create_dir(&dir) {
            // New: the note goes first, so the folder is never ownerless for long.
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e.into()),
        }
        let dir = inside(&self.dir, &dir)?;
        let owner = std::fs::read_to_string(dir.join(PROPOSAL_NOTE))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v["person"].as_str().map(str::to_string));
        if owner.as_deref() == Some(ctx.person.as_str()) {
            return Ok(dir);
        }
        tracing::info!(skill = %name, person = %ctx.person, owner = ?owner, "skill proposal refused: the name is pending for someone else");
        Err(ProposalError::Taken(name.to_string()))
    }

    fn propose(&self, ctx: &ToolContext, a: &Args) -> Result<String, ProposalError> {
        if !valid_name(&a.name) {
            return Err(ProposalError::BadName);
        }
        let text = self.proposed_text(a)?;
        if text.chars().count() > MAX_SKILL_CHARS {
            return Err(ProposalError::TooLong);
        }
        let parsed = parse(&text)?;
        if parsed.name != a.name {
            return Err(ProposalError::Renamed);
        }
        if let Some(f) = screen(&text) {
            return Err(ProposalError::Screened(f));
        }
        let dir = self.claim(ctx, &a.name)?;
        let note = json!({
            "action": a.action,
            "person": ctx.person,
            "lane": ctx.lane.as_str(),
            "session": ctx.session_id,
            "proposed_at": chrono::Utc::now().to_rfc3339(),
        });
        std::fs::write(dir.join(PROPOSAL_NOTE), format!("{note:#}\n"))?;
        std::fs::write(dir.join("SKILL.md"), &text)?;
        tracing::info!(skill = %a.name, action = %a.action, person = %ctx.person, "skill proposal written");
        Ok(format!(
            "Proposed (replacing any earlier proposal of yours for {:?}). It takes effect only after a person \
             approves it: the operator runs `herald skills approve {}`. Until then nothing changes, \
             and an approved skill reaches new sessions, not this one.",
            a.name, a.name
        ))
    }
}

#[async_trait]
impl Tool for SkillManage {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "skill_manage".into(),
            description: "Propose a new skill (action \"create\": name, description, body) or a \
                change to one (action \"patch\": name, old_text, new_text). A person must approve \
                a proposal before it takes effect."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["create", "patch"]},
                    "name": {"type": "string", "description": "skill name: letters, digits, . _ -"},
                    "description": {"type": "string", "description": "create: one line saying when the skill applies"},
                    "body": {"type": "string", "description": "create: the skill's instructions (Markdown)"},
                    "old_text": {"type": "string", "description": "patch: exact text to replace, occurring once"},
                    "new_text": {"type": "string", "description": "patch: its replacement"}
                },
                "required": ["action", "name"]
            }),
        }
    }

    async fn call(&self, ctx: &ToolContext, arguments: &str) -> Result<String, ToolError> {
        let args: Args = serde_json::from_str(arguments).map_err(|e| {
            ToolError::BadArguments(format!(
                "arguments are not valid JSON for skill_manage: {e}"
            ))
        })?;
        self.propose(ctx, &args)
            .map_err(|e| ToolError::Failed(e.to_string()))
    }
}
