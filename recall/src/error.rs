//! What can go wrong, split by whose fault it is: a caller's bad argument (the model's or the
//! operator's, answered as a readable error) or the index file itself (rebuilt, then reported
//! only if rebuilding fails too).

use std::path::PathBuf;

/// A recall failure.
#[derive(Debug, thiserror::Error)]
pub enum RecallError {
    /// The request itself is wrong (an empty query, an unknown entry id, a field out of range);
    /// the message names the field and what it allows.
    #[error("{0}")]
    InvalidArgument(String),
    /// The index file could not be opened, written or rebuilt.
    #[error("recall index {}: {source}", path.display())]
    Index {
        /// The index file.
        path: PathBuf,
        /// What SQLite said.
        source: rusqlite::Error,
    },
}

impl RecallError {
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::InvalidArgument(message.into())
    }
}
