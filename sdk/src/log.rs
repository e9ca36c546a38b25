//! Logging into the host's logs, attributed to the engine and the session.
//!
//! ```no_run
//! ctxhost_sdk::log::info("window trimmed");
//! ctxhost_sdk::log::warn(format!("{} entries dropped", 3));
//! ```

use crate::host::{LogLevel, log};

/// Logs at `trace` level.
pub fn trace(message: impl AsRef<str>) {
    log(LogLevel::Trace, message.as_ref());
}
/// Logs at `debug` level.
pub fn debug(message: impl AsRef<str>) {
    log(LogLevel::Debug, message.as_ref());
}
/// Logs at `info` level.
pub fn info(message: impl AsRef<str>) {
    log(LogLevel::Info, message.as_ref());
}
/// Logs at `warn` level.
pub fn warn(message: impl AsRef<str>) {
    log(LogLevel::Warn, message.as_ref());
}
/// Logs at `error` level.
pub fn error(message: impl AsRef<str>) {
    log(LogLevel::Error, message.as_ref());
}
