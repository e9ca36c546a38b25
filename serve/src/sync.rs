//! Where a runtime's history stands against the session's mirror: what `session.commit` did and
//! the state every reply about the mirror carries. A leaf: the protocol, the checks, the error
//! data and the mirror all speak of it.

use schemars::JsonSchema;
use serde::Serialize;

/// What `commit` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Commit {
    Committed,
    Duplicate,
}

/// Where the runtime's history stands against the mirror.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SyncState {
    /// The runtime's messages in the mirror.
    pub(crate) message_count: usize,
    /// The client's fingerprint of the last of them (opaque to the server).
    pub(crate) last_fingerprint: Option<String>,
}
