//! `herald memory show|edit PERSON`: the operator's side of long-term memory.
//!
//! PERSON is a `[[people]]` name or a sender identity (`telegram:123`), mapped the way the
//! daemon maps it. `show` prints each file as the next session would read it, with every entry
//! that reading leaves out and why. `edit` opens a copy of one file in `$VISUAL`/`$EDITOR`,
//! writes it back by rename, and reports what the daemon would drop from it — the same reading
//! as the prompt's, so what an operator is told is what a session gets.

use anyhow::{bail, Context};
use clap::{Subcommand, ValueEnum};

use crate::agent::memory::{write_atomic, Loaded, MemoryFiles, Target};
use crate::config::{safe_segment, Config};

#[derive(Subcommand)]
pub enum MemoryCmd {
    /// Print PERSON's MEMORY.md and USER.md as a new session reads them.
    Show { person: String },
    /// Open one of PERSON's files in $VISUAL or $EDITOR, then report what would be dropped.
    Edit {
        person: String,
        /// Which file: memory (MEMORY.md, the agent's notes) or user (USER.md).
        #[arg(long, value_enum, default_value = "memory")]
        file: FileArg,
    },
}

#[derive(Clone, Copy, ValueEnum)]
pub enum FileArg {
    Memory,
    User,
}

/// The folder name for PERSON: a `[[people]]` name, an identity `platform:sender`, or a folder
/// name as `show` prints it (`telegram-123`).
pub(super) fn resolve(config: &Config, person: &str) -> anyhow::Result<String> {
    if let Some(p) = crate::domain::Person::parse(person) {
        if let Some(k) = config.person(p.platform.as_str(), &p.id) {
            return Ok(k);
        }
    }
    if safe_segment(person) {
        return Ok(person.to_string());
    }
    bail!("{person:?} is not a person: give a [[people]] name or an identity like telegram:123")
}

/// `show` of a name that is neither a `[[people]]` name, nor an identity, nor a folder that
/// exists says so instead of printing two empty files for a typo, and says where a web chat
/// sender's memory is: the web page's sender is an identity like any other (`web:NAME`).
fn known(config: &Config, files: &MemoryFiles, person: &str, key: &str) -> anyhow::Result<()> {
    let identity = person.contains(':');
    let listed = config.people.iter().any(|p| p.name == person);
    let exists = files
        .path(key, Target::Memory)
        .and_then(|p| p.parent().map(|d| d.is_dir()))
        .unwrap_or(false);
    if identity || listed || exists {
        return Ok(());
    }
    let root = config.server.data_dir.join("memory");
    bail!(
        "{person:?} is not a known person: no [[people]] entry has that name and {} does not \
         exist. Give a [[people]] name or a sender identity: telegram:USER_ID, discord:USER_ID, \
         or web:SENDER for the web chat (its memory is in {}/web-SENDER/ unless a [[people]] \
         entry lists web:SENDER)",
        root.join(key).display(),
        root.display()
    )
}

fn report(files: &MemoryFiles, person: &str, t: Target, l: &Loaded) {
    let path = files.path(person, t).expect("resolved key");
    println!(
        "── {} · {}/{} chars · {} entries ──",
        path.display(),
        l.chars(),
        files.cap(t),
        l.entries.len()
    );
    for e in &l.entries {
        println!("- {e}");
    }
    for (line, why) in &l.dropped {
        let head: String = line.chars().take(80).collect();
        println!("dropped: {head:?} ({why})");
    }
    if l.oversized {
        println!("dropped: everything after the first 64 KiB (the file is larger)");
    }
}

pub async fn memory(config: &Config, cmd: MemoryCmd) -> anyhow::Result<()> {
    let files = MemoryFiles::from_config(config);
    match cmd {
        MemoryCmd::Show { person } => {
            let key = resolve(config, &person)?;
            known(config, &files, &person, &key)?;
            if !config.memory.enabled {
                println!("(memory.enabled is false: sessions get no snapshot)");
            }
            for t in [Target::Memory, Target::User] {
                report(&files, &key, t, &files.load_quiet(&key, t));
            }
            Ok(())
        }
        MemoryCmd::Edit { person, file } => {
            let key = resolve(config, &person)?;
            let t = match file {
                FileArg::Memory => Target::Memory,
                FileArg::User => Target::User,
            };
            let path = files.path(&key, t).expect("resolved key");
            let dir = path.parent().expect("a folder");
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            let copy = dir.join(format!(".{}.edit", t.file_name()));
            let before = std::fs::read(&path).unwrap_or_default();
            std::fs::write(&copy, &before)?;
            let editor = std::env::var("VISUAL")
                .or_else(|_| std::env::var("EDITOR"))
                .unwrap_or_else(|_| "vi".into());
            let status = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("{editor} \"$1\""))
                .arg("sh")
                .arg(&copy)
                .status()
                .with_context(|| format!("starting the editor {editor:?}"))?;
            if !status.success() {
                let _ = std::fs::remove_file(&copy);
                bail!(
                    "the editor exited with {status}; {} is unchanged",
                    path.display()
                );
            }
            let text = std::fs::read_to_string(&copy);
            let _ = std::fs::remove_file(&copy);
            let text = text.with_context(|| "the edited file is not UTF-8 text; nothing saved")?;
            if text.as_bytes() == before.as_slice() {
                println!("no change");
            } else {
                write_atomic(&path, &text)
                    .with_context(|| format!("writing {}", path.display()))?;
                println!("saved {}", path.display());
            }
            let l = files.load_quiet(&key, t);
            report(&files, &key, t, &l);
            if l.dropped.is_empty() && !l.oversized {
                println!("every entry will reach the next session");
            } else {
                println!(
                    "the entries marked dropped will not reach a session; edit again to fix them"
                );
            }
            Ok(())
        }
    }
}
