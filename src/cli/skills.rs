//! `herald skills list|approve|reject`: the operator's side of skills. The agent can only
//! propose a skill (`skill_manage`); a proposal takes effect when a person approves it here.
//!
//! Approval re-checks the proposal as the index would (front matter, name, screening) and
//! writes SKILL.md by rename, so a half-written skill is never read by a starting session.

use std::path::Path;

use anyhow::{bail, Context};
use clap::Subcommand;

use crate::agent::prompt::skills_dir;
use crate::agent::skill_manage::{proposal_dir, PROPOSAL_NOTE, PROPOSED_DIR};
use crate::agent::skills::{inside, load, parse, valid_name};
use crate::config::Config;
use crate::screen::screen;

#[derive(Subcommand)]
pub enum SkillsCmd {
    /// Skills in the index, and proposals waiting for a person.
    List,
    /// Apply the agent's proposal for NAME (a new skill or a patch).
    Approve { name: String },
    /// Drop the agent's proposal for NAME.
    Reject { name: String },
}

pub async fn skills(config: &Config, cmd: SkillsCmd) -> anyhow::Result<()> {
    let dir = skills_dir(config);
    match cmd {
        SkillsCmd::List => list(&dir),
        SkillsCmd::Approve { name } => approve(&dir, &name),
        SkillsCmd::Reject { name } => {
            let p = existing_proposal(&dir, &name)?;
            std::fs::remove_dir_all(&p).with_context(|| format!("removing {}", p.display()))?;
            println!("rejected the proposal for {name}");
            Ok(())
        }
    }
}

fn existing_proposal(dir: &Path, name: &str) -> anyhow::Result<std::path::PathBuf> {
    let p = proposal_dir(dir, name);
    if !valid_name(name) || !p.join("SKILL.md").is_file() {
        bail!(
            "no proposal named {name:?} in {}",
            dir.join(PROPOSED_DIR).display()
        );
    }
    // The skills directory's one rule: a proposal read through a symlink out is refused.
    inside(dir, &p.join("SKILL.md")).map_err(|e| anyhow::anyhow!("refused: {e}"))?;
    inside(dir, &p).map_err(|e| anyhow::anyhow!("refused: {e}"))
}

fn list(dir: &Path) -> anyhow::Result<()> {
    let skills = load(dir);
    if skills.is_empty() {
        println!("no skills in {}", dir.display());
    }
    for s in &skills {
        println!("{}  {}", s.name, s.description);
    }
    let mut proposals: Vec<_> = std::fs::read_dir(dir.join(PROPOSED_DIR))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| valid_name(n))
        .collect();
    proposals.sort();
    for name in proposals {
        let note = std::fs::read_to_string(proposal_dir(dir, &name).join(PROPOSAL_NOTE))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .unwrap_or_default();
        println!(
            "proposed: {name}  ({} by {} in {} at {}; herald skills approve|reject {name})",
            note["action"].as_str().unwrap_or("?"),
            crate::telemetry::escape(note["person"].as_str().unwrap_or("?")),
            crate::telemetry::escape(note["lane"].as_str().unwrap_or("?")),
            note["proposed_at"].as_str().unwrap_or("?"),
        );
    }
    Ok(())
}

fn approve(dir: &Path, name: &str) -> anyhow::Result<()> {
    let p = existing_proposal(dir, name)?;
    let text = std::fs::read_to_string(p.join("SKILL.md"))?;
    let skill = parse(&text).map_err(|e| anyhow::anyhow!("the proposal is malformed: {e}"))?;
    if skill.name != name {
        bail!("the proposal names itself {:?}, not {name:?}", skill.name);
    }
    if let Some(f) = screen(&text) {
        bail!("the proposal contains {f}; reject it or fix it by hand");
    }
    let target = dir.join(name);
    if std::fs::symlink_metadata(&target).is_err() {
        std::fs::create_dir(&target).with_context(|| format!("creating {}", target.display()))?;
    }
    // Never write through a symlink that leads out of the skills directory.
    let target = inside(dir, &target).map_err(|e| anyhow::anyhow!("refused: {e}"))?;
    let tmp = target.join(".SKILL.md.new");
    // A planted file or symlink under the temporary name is not written through.
    let _ = std::fs::remove_file(&tmp);
    std::fs::write(&tmp, &text)?;
    std::fs::rename(&tmp, target.join("SKILL.md"))?;
    std::fs::remove_dir_all(&p)?;
    println!("approved {name}: new sessions get it in their skills index");
    Ok(())
}
