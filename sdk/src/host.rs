//! What the host provides to an engine.
//!
//! These call into ctxhost; they are only available inside the component (in a native build,
//! e.g. a unit test, calling them panics). Keep logic you want to unit-test in plain functions.

use crate::bindings::ctxhost::engine::host as imports;
use crate::{CompactRequest, Compaction, ContextEntry, EntryRef, HostError, Message};

pub use imports::{CompletionRequest, LogLevel};

/// Logs a message into the host's logs, attributed to the engine and the session.
/// The [`log`](crate::log) module has one function per level.
pub fn log(level: LogLevel, message: &str) {
    imports::log(level, message);
}

/// The host's token estimate for a piece of text. [`crate::estimate_tokens`] computes the same
/// estimate without crossing into the host.
pub fn estimate_tokens(text: &str) -> u32 {
    imports::estimate_tokens(text)
}

/// The session's current context, as [`ContextEngine::assemble`](crate::ContextEngine::assemble)
/// would receive it.
pub fn context_entries() -> Vec<ContextEntry> {
    imports::context_entries()
}

/// Reads entries of this session's transcript; an unknown reference is an error.
pub fn read_entries(entries: &[EntryRef]) -> Result<Vec<Message>, HostError> {
    imports::read_entries(entries)
}

/// Runs the host's runtime compaction (prune, then summarize) and returns what it would write,
/// `None` when there is nothing to compact. [`crate::delegate_compact`] wraps it into a
/// [`CompactResult`](crate::CompactResult).
pub fn delegate_compaction(request: &CompactRequest) -> Result<Option<Compaction>, HostError> {
    imports::delegate_compaction(request)
}

/// The engine's configuration (`plugins.entries.<id>.config`), already validated by the host
/// against the plugin's schema; an empty object when none is set (or, defensively, when the
/// host's text is not JSON).
pub fn config() -> serde_json::Value {
    serde_json::from_str(&config_json())
        .unwrap_or_else(|_| serde_json::Value::Object(serde_json::Map::new()))
}

/// The engine's configuration as the JSON text the host sent (`{}` when none is set).
pub fn config_json() -> String {
    imports::config()
}

/// A completion through the operator's configured model. Needs the `llm` capability in the
/// plugin's manifest; [`HostError::PermissionDenied`] otherwise.
pub fn complete(request: &CompletionRequest) -> Result<String, HostError> {
    imports::complete(request)
}
