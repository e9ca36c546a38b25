//! What the host provides to an engine.
//!
//! These call into ctxhost inside the component. In a native build (a unit test) they call the
//! [`TestHost`](crate::testing::TestHost) the test runs under, and panic without one.

use crate::context::Entries;
use crate::wit::host as imports;
use crate::wit::recall;
use crate::wit::types::{CompactRequest, Compaction, EntryRef, HostError, Message};

pub use imports::{CompletionRequest, LogLevel};
pub use recall::{Hit as SearchHit, SearchRequest};

// In the component every import goes to the host; natively, to the test host. One macro keeps
// the two paths side by side so they cannot drift apart.
macro_rules! dispatch {
    ($wasm:expr, $native:expr) => {{
        #[cfg(target_arch = "wasm32")]
        let result = $wasm;
        #[cfg(not(target_arch = "wasm32"))]
        let result = $native;
        result
    }};
}

/// Logs a message into the host's logs, attributed to the engine and the session.
/// The [`log`](crate::log) module has one function per level.
pub fn log(level: LogLevel, message: &str) {
    dispatch!(
        imports::log(level, message),
        crate::testing::with_host("log", |h| h.log(level, message))
    )
}

/// The host's token estimate for a piece of text. [`crate::estimate_tokens`] computes the same
/// estimate without crossing into the host.
pub fn estimate_tokens(text: &str) -> u32 {
    dispatch!(
        imports::estimate_tokens(text),
        crate::testing::with_host("estimate-tokens", |_| crate::tokens::estimate_tokens(text))
    )
}

/// The session's current context, as [`ContextEngine::assemble`](crate::ContextEngine::assemble)
/// would receive it (the way for a fresh instance to see entries written before it started).
pub fn context_entries() -> Entries {
    dispatch!(
        Entries::from_columns(imports::context_entries()),
        crate::testing::with_host("context-entries", |h| h.context_entries())
    )
}

/// The tool call each of these entries answers (`None` for an entry that is not a tool result);
/// a reference not in the current context is an error. One call for many entries:
/// [`Plan::keep_as_placeholder`](crate::Plan::keep_as_placeholder) asks for one.
pub fn tool_call_ids(entries: &[EntryRef]) -> Result<Vec<Option<String>>, HostError> {
    dispatch!(
        imports::tool_call_ids(entries),
        crate::testing::with_host("tool-call-ids", |h| h.tool_call_ids(entries))
    )
}

/// Reads entries of this session's transcript; an unknown reference is an error.
pub fn read_entries(entries: &[EntryRef]) -> Result<Vec<Message>, HostError> {
    dispatch!(
        imports::read_entries(entries),
        crate::testing::with_host("read-entries", |h| h.read_entries(entries))
    )
}

/// Runs the host's built-in compaction (prune, then summarize) and returns what it would write,
/// `None` when there is nothing to compact. [`crate::delegate_compact`] wraps it into a
/// [`CompactResult`](crate::CompactResult).
pub fn delegate_compaction(request: &CompactRequest) -> Result<Option<Compaction>, HostError> {
    dispatch!(
        imports::delegate_compaction(request),
        crate::testing::with_host("delegate-compaction", |h| h.delegate_compaction(request))
    )
}

/// The engine's configuration (`plugins.entries.<id>.config`), already validated by the host
/// against the plugin's schema; an empty object when none is set (or, defensively, when the
/// host's text is not JSON). [`crate::config`] deserializes it into a type of the engine's.
pub fn config() -> serde_json::Value {
    serde_json::from_str(&config_json())
        .unwrap_or_else(|_| serde_json::Value::Object(serde_json::Map::new()))
}

/// The engine's configuration as the JSON text the host sent (`{}` when none is set).
pub fn config_json() -> String {
    dispatch!(
        imports::config(),
        crate::testing::with_host("config", |h| h.config_json())
    )
}

/// A completion through the operator's configured model. Needs the `llm` capability in the
/// plugin's manifest; [`HostError::PermissionDenied`] otherwise.
pub fn complete(request: &CompletionRequest) -> Result<String, HostError> {
    dispatch!(
        imports::complete(request),
        crate::testing::with_host("complete", |h| h.complete(request))
    )
}

/// Full-text search over every message of the session, compacted ones included (the index the
/// host's `ctx_search` tool uses), best hits first. An empty or oversized query is
/// [`HostError::InvalidArgument`].
pub fn search(request: &SearchRequest) -> Result<Vec<SearchHit>, HostError> {
    dispatch!(
        recall::search(request),
        crate::testing::with_host("search", |h| h.search(request))
    )
}
