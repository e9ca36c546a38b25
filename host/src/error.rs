//! The library's error: every failure names what and where (file, field, engine, function).

use std::path::PathBuf;

use crate::config::ConfigError;
use crate::plugins::PluginError;
use ctxhost_runtime::{EngineError, RuntimeError};

/// Everything the library's session and host operations can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The config cannot be read or is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// An engine package cannot be found, installed or used.
    #[error(transparent)]
    Plugin(#[from] PluginError),
    /// An engine cannot be loaded or instantiated.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// An engine call failed (a trap, a deadline, a limit, or the engine's own error).
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The session's recall index cannot be opened, written or rebuilt, or a search or
    /// expansion asked for something invalid.
    #[error(transparent)]
    Recall(#[from] ctxhost_recall::RecallError),
    /// A tool call names no tool the session offers, or its arguments do not match the
    /// tool's schema; nothing ran.
    #[error("tool `{tool}`: {problem}")]
    ToolCall {
        /// The tool's name as called.
        tool: String,
        /// What is wrong (the field, for arguments).
        problem: String,
    },
    /// The transcript cannot be read, parsed or written.
    #[error(transparent)]
    Transcript(#[from] ctxhost_transcript::TranscriptError),
    /// The message was written to the transcript, but the engine did not ingest it.
    #[error("message saved as entry {entry_id}, but {source}")]
    Ingest {
        /// The entry's id in the transcript.
        entry_id: String,
        /// Why ingest failed.
        source: EngineError,
    },
    /// A file the host reads or writes failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
    /// A session key that cannot name a transcript file.
    #[error("invalid session key `{key}`: {problem}")]
    SessionKey {
        /// The key as given (an excerpt when it is long: errors are sent back to clients).
        key: String,
        /// What is wrong with it.
        problem: String,
    },
    /// Another process (or another open of it in this one) holds the session: one writer per
    /// mirror, so it is not opened twice.
    #[error(
        "session `{key}` is open in another process ({holder}); close it there or wait for that process to exit ({})",
        lock.display()
    )]
    SessionInUse {
        /// The session's key (an excerpt when it is long).
        key: String,
        /// The session's lock file.
        lock: PathBuf,
        /// What the holder wrote about itself: its pid and since when.
        holder: String,
    },
    /// The engine answered `compact` with a failure.
    #[error("engine `{engine}` could not compact session `{session}`: {reason}")]
    CompactionFailed {
        /// The engine's id.
        engine: String,
        /// The session's key.
        session: String,
        /// The engine's reason.
        reason: String,
    },
    /// A message handed to the session is not an AgentMessage; nothing was written.
    #[error("message {index} cannot be appended: {problem}")]
    InvalidMessage {
        /// The message's position in what was handed over, from 0.
        index: usize,
        /// What is wrong with it.
        problem: String,
    },
    /// A mirror sync that does not start where the mirror ends.
    #[error("sync from position {from}, but the mirror holds {mirror} messages")]
    SyncFrom {
        /// The position the sync starts at.
        from: usize,
        /// How many messages the mirror holds.
        mirror: usize,
    },
    /// The request does not fit the window even after compacting.
    #[error(transparent)]
    Overflow(#[from] ContextOverflow),
    /// A subagent rollback names a handle the engine never issued for this session.
    #[error(
        "rollback handle {handle} was never issued by engine `{engine}` for session `{session}`"
    )]
    UnknownRollback {
        /// The engine's id.
        engine: String,
        /// The session's key.
        session: String,
        /// The handle given.
        handle: u64,
    },
}

/// The library's result, with [`Error`] by default.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The request does not fit the window even after compacting (built by the session, from its
/// request's breakdown).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, thiserror::Error, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[error(
    "context overflow: the request needs {total} tokens but the window of {window} leaves {available} after the {reserve}-token response reserve, even after compaction (system {system}, bootstrap {bootstrap}, skills {skills}, tools {tools}, history {history}, engine {engine}, current message {current})"
)]
pub struct ContextOverflow {
    /// Tokens the whole request needs.
    pub total: u64,
    /// The model's context window, in tokens.
    pub window: u64,
    /// The response reserve, in tokens.
    pub reserve: u64,
    /// What the window leaves for the request after the reserve.
    pub available: u64,
    /// The rest of the system prompt (runtime, hints, extra prompt), in tokens.
    pub system: u64,
    /// The bootstrap files' tokens.
    pub bootstrap: u64,
    /// The skills list's tokens.
    pub skills: u64,
    /// The tool definitions' tokens.
    pub tools: u64,
    /// The history's tokens (what the engine assembled).
    pub history: u64,
    /// The engine's system-prompt addition, in tokens.
    pub engine: u64,
    /// The current message's tokens.
    pub current: u64,
}

/// An error and its sources as one line: the message, then each source after `: `, leaving
/// out a source whose text the message before it already shows, and a source's leading
/// subject (`F: cannot open`) when the text before already ends with it (`compacting F`).
/// Every error a person or a client reads is printed this way (the CLI's too: anyhow's `{:#}`
/// repeats a cause that a message quotes).
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            let rest = match cause_text.split_once(": ") {
                Some((subject, rest)) if text.ends_with(subject) => rest,
                _ => &cause_text,
            };
            text = format!("{text}: {rest}");
        }
        source = cause.source();
    }
    text
}

/// `text` as an error may quote it: at most `max_bytes` of it (cut on a character boundary)
/// and how long it really was, so a client's 10 MiB key or method never comes back whole.
pub fn excerpt(text: &str, max_bytes: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max_bytes {
        return text.into();
    }
    let cut = text.floor_char_boundary(max_bytes);
    format!("{}… ({} bytes)", &text[..cut], text.len()).into()
}

/// How much of a client-supplied name (a key, a method) an error quotes.
pub const QUOTE_BYTES: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_excerpt_keeps_short_text_and_cuts_long_text_on_a_character() {
        assert_eq!(excerpt("short", 10), "short");
        let long = "é".repeat(10);
        assert_eq!(excerpt(&long, 5), "éé… (20 bytes)");
    }

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
        let kept_as_source = ctxhost_runtime::RuntimeError::Link {
            origin: "x.wasm".into(),
            cause,
        };
        assert_eq!(
            chain(&kept_as_source),
            "x.wasm: cannot link the component: linking: unknown import `acme:db/query`"
        );
        let path_said_by_both = anyhow::Error::from(Error::Io {
            path: "/x/F.jsonl".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        })
        .context("compacting /x/F.jsonl");
        assert_eq!(
            chain(&*path_said_by_both),
            "compacting /x/F.jsonl: entity not found"
        );
    }
}
