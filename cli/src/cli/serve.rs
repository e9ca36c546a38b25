//! `ctxhost serve`: the sidecar for agent runtimes (protocol in `docs/serve-protocol.md`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Args;
use ctxhost::config::{Config, Home};
use ctxhost::runtime::RuntimeOptions;
use ctxhost_serve::{ServeOptions, Server};

/// The default pool of a sidecar on stdio: one agent process's sessions, its subagents' and
/// their compactions at once; more stay open, evicted and bootstrapped again when used.
const ONE_AGENT_SLOTS: u32 = 64;

#[derive(Args)]
pub(super) struct ServeArgs {
    /// Serve one client on stdin/stdout (the default).
    #[arg(long, conflicts_with = "socket")]
    stdio: bool,
    /// Serve clients on a unix socket at PATH instead (several clients, one process).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Longest request line accepted, in bytes; a longer one is answered with an error.
    #[arg(long, value_name = "BYTES", default_value_t = ServeOptions::default().max_line_bytes)]
    max_line_bytes: usize,
    /// Do not write each session's turn ledger (`<mirror>.ledger.jsonl`); `health` still
    /// counts turns.
    #[arg(long)]
    no_ledger: bool,
    /// Milliseconds without a request after which a session gives its engine instance back
    /// (the next request bootstraps a fresh one from the mirror); 0: never.
    #[arg(long, value_name = "MS", default_value_t = 300_000)]
    idle_release_ms: u64,
    /// Engine instances live at once (the size of the instance pool); more sessions than that
    /// stay open, the least recently used idle ones giving their instance back. Default: on
    /// stdio (one agent process) 64; on a socket as many as the descriptor limit lets sessions
    /// hold (about 180 at `ulimit -n` 1024), at most 1000. A larger N raises the soft
    /// descriptor limit as far as the hard limit allows.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_instances: Option<u32>,
}

pub(super) async fn run(home: Home, config: Config, args: ServeArgs) -> anyhow::Result<ExitCode> {
    // A pool the operator sized gets the descriptors its sessions need (the soft limit raised
    // toward the hard one); the default pool fits the limit as it is and what the sidecar
    // serves, since reserving slots that never fill is a fifth of a fresh sidecar's start.
    let max_instances = match args.max_instances {
        Some(slots) => {
            ctxhost_serve::raise_descriptor_limit_for(slots);
            slots
        }
        None if args.socket.is_some() => {
            ctxhost_serve::pool_slots(RuntimeOptions::default().max_instances)
        }
        None => ctxhost_serve::pool_slots(ONE_AGENT_SLOTS),
    };
    let runtime = RuntimeOptions {
        cache_dir: Some(home.cache_dir()),
        max_instances,
        ..RuntimeOptions::default()
    };
    let host = Arc::new(ctxhost::Host::with_options(home, config, &runtime)?);
    let options = ServeOptions {
        max_line_bytes: args.max_line_bytes,
        ledger: !args.no_ledger,
        idle_release: (args.idle_release_ms > 0)
            .then(|| std::time::Duration::from_millis(args.idle_release_ms)),
    };
    let server = Server::new(host, options);
    match &args.socket {
        Some(path) => server
            .serve_socket(path)
            .await
            .with_context(|| format!("cannot serve on {}", path.display()))?,
        None => server
            .serve_stdio()
            .await
            .context("cannot serve on stdio")?,
    }
    Ok(ExitCode::SUCCESS)
}
