//! What goes wrong reading a config; every message names the file.

use std::path::PathBuf;

/// A config that cannot be read or is not valid; every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but cannot be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// The config file.
        path: PathBuf,
        /// Why reading failed.
        source: std::io::Error,
    },
    /// The file is not JSON5.
    #[error("config {path}:{line}:{column}: {message}")]
    Syntax {
        /// The config file.
        path: PathBuf,
        /// The line of the syntax error, from 1 (0 when the parser gave none).
        line: usize,
        /// The column of the syntax error, from 1 (0 when the parser gave none).
        column: usize,
        /// What the parser found.
        message: String,
    },
    /// A key holds a value ctxhost cannot use.
    #[error(
        "config {}{}: `{field}`: {message}",
        path.display(),
        line.map(|l| format!(":{l}")).unwrap_or_default()
    )]
    Field {
        /// The config file.
        path: PathBuf,
        /// The line the key is written on, when it is.
        line: Option<usize>,
        /// The key's dotted path, e.g. `plugins.entries.lcm.limits.memoryMiB`.
        field: String,
        /// What is wrong with its value.
        message: String,
    },
    /// Neither `CTXHOST_HOME` nor `HOME` is set, so there is no default place for state.
    #[error(
        "no home directory: set CTXHOST_HOME (or HOME) so ctxhost knows where to keep its state"
    )]
    NoHome,
}
