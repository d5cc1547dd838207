//! The `herald` command line. Thin: parse arguments, load config, hand over to `app` or to a
//! small command in `herald::cli`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use herald::cli::{self, PairingCmd, SessionsCmd};
use herald::config::{self, LoadOptions};

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
    /// Inspect sessions.
    Sessions {
        #[command(subcommand)]
        command: SessionsCmd,
    },
    /// Approve unknown users who asked for access with a pairing code.
    Pairing {
        #[command(subcommand)]
        command: PairingCmd,
    },
}

fn main() -> std::process::ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    let listen = match &cli.command {
        Command::Serve { listen } => listen.clone(),
        _ => None,
    };
    let config = match config::load(&LoadOptions {
        file: cli.config.clone(),
        data_dir: cli.data_dir.clone(),
        listen,
        use_env: true,
    }) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("herald: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    herald::telemetry::init_logging(&config.log);
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
                let shutdown = CancellationToken::new();
                let signal = shutdown.clone();
                tokio::spawn(async move {
                    cli::wait_for_signal().await;
                    signal.cancel();
                });
                herald::app::run(config, shutdown).await
            }
            Command::Migrate => cli::migrate(&config).await,
            Command::Sessions { command } => cli::sessions(&config, command).await,
            Command::Pairing { command } => cli::pairing(&config, command).await,
        }
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("herald: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
