//! `ctxhost context {status,history,inspect,export,import,search,expand}`: what a session's
//! context holds, how it got there, a portable bundle to start a fresh session from it, and
//! (`super::recall`) everything it ever held. Each subcommand builds a report that prints as
//! lines or, with `--json`, as JSON.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use ctxhost::Host;

use super::output::emit;
use super::sessions::SessionFlag;

mod bundle;
mod history;
mod inspect;
mod measure;
mod status;

// The reports' JSON shapes are documented from their types (see `json_schema`).
#[cfg(test)]
pub(super) use {
    bundle::{ExportReport, ImportReport},
    history::HistoryReport,
    inspect::InspectReport,
    status::StatusReport,
};

#[derive(Subcommand)]
pub(super) enum ContextCommand {
    /// Tokens / window, compaction count, last compaction, degradation risk (reads only the
    /// end of the transcript).
    Status {
        #[command(flatten)]
        session: SessionFlag,
        /// Count the system prompt this workspace adds (bootstrap files, skills) too.
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Every compaction on the active branch, and every turn `serve` answered (the ledger).
    History {
        #[command(flatten)]
        session: SessionFlag,
        #[arg(long)]
        json: bool,
    },
    /// The request exactly as the next model call would get it: system prompt sections,
    /// truncation notes, messages, with tokens per block and a breakdown that adds up.
    Inspect {
        #[command(flatten)]
        session: SessionFlag,
        /// The agent's workspace (bootstrap files, skills); default agents.defaults.workspace.
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Writes a portable bundle (latest summary, checkpoint data, recent entries, metadata).
    Export {
        #[command(flatten)]
        session: SessionFlag,
        /// The bundle to write.
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Starts a fresh session from a bundle.
    Import {
        /// The bundle to read.
        file: PathBuf,
        /// The new session (a transcript path, or a key under $CTXHOST_HOME/sessions/);
        /// default `imported-<id>`.
        #[arg(long)]
        session: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Searches every message of the session, compacted ones included (what the agent's
    /// ctx_search tool sees).
    Search(super::recall::SearchArgs),
    /// Shows the original text of entries: an id, a summary's citation, a range (what the
    /// agent's ctx_expand tool returns).
    Expand(super::recall::ExpandArgs),
}

pub(super) async fn run(host: Host, command: ContextCommand) -> anyhow::Result<ExitCode> {
    match command {
        ContextCommand::Status {
            session,
            workspace,
            json,
        } => emit(&status::status(&host, &session, workspace)?, json)?,
        ContextCommand::History { session, json } => {
            emit(&history::history(&host, &session)?, json)?
        }
        ContextCommand::Inspect {
            session,
            workspace,
            json,
        } => {
            let (_, path) = session.existing(&host)?;
            let settings = measure::prompt_settings(&host, workspace);
            let inspected = inspect::inspect(&host, &path, &settings).await?;
            emit(
                &inspect::InspectReport::new(&path, &settings, &inspected),
                json,
            )?
        }
        ContextCommand::Export {
            session,
            file,
            json,
        } => emit(&bundle::export(&host, &session, file)?, json)?,
        ContextCommand::Import {
            file,
            session,
            json,
        } => emit(&bundle::import(&host, file, session.as_deref())?, json)?,
        ContextCommand::Search(args) => emit(&super::recall::search(&host, &args)?, args.json())?,
        ContextCommand::Expand(args) => emit(&super::recall::expand(&host, &args)?, args.json())?,
    }
    Ok(ExitCode::SUCCESS)
}
