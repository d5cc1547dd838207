//! The `herald` command line. Thin: parse arguments, load config, hand over to `app` or to a
//! small command in `herald::cli`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use herald::cli::{
    self, HandoffCmd, InboxCmd, MemoryCmd, PairingCmd, PromptCmd, SessionsCmd, SkillsCmd, ToolsCmd,
};
use herald::config::{self, LoadOptions};

/// Allocations counted for the load benchmark (`--features count-alloc`); off by default.
#[cfg(feature = "count-alloc")]
#[global_allocator]
static ALLOC: herald::telemetry::alloc_count::CountingAlloc =
    herald::telemetry::alloc_count::CountingAlloc;

#[derive(Parser)]
#[command(
    name = "herald",
    version,
    about = "A messaging gateway daemon for an AI agent"
)]
struct Cli {
    /// Configuration file (TOML). Without one, Herald runs on its embedded defaults.
    #[arg(long, global = true, env = "HERALD_CONFIG")]
    config: Option<PathBuf>,
    /// Data folder (SQLite database and local state).
    #[arg(long, global = true)]
    data_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon.
    Serve {
        /// Listen address, e.g. 127.0.0.1:8080.
        #[arg(long)]
        listen: Option<String>,
    },
    /// Apply database migrations and exit.
    Migrate,
    /// Check config, store, migrations, the model endpoint and adapter credentials.
    Doctor,
    /// Inspect sessions.
    Sessions {
        #[command(subcommand)]
        command: SessionsCmd,
    },
    /// Dead-lettered messages: list them, send one back.
    Inbox {
        #[command(subcommand)]
        command: InboxCmd,
    },
    /// Approve unknown users who asked for access with a pairing code.
    Pairing {
        #[command(subcommand)]
        command: PairingCmd,
    },
    /// Inspect handoff capsules.
    Handoff {
        #[command(subcommand)]
        command: HandoffCmd,
    },
    /// Show what the model is told: the system prompt of a new session, layer by layer.
    Prompt {
        #[command(subcommand)]
        command: PromptCmd,
    },
    /// Skills: list them, and approve or reject what the agent proposed.
    Skills {
        #[command(subcommand)]
        command: SkillsCmd,
    },
    /// Tools the model may call: builtins and MCP servers' tools, with origin and approval.
    Tools {
        #[command(subcommand)]
        command: ToolsCmd,
    },
    /// Long-term memory of a person: show it, or edit one file and see what would be dropped.
    Memory {
        #[command(subcommand)]
        command: MemoryCmd,
    },
    /// Manage scheduled jobs (stored; a running daemon picks changes up within 30 s).
    Cron {
        #[command(subcommand)]
        command: cli::cron::CronCmd,
    },
    /// Ask the running daemon to re-read its configuration (SIGHUP does the same).
    Reload,
    /// Inbound webhooks (`[[hooks]]`): their runs, and a dry run of a saved payload.
    Hooks {
        #[command(subcommand)]
        command: cli::hooks::HooksCmd,
    },
    /// What the model calls cost: by person, lane, cron job, model or day.
    Usage(cli::UsageArgs),
    /// Run case files against the configured agent on throwaway stores (docs/evals.md).
    Eval(cli::eval::EvalArgs),
    /// Write a lane's recorded conversation as a case file for `herald eval`.
    Export(cli::eval::ExportArgs),
    /// Re-run a lane's recorded conversation against this configuration, turn by turn.
    Replay(cli::eval::ReplayArgs),
    /// The isolated decode worker the daemon starts: one job on stdin, one answer on stdout.
    #[command(hide = true)]
    Decode,
}

fn main() -> std::process::ExitCode {
    // The isolated decode worker (media::decode): first, before config, TLS or a runtime.
    if std::env::args_os().nth(1).is_some_and(|a| a == "decode") {
        return herald::media::decode::worker::main();
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    if let Command::Doctor = cli.command {
        return doctor(&cli);
    }
    if let Command::Decode = cli.command {
        return herald::media::decode::worker::main();
    }
    let listen = match &cli.command {
        Command::Serve { listen } => listen.clone(),
        _ => None,
    };
    let source = LoadOptions {
        file: cli.config.clone(),
        data_dir: cli.data_dir.clone(),
        listen,
        use_env: true,
    };
    let config = match config::load(&source) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("herald: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    if let Command::Serve { .. } = cli.command {
        if let Err(e) = cli::port_free(config.server.listen) {
            eprintln!("herald: {e}");
            return std::process::ExitCode::FAILURE;
        }
    }
    let mut log = config.log.clone();
    if matches!(cli.command, Command::Eval(_) | Command::Replay(_)) {
        // Each case starts a whole Herald: its start and stop lines would bury the table.
        log.level = "warn".into();
    }
    let (telemetry, _) = herald::telemetry::init(&log, &config.telemetry);
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("herald: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async move {
        match cli.command {
            Command::Serve { .. } => {
                cli::doctor_files::log_at_start(&config);
                // The signal is awaited next to the daemon, not in a task of its own.
                let shutdown = CancellationToken::new();
                let run = herald::app::run_from(config, Some(source), shutdown.clone());
                tokio::pin!(run);
                tokio::select! {
                    r = &mut run => r,
                    _ = cli::wait_for_signal() => {
                        shutdown.cancel();
                        run.await
                    }
                }
            }
            Command::Migrate => cli::migrate(&config).await,
            Command::Doctor | Command::Decode => {
                unreachable!("handled before the config is loaded")
            }
            Command::Sessions { command } => cli::sessions(&config, command).await,
            Command::Inbox { command } => cli::inbox(&config, command).await,
            Command::Pairing { command } => cli::pairing(&config, command).await,
            Command::Handoff { command } => cli::handoff(&config, command).await,
            Command::Cron { command } => cli::cron::cron(&config, command).await,
            Command::Reload => cli::reload::reload(&config).await,
            Command::Hooks { command } => cli::hooks::hooks(&config, command).await,
            Command::Usage(args) => cli::usage(&config, args).await,
            Command::Prompt { command } => cli::prompt(&config, command).await,
            Command::Skills { command } => cli::skills(&config, command).await,
            Command::Tools { command } => cli::tools(&config, command).await,
            Command::Memory { command } => cli::memory(&config, command).await,
            Command::Eval(args) => herald::eval::eval(&config, args).await,
            Command::Export(args) => herald::eval::export(&config, args).await,
            Command::Replay(args) => herald::eval::replay(&config, args).await,
        }
    });
    // Last: the spans of the shutdown itself are queued by now.
    drop(rt);
    telemetry.shutdown();
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("herald: {}", cli::error_chain(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

/// Runs before the config is loaded: a config that does not load is the doctor's first finding,
/// not a reason to stop.
fn doctor(cli: &Cli) -> std::process::ExitCode {
    let opts = LoadOptions {
        file: cli.config.clone(),
        data_dir: cli.data_dir.clone(),
        listen: None,
        use_env: true,
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("herald: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let report = rt.block_on(cli::doctor::run(&opts));
    print!("{}", report.render());
    if report.config_failed() {
        std::process::ExitCode::from(2)
    } else if report.failed() {
        std::process::ExitCode::FAILURE
    } else {
        std::process::ExitCode::SUCCESS
    }
}
