//! The library's error: every failure names what and where (file, field, engine, function).

use std::path::PathBuf;

use crate::config::ConfigError;
use crate::plugins::PluginError;
use crate::runtime::{EngineError, RuntimeError};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Plugin(#[from] PluginError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Transcript(#[from] ctxhost_transcript::TranscriptError),
    /// The message was written to the transcript, but the engine did not ingest it.
    #[error("message saved as entry {entry_id}, but {source}")]
    Ingest {
        entry_id: String,
        source: EngineError,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid session key `{key}`: {problem}")]
    SessionKey { key: String, problem: String },
    #[error("engine `{engine}` could not compact session `{session}`: {reason}")]
    CompactionFailed {
        engine: String,
        session: String,
        reason: String,
    },
    /// A message handed to the session is not an AgentMessage; nothing was written.
    #[error("message {index} cannot be appended: {problem}")]
    InvalidMessage { index: usize, problem: String },
    /// A mirror sync that does not start where the mirror ends.
    #[error("sync from position {from}, but the mirror holds {mirror} messages")]
    SyncFrom { from: usize, mirror: usize },
    #[error(transparent)]
    Overflow(#[from] ContextOverflow),
    #[error(
        "rollback handle {handle} was never issued by engine `{engine}` for session `{session}`"
    )]
    UnknownRollback {
        engine: String,
        session: String,
        handle: u64,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The request does not fit the window even after compacting (built by the session, from its
/// request's breakdown).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, thiserror::Error)]
#[serde(rename_all = "camelCase")]
#[error(
    "context overflow: the request needs {total} tokens but the window of {window} leaves {available} after the {reserve}-token response reserve, even after compaction (system {system}, bootstrap {bootstrap}, skills {skills}, tools {tools}, history {history}, engine {engine}, current message {current})"
)]
pub struct ContextOverflow {
    pub total: u64,
    pub window: u64,
    pub reserve: u64,
    pub available: u64,
    pub system: u64,
    pub bootstrap: u64,
    pub skills: u64,
    pub tools: u64,
    pub history: u64,
    pub engine: u64,
    pub current: u64,
}

/// An error and its sources as one line: the message, then each source after `: `, leaving
/// out a source whose text the message before it already shows. For where no error-chain
/// printer (anyhow's `{:#}`) runs: log lines and JSON-RPC messages.
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text = format!("{text}: {cause_text}");
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_shows_each_cause_once() {
        let io = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let shown_in_message = Error::Io {
            path: "/x/s.jsonl".into(),
            source: io,
        };
        let text = chain(&shown_in_message);
        assert_eq!(text.matches("permission denied").count(), 1, "{text}");
        let cause = wasmtime::Error::msg("unknown import `acme:db/query`").context("linking");
        let kept_as_source = crate::runtime::RuntimeError::Link {
            origin: "x.wasm".into(),
            cause,
        };
        assert_eq!(
            chain(&kept_as_source),
            "x.wasm: cannot link the component: linking: unknown import `acme:db/query`"
        );
    }
}
