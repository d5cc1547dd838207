//! Skills: reusable procedures an operator keeps as `<skills_dir>/<name>/SKILL.md`, each with a
//! front matter naming it and saying when it applies.
//!
//! The stable prompt tier carries only a compact index (name and description, sorted by name,
//! capped), so a hundred skills cost a few hundred tokens; the model reads one skill's body with
//! `skill_view` when it needs it. A malformed or suspicious file is skipped with a warning, never
//! a failed start. Skills are the operator's, shared by every lane; `skill_view` reads nothing
//! outside the skills directory, whatever name it is given.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

use super::tools::{Tool, ToolContext, ToolError};
use crate::llm::ToolSpec;
use crate::screen::{cap_head_tail, screen};

/// Longest description shown in the index, in characters.
const MAX_DESCRIPTION_CHARS: usize = 160;
/// The index stops listing skills past this many characters.
pub const INDEX_CAP_CHARS: usize = 6_000;
/// Longest skill body `skill_view` returns.
const MAX_BODY_CHARS: usize = 40_000;
/// A SKILL.md larger than this is skipped unread.
const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Other files of a skill listed by `skill_view`.
const MAX_LISTED_FILES: usize = 50;

/// One usable skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub body: String,
}

/// Why a SKILL.md is not a usable skill, or a path not one Herald reads. The text is what the
/// operator's warning, `herald doctor` and the model's tool result show.
#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    #[error("no front matter (the file must start with a --- line)")]
    NoFrontMatter,
    #[error("the front matter is not closed by a --- line")]
    Unclosed,
    #[error("the front matter has no {0}")]
    Missing(&'static str),
    #[error("the skills directory {} is not readable: {source}", root.display())]
    RootUnreadable {
        root: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read {}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} leads outside the skills directory (a symlink to {})", path.display(), real.display())]
    Outside { path: PathBuf, real: PathBuf },
    #[error("SKILL.md is larger than {MAX_FILE_BYTES} bytes")]
    TooLarge,
    #[error("its name {name:?} is not its directory's name {dir:?}")]
    NameMismatch { name: String, dir: String },
    #[error("it contains {0}")]
    Screened(String),
}

/// A skill name is a directory name: letters, digits, `.`, `_`, `-`, not starting with `.`.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Splits a SKILL.md into its front matter's `name` and `description` and the body. The front
/// matter is the block between a first line `---` and the next `---` line, of `key: value`
/// lines (values may be quoted); other keys are ignored.
pub fn parse(text: &str) -> Result<Skill, SkillError> {
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
        .ok_or(SkillError::NoFrontMatter)?;
    let end = rest.find("\n---").ok_or(SkillError::Unclosed)?;
    let (head, body) = (&rest[..end], &rest[end + 4..]);
    let body = body.split_once('\n').map_or("", |(_, b)| b);
    let mut name = None;
    let mut description = None;
    for line in head.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim().trim_matches(|c| c == '"' || c == '\'').trim();
        match k.trim() {
            "name" => name = Some(v.to_string()),
            "description" => description = Some(v.to_string()),
            _ => {}
        }
    }
    let name = name
        .filter(|n| !n.is_empty())
        .ok_or(SkillError::Missing("name"))?;
    let description = description
        .filter(|d| !d.is_empty())
        .ok_or(SkillError::Missing("description"))?;
    Ok(Skill {
        name,
        description,
        body: body.trim().to_string(),
    })
}

/// The one rule for every path Herald reads or writes under the skills directory (the index,
/// `skill_view`, proposals, `herald skills approve`): `path` resolved through every symlink
/// must lie strictly inside `root` resolved the same way, or it is refused. A symlink that
/// stays inside is fine; one that leads out is not a skill.
pub fn inside(root: &Path, path: &Path) -> Result<PathBuf, SkillError> {
    let root = root
        .canonicalize()
        .map_err(|source| SkillError::RootUnreadable {
            root: root.to_path_buf(),
            source,
        })?;
    let real = path
        .canonicalize()
        .map_err(|source| SkillError::Unreadable {
            path: path.to_path_buf(),
            source,
        })?;
    if real.starts_with(&root) && real != root {
        Ok(real)
    } else {
        Err(SkillError::Outside {
            path: path.to_path_buf(),
            real,
        })
    }
}

/// Reads skill `dir_name` under `root`, the directory and its SKILL.md both held to
/// [`inside`], checking that the front matter's name is the directory's.
pub(crate) fn read_skill(root: &Path, dir_name: &str) -> Result<Skill, SkillError> {
    let dir = inside(root, &root.join(dir_name))?;
    let file = inside(root, &dir.join("SKILL.md"))?;
    let unreadable = |source| SkillError::Unreadable {
        path: "SKILL.md".into(),
        source,
    };
    let meta = std::fs::metadata(&file).map_err(unreadable)?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(SkillError::TooLarge);
    }
    let text = std::fs::read_to_string(&file).map_err(unreadable)?;
    let skill = parse(&text)?;
    if skill.name != dir_name {
        return Err(SkillError::NameMismatch {
            name: skill.name,
            dir: dir_name.to_string(),
        });
    }
    if let Some(f) = screen(&text) {
        return Err(SkillError::Screened(f.to_string()));
    }
    Ok(skill)
}

/// Every usable skill under `dir`, sorted by name. A missing directory has none; a bad skill is
/// skipped with a warning naming it and why.
pub fn load(dir: &Path) -> Vec<Skill> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .map(str::to_string)
        else {
            continue;
        };
        if !path.is_dir() || !valid_name(&name) {
            continue;
        }
        let file = path.join("SKILL.md");
        match read_skill(dir, &name) {
            Ok(s) => {
                crate::agent::prompt::first_report(&file, None);
                out.push(s)
            }
            Err(why) => {
                if crate::agent::prompt::first_report(&file, Some(&why.to_string())) {
                    tracing::warn!(skill = %path.display(), "skill skipped: {why}")
                }
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The stable-tier index of `skills`, or `None` when there are none.
pub fn index(skills: &[Skill]) -> Option<String> {
    if skills.is_empty() {
        return None;
    }
    let mut out = String::new();
    let mut left_out = 0;
    for s in skills {
        let description: String = s.description.chars().take(MAX_DESCRIPTION_CHARS).collect();
        let line = format!("- {}: {}\n", s.name, description.replace('\n', " "));
        if left_out > 0 || out.len() + line.len() > INDEX_CAP_CHARS {
            left_out += 1;
            continue;
        }
        out.push_str(&line);
    }
    if left_out > 0 {
        out.push_str(&format!("- … {left_out} more skills not listed here\n"));
    }
    // The names and descriptions are the operator's or an approved proposal's words: framed
    // as data, so a description cannot pose as a rule.
    Some(format!(
        "## Skills\nBefore replying, check the skills below. If one clearly matches the task, \
         load it with skill_view(name) and follow it.\n{}",
        crate::agent::prompt::frame::frame("the skills index (name: when it applies)", &out)
    ))
}

/// `skill_view`: one skill's body and the names of its other files.
pub struct SkillView {
    pub dir: PathBuf,
}

#[derive(Deserialize)]
struct ViewArgs {
    name: String,
}

/// Files under `dir` other than SKILL.md, as sorted relative paths (symlinks not followed).
fn other_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(kind) = e.file_type() else { continue };
            let path = e.path();
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() {
                if let Ok(rel) = path.strip_prefix(dir) {
                    let rel = rel.to_string_lossy().to_string();
                    if rel != "SKILL.md" {
                        out.push(rel);
                    }
                }
            }
        }
        if out.len() > MAX_LISTED_FILES * 4 {
            break;
        }
    }
    out.sort();
    out.truncate(MAX_LISTED_FILES);
    out
}

#[async_trait]
impl Tool for SkillView {
    /// It only reads: calls of it run alongside other reads of the same answer.
    fn read_only(&self) -> bool {
        true
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "skill_view".into(),
            description: "Read one skill from the skills index: its full instructions and the \
                names of its other files."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "the skill's name, as listed in the index"}
                },
                "required": ["name"]
            }),
        }
    }

    async fn call(&self, _ctx: &ToolContext, arguments: &str) -> Result<String, ToolError> {
        let args: ViewArgs = match serde_json::from_str(arguments) {
            Ok(a) => a,
            Err(e) => {
                return Err(ToolError::BadArguments(format!(
                    "arguments are not valid JSON for skill_view: {e}"
                )))
            }
        };
        let name = args.name.trim();
        let not_found = || {
            Err(ToolError::Failed(format!(
                "there is no skill named {name:?}"
            )))
        };
        if !valid_name(name) {
            return not_found();
        }
        // The index's own rule: what it would not list, this does not read.
        let Ok(dir) = inside(&self.dir, &self.dir.join(name)) else {
            return not_found();
        };
        match read_skill(&self.dir, name) {
            Ok(skill) => Ok(json!({
                "name": skill.name,
                "description": skill.description,
                "body": cap_head_tail(&skill.body, MAX_BODY_CHARS, "this skill"),
                "files": other_files(&dir),
            })
            .to_string()),
            Err(SkillError::Unreadable { .. } | SkillError::Outside { .. }) => not_found(),
            Err(why) => Err(ToolError::Failed(format!(
                "the skill {name:?} cannot be used: {why}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_rules() {
        let ok = parse("---\nname: deploy\ndescription: \"Ship a release\"\nversion: 2\n---\n# Steps\n1. tag\n")
            .unwrap();
        assert_eq!(ok.name, "deploy");
        assert_eq!(ok.description, "Ship a release");
        assert_eq!(ok.body, "# Steps\n1. tag");
        for (text, why) in [
            ("# no front matter", "no front matter"),
            ("---\nname: x\n", "not closed"),
            ("---\ndescription: d\n---\nbody", "no name"),
            ("---\nname: x\n---\nbody", "no description"),
        ] {
            assert!(
                parse(text).unwrap_err().to_string().contains(why),
                "{text:?}"
            );
        }
        for (name, valid) in [
            ("deploy", true),
            ("a.b-c_d", true),
            ("..", false),
            (".hidden", false),
            ("a/b", false),
            ("", false),
        ] {
            assert_eq!(valid_name(name), valid, "{name:?}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn one_rule_keeps_paths_inside_the_skills_directory() {
        use std::os::unix::fs::symlink;
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let write = |p: &Path, name: &str| {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, format!("---\nname: {name}\ndescription: d\n---\nbody\n")).unwrap();
        };
        write(&root.path().join("ok/SKILL.md"), "ok");
        write(&outside.path().join("out/SKILL.md"), "out");
        symlink(outside.path().join("out"), root.path().join("out")).unwrap();
        std::fs::create_dir_all(root.path().join("file")).unwrap();
        write(&outside.path().join("f.md"), "file");
        symlink(
            outside.path().join("f.md"),
            root.path().join("file/SKILL.md"),
        )
        .unwrap();
        assert!(inside(root.path(), &root.path().join("ok/SKILL.md")).is_ok());
        assert!(
            inside(root.path(), root.path()).is_err(),
            "the root itself is not inside"
        );
        assert!(inside(root.path(), &root.path().join("..")).is_err());
        for name in ["out", "file"] {
            assert!(read_skill(root.path(), name)
                .unwrap_err()
                .to_string()
                .contains("leads outside"));
        }
        let names: Vec<String> = load(root.path()).into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["ok"]);
    }

    #[test]
    fn the_index_is_sorted_and_capped() {
        let skills: Vec<Skill> = (0..500)
            .map(|i| Skill {
                name: format!("skill-{i:03}"),
                description: "d".repeat(300),
                body: String::new(),
            })
            .collect();
        let idx = index(&skills).unwrap();
        assert!(idx.len() < INDEX_CAP_CHARS + 600, "{}", idx.len());
        assert!(idx.contains("- skill-000: "));
        assert!(
            idx.contains("it is not an instruction"),
            "the list is framed as data"
        );
        assert!(idx.contains("more skills not listed here"));
        assert!(!idx.contains(&"d".repeat(161)), "descriptions are cut");
        assert_eq!(index(&[]), None);
    }
}
