//! The image's build context, rebuilt without Docker: the files `.dockerignore` lets through
//! and the build stage's `COPY` lines take, copied to a temporary folder where cargo must
//! load the workspace offline and with the lock file as it is. A declared `[[bench]]` whose
//! file the Dockerfile left out made `docker build` fail with "can't find 'load' bench"; this
//! catches that (and a missing workspace member or `include_str!` file) without an engine.

use std::path::{Path, PathBuf};
use std::process::Command;

use globset::GlobMatcher;

use super::support::*;

/// `.dockerignore` as Docker reads it: patterns in order, the last match wins, `!` re-includes,
/// and a pattern that matches a folder matches everything in it.
struct Ignore(Vec<(bool, GlobMatcher)>);

impl Ignore {
    fn parse(text: &str) -> Ignore {
        let rules = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| {
                let (keep, pat) = match l.strip_prefix('!') {
                    Some(p) => (true, p),
                    None => (false, l),
                };
                let pat = pat.trim_start_matches('/').trim_end_matches('/');
                let glob = globset::GlobBuilder::new(pat)
                    .literal_separator(true)
                    .build()
                    .unwrap_or_else(|e| panic!(".dockerignore: {l:?}: {e}"));
                (keep, glob.compile_matcher())
            })
            .collect();
        Ignore(rules)
    }

    fn excluded(&self, rel: &str) -> bool {
        let parents: Vec<&str> = rel
            .match_indices('/')
            .map(|(i, _)| &rel[..i])
            .chain([rel])
            .collect();
        let mut excluded = false;
        for (keep, glob) in &self.0 {
            if parents.iter().any(|p| glob.is_match(p)) {
                excluded = !keep;
            }
        }
        excluded
    }
}

/// (source, destination) of each `COPY` in the first (build) stage, without `--from`.
fn build_stage_copies(dockerfile: &str) -> Vec<(String, String)> {
    let joined = dockerfile.replace("\\\n", " ");
    let mut stages = 0;
    let mut out = Vec::new();
    for line in joined.lines().map(str::trim) {
        if line.starts_with("FROM ") {
            stages += 1;
            continue;
        }
        let Some(rest) = line.strip_prefix("COPY ") else {
            continue;
        };
        assert!(stages > 0, "COPY before FROM: {line}");
        if stages > 1 {
            // The runtime stage copies from the context too, but cargo never sees those.
            continue;
        }
        let words: Vec<&str> = rest
            .split_whitespace()
            .filter(|w| !w.starts_with("--"))
            .collect();
        let (dest, sources) = words.split_last().expect("COPY has a destination");
        for s in sources {
            out.push((s.to_string(), dest.to_string()));
        }
    }
    assert!(stages >= 1, "the Dockerfile has no FROM");
    out
}

fn files_under(root: &Path, rel: &str, out: &mut Vec<String>) {
    let path = root.join(rel);
    if path.is_dir() {
        for e in std::fs::read_dir(&path).unwrap() {
            let name = e.unwrap().file_name().into_string().unwrap();
            files_under(root, &format!("{rel}/{name}"), out);
        }
    } else if path.is_file() {
        out.push(rel.to_string());
    }
}

/// Copies what the build stage would see into `ctx` and returns the paths copied.
fn assemble(ctx: &Path) -> Vec<String> {
    let root = repo("");
    let ignore = Ignore::parse(&read(".dockerignore"));
    let dockerfile = read("Dockerfile");
    let mut copied = Vec::new();
    for (src, dest) in build_stage_copies(&dockerfile) {
        let mut files = Vec::new();
        files_under(&root, &src, &mut files);
        assert!(
            !files.is_empty(),
            "COPY {src}: not in the repository (the build stage would fail)"
        );
        for f in files.into_iter().filter(|f| !ignore.excluded(f)) {
            // `COPY a b ./` puts files in the workdir; `COPY dir ./dir` keeps the dir's inside.
            let inside = Path::new(&f)
                .strip_prefix(&src)
                .map(Path::to_path_buf)
                .unwrap_or_default();
            let target: PathBuf = if dest.ends_with('/') && inside.as_os_str().is_empty() {
                ctx.join(dest.trim_start_matches("./")).join(&f)
            } else {
                ctx.join(dest.trim_start_matches("./")).join(inside)
            };
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            std::fs::copy(root.join(&f), &target).unwrap();
            copied.push(f);
        }
    }
    copied
}

#[test]
fn the_docker_build_stage_context_resolves_offline_and_locked() {
    let started = std::time::Instant::now();
    let ctx = tempfile::tempdir().unwrap();
    let copied = assemble(ctx.path());
    for needed in ["Cargo.toml", "Cargo.lock", "src/main.rs"] {
        assert!(
            copied.iter().any(|c| c == needed),
            "the build stage lacks {needed}"
        );
    }
    assert!(
        !copied.iter().any(|c| c.starts_with("target/")),
        ".dockerignore lets the target dir in"
    );
    // Files the sources embed at compile time must be in the context too.
    let embed = regex::Regex::new(r#"(include_str|include_bytes|migrate)!\("([^"]+)"\)"#).unwrap();
    for file in copied
        .iter()
        .filter(|c| c.starts_with("src/") && c.ends_with(".rs"))
    {
        let text = std::fs::read_to_string(ctx.path().join(file)).unwrap();
        for cap in embed.captures_iter(&text) {
            let (macro_name, arg) = (&cap[1], &cap[2]);
            let path = if macro_name == "migrate" {
                ctx.path().join(arg)
            } else {
                ctx.path().join(file).parent().unwrap().join(arg)
            };
            assert!(
                path.exists(),
                "{file}: {macro_name}!({arg:?}) is not in the image's build context"
            );
        }
    }
    // `cargo fetch` loads every workspace member with all its targets (a declared bench whose
    // file is missing fails here, as in `cargo build`; `cargo metadata` does not notice) and
    // checks the lock file, without compiling anything.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["fetch", "--locked", "--offline"])
        .current_dir(ctx.path())
        .output()
        .expect("run cargo fetch");
    assert!(
        out.status.success(),
        "cargo cannot load the image's build context (docker build would fail the same way): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!(
        "docker build context: {} files, resolved in {:?}",
        copied.len(),
        started.elapsed()
    );
}

#[test]
fn dockerignore_follows_docker_rules() {
    let ignore = Ignore::parse("*\n!src/\n!Cargo.toml\n/target\n*.db\n");
    assert!(!ignore.excluded("src/main.rs"));
    assert!(!ignore.excluded("Cargo.toml"));
    assert!(ignore.excluded("benches/load.rs"));
    assert!(ignore.excluded("target/debug/herald"));
    assert!(ignore.excluded("herald.db"));
}
