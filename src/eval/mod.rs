//! Evals, export and replay (issue #51): the conversations Herald records become a
//! regression suite an operator runs before changing a model, a prompt, a skill or a tool.
//!
//! Every case runs the real core (`App::start`) on a throwaway data dir and SQLite store
//! (`sandbox.rs`), never the live store, with no platform adapter, cron, nightly closer, MCP
//! server or memory provider, and with tools refused unless `--allow-tools` names them; what
//! a person would have received is read back from the throwaway store (`run.rs`). The module
//! sits above `app`, which it drives; `cli::eval` holds only the arguments.
//!
//! - `case.rs` the case file, `expect.rs` and `judge.rs` the checks, `suite.rs` the parallel
//!   runs, `report.rs` the table and the JSON / JUnit files;
//! - `export.rs` a lane's recorded conversation as a case file, `replay.rs` that conversation
//!   re-run against another configuration, turn by turn.

mod case;
mod expect;
mod export;
mod judge;
mod replay;
mod report;
mod run;
mod sandbox;
mod suite;
#[cfg(test)]
mod tests;

use crate::cli::eval::EvalArgs;
use crate::config::{Config, LoadOptions};

pub use case::{Case, CaseFile, CaseMessage, Expect};
pub use export::export;
pub use replay::replay;
pub use suite::CaseResult;

/// The evals layer's errors that a caller tells apart.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// A case file that cannot be read or makes no sense; nothing ran.
    #[error("case file {0}")]
    Cases(String),
    /// Cases ran and some failed (the table says which).
    #[error("{failed} of {total} cases failed")]
    Failed { failed: usize, total: usize },
}

/// `herald eval`: prints the table, writes the report files, and fails when a case failed.
pub async fn eval(config: &Config, args: EvalArgs) -> anyhow::Result<()> {
    let cases = case::load(&args.cases)?;
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let sandbox = sandbox::Sandbox::new(config, &args.allow_tools).await?;
    let started = std::time::Instant::now();
    let results = suite::run_suite(&sandbox, &cases, args.repeat, jobs, "cases").await?;
    let elapsed = started.elapsed();
    let currency = &config.budget.currency;
    print!("{}", report::table(&results, currency));
    println!("wall time {:.2} s ({jobs} at once)", elapsed.as_secs_f64());
    if let Some(dir) = &args.report {
        let (json, xml) = report::write(dir, &results)?;
        println!("report: {} {}", json.display(), xml.display());
    }
    let mut failed = results.iter().filter(|r| !r.passed).count();
    let mut total = results.len();
    if let Some(other) = &args.compare {
        let second = load_other(other, config)?;
        let sandbox = sandbox::Sandbox::new(&second, &args.allow_tools).await?;
        let theirs = suite::run_suite(&sandbox, &cases, args.repeat, jobs, "compare").await?;
        println!();
        let name = other
            .file_name()
            .map_or("second".into(), |n| n.to_string_lossy());
        print!(
            "{}",
            report::side_by_side(&results, &theirs, ("config", &name))
        );
        failed += theirs.iter().filter(|r| !r.passed).count();
        total += theirs.len();
    }
    if failed > 0 {
        return Err(EvalError::Failed { failed, total }.into());
    }
    Ok(())
}

/// A second configuration file, loaded the way `--config` is (defaults, the file, `HERALD_*`).
fn load_other(file: &std::path::Path, _first: &Config) -> anyhow::Result<Config> {
    let config = crate::config::load(&LoadOptions {
        file: Some(file.to_path_buf()),
        data_dir: None,
        listen: None,
        use_env: true,
    })
    .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    Ok(config)
}
