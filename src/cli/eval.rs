//! The arguments of `herald eval`, `herald export` and `herald replay`, and nothing else: the
//! engine that runs them starts whole apps, so it lives above `app` in `crate::eval`, which
//! takes these.

use std::path::PathBuf;

use clap::Args;

/// `herald eval CASES…`.
#[derive(Args, Debug, Clone)]
pub struct EvalArgs {
    /// Case files (TOML, or YAML by a .yaml/.yml name); one file may hold many cases.
    #[arg(required = true)]
    pub cases: Vec<PathBuf>,
    /// Write the results as JSON and JUnit XML: into a folder (eval.json, eval.xml), or to
    /// FILE.json and FILE.xml for a FILE name.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Run each case this many times and report its pass rate.
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// Cases run at once (default: the number of cores).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Tools that may run, by name (comma-separated); every other tool is refused, and a tool
    /// that needs a person's approval is asked about and denied.
    #[arg(long, value_delimiter = ',')]
    pub allow_tools: Vec<String>,
    /// Run the same cases on a second configuration and print both side by side.
    #[arg(long)]
    pub compare: Option<PathBuf>,
}

/// `herald export LANE`.
#[derive(Args, Debug, Clone)]
pub struct ExportArgs {
    /// The lane (e.g. telegram:12345).
    pub lane: String,
    /// Only messages from this time on (RFC 3339, a date, or an age such as 2h or 3d).
    #[arg(long)]
    pub since: Option<String>,
    /// Write the case file here instead of stdout.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// `herald replay LANE --config other.toml`: the global `--config` is the configuration the
/// conversation is re-run against; the recording is read (read-only) from that
/// configuration's store, or from the store of `--store-config` when given.
#[derive(Args, Debug, Clone)]
pub struct ReplayArgs {
    /// The lane whose recorded conversation is re-run.
    pub lane: String,
    /// The configuration whose store holds the recording (default: --config's own).
    #[arg(long)]
    pub store_config: Option<PathBuf>,
    /// Only messages from this time on (as for export).
    #[arg(long)]
    pub since: Option<String>,
    /// Tools that may run (as for eval).
    #[arg(long, value_delimiter = ',')]
    pub allow_tools: Vec<String>,
}
