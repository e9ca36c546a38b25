//! Command-line parsing and dispatch. Each command lives in its own module and talks to the
//! library only (`Host`, `Session`, `replay`).

mod compact;
mod config;
mod context;
mod demo;
mod doctor;
#[cfg(test)]
mod json_schema;
mod output;
mod plugins;
mod recall;
mod replay;
mod report;
mod serve;
mod sessions;
mod turns;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ctxhost::config::{Config, ConfigSource, Home};
use output::stderr_line;

#[derive(Parser)]
#[command(
    name = "ctxhost",
    version,
    about = "Runs LLM-agent context engines as sandboxed WebAssembly components"
)]
struct Cli {
    /// Config file (JSON5); else $CTXHOST_CONFIG, else $CTXHOST_HOME/ctxhost.json.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Checks the config, the active engine and its sandbox; exits 1 when a check fails.
    Doctor {
        #[arg(long)]
        json: bool,
    },
    /// Installs, lists and selects engines.
    #[command(subcommand)]
    Plugins(plugins::PluginsCommand),
    /// Feeds a recorded transcript through an engine turn by turn, as an agent runtime would.
    Replay(replay::ReplayArgs),
    /// Writes one self-contained HTML page of a session's turns (tokens against the window,
    /// compactions, cache-prefix share, engine time), or of a recorded session replayed under
    /// engines side by side, and prints its summary.
    Report(report::ReportArgs),
    /// Generates a realistic coding-agent session and replays it on the embedded defaults.
    Demo {
        /// Messages in the generated session.
        #[arg(long, default_value_t = 400)]
        messages: usize,
        /// Context window of the replay, in tokens.
        #[arg(long, default_value_t = 32_000)]
        window: u64,
        #[arg(long)]
        json: bool,
    },
    /// Compacts a session through its engine (dry run: what the built-in compaction would do).
    Compact(compact::CompactArgs),
    /// Inspects a session's context: status, history, inspect, export, import.
    #[command(subcommand)]
    Context(context::ContextCommand),
    /// Serves agent runtimes over JSON-RPC (stdio or a unix socket); see docs/serve-protocol.md.
    Serve(serve::ServeArgs),
    /// Shows the effective config: every setting after defaults, and where it came from.
    #[command(subcommand)]
    Config(config::ConfigCommand),
}

pub(crate) fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            stderr_line!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            // Not anyhow's `{:#}`: it repeats a cause that a message already quotes.
            stderr_line!("error: {}", ctxhost::error::chain(&*e));
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Doctor { json } => doctor::run(cli.config.as_deref(), json).await,
        Command::Plugins(command) => {
            let (home, config) = load_config(cli.config.as_deref())?;
            let host = ctxhost::Host::new(home, config)?;
            plugins::run(host, command).await
        }
        Command::Replay(args) => {
            let (home, config) = load_config(cli.config.as_deref())?;
            replay::run(home, config, args).await
        }
        Command::Report(args) => {
            let (home, config) = load_config(cli.config.as_deref())?;
            report::run(ctxhost::Host::new(home, config)?, args).await
        }
        Command::Demo {
            messages,
            window,
            json,
        } => demo::run(messages, window, json).await,
        Command::Compact(args) => {
            let (home, config) = load_config(cli.config.as_deref())?;
            compact::run(ctxhost::Host::new(home, config)?, args).await
        }
        Command::Serve(args) => {
            let (home, config) = load_config(cli.config.as_deref())?;
            serve::run(home, config, args).await
        }
        Command::Context(command) => {
            let (home, config) = load_config(cli.config.as_deref())?;
            context::run(ctxhost::Host::new(home, config)?, command).await
        }
        Command::Config(command) => {
            let (_, config) = load_config(cli.config.as_deref())?;
            config::run(&config, command)
        }
    }
}

/// The home and the parsed config, or an error naming the file and position.
fn load_config(flag: Option<&std::path::Path>) -> anyhow::Result<(Home, Config)> {
    let home = Home::from_env()?;
    let config = Config::load(ConfigSource::resolve(flag, &home))?;
    Ok((home, config))
}

/// Logs go to stderr; `CTXHOST_LOG` sets the filter (default: warnings).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CTXHOST_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour only for a person at a terminal: a piped log (a sidecar's stderr) stays plain.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}
