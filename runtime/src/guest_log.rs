//! Where a guest's words go: the `log` import and its stdout/stderr both land in `tracing`,
//! attributed to the engine and session, within a per-call byte budget.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// The shared sink of one instance's log output.
#[derive(Debug)]
pub(super) struct LogSink {
    engine: Arc<str>,
    session: String,
    limit: usize,
    used: AtomicUsize,
    dropped: AtomicU64,
}

impl LogSink {
    pub(super) fn new(engine: Arc<str>, session: String, limit: usize) -> Arc<Self> {
        Arc::new(Self {
            engine,
            session,
            limit,
            used: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
        })
    }

    /// Starts a new call's budget; reports what the previous call had dropped.
    pub(super) fn reset(&self) {
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        self.used.store(0, Ordering::Relaxed);
        if dropped > 0 {
            tracing::warn!(engine = %self.engine, session = %self.session, dropped, "engine log lines over the per-call budget were dropped");
        }
    }

    /// The host's note that this engine asked for `what` it was not granted: at info the first
    /// time in this process for the engine, then at debug. Asking is how an engine learns it
    /// may not (the contract does not show it its grants), so it is no fault to warn of, and
    /// a session per instance must not repeat it.
    pub(super) fn denied(&self, what: &str, text: &str) {
        let level = if first_denial(&self.engine, what) {
            Level::Info
        } else {
            Level::Debug
        };
        self.emit(level, "host", text);
    }

    /// Lines dropped in the current call so far.
    #[cfg(test)]
    pub(super) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub(super) fn emit(&self, level: Level, stream: &str, text: &str) {
        let used = self.used.fetch_add(text.len(), Ordering::Relaxed);
        if used.saturating_add(text.len()) > self.limit {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // Escape sequences from a guest must not reach an operator's terminal.
        let cleaned;
        let text = if text
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t')
        {
            cleaned = super::text::message(text, usize::MAX);
            cleaned.as_str()
        } else {
            text
        };
        let (engine, session) = (&*self.engine, self.session.as_str());
        match level {
            Level::Trace => tracing::trace!(engine, session, stream, "{text}"),
            Level::Debug => tracing::debug!(engine, session, stream, "{text}"),
            Level::Info => tracing::info!(engine, session, stream, "{text}"),
            Level::Warn => tracing::warn!(engine, session, stream, "{text}"),
            Level::Error => tracing::error!(engine, session, stream, "{text}"),
        }
    }
}

/// Whether `engine` is denied `what` for the first time in this process.
fn first_denial(engine: &str, what: &str) -> bool {
    static SEEN: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());
    // A poisoned lock only means another thread panicked while logging: the list is still whole.
    let mut seen = SEEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if seen.iter().any(|(e, w)| e == engine && w == what) {
        return false;
    }
    seen.push((engine.to_string(), what.to_string()));
    true
}

/// A guest stdout or stderr, split into lines for the sink.
pub(super) struct GuestOutput {
    sink: Arc<LogSink>,
    stream: &'static str,
    level: Level,
}

impl GuestOutput {
    pub(super) fn stdout(sink: Arc<LogSink>) -> Self {
        Self {
            sink,
            stream: "stdout",
            level: Level::Info,
        }
    }
    pub(super) fn stderr(sink: Arc<LogSink>) -> Self {
        Self {
            sink,
            stream: "stderr",
            level: Level::Warn,
        }
    }
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(LineWriter {
            sink: self.sink.clone(),
            stream: self.stream,
            level: self.level,
            pending: Vec::new(),
        })
    }
}

/// Longest partial line kept while waiting for its newline; longer output is emitted in pieces.
const MAX_PENDING: usize = 4096;

struct LineWriter {
    sink: Arc<LogSink>,
    stream: &'static str,
    level: Level,
    pending: Vec<u8>,
}

impl LineWriter {
    fn emit_pending(&mut self) {
        if !self.pending.is_empty() {
            let text = String::from_utf8_lossy(&self.pending);
            self.sink
                .emit(self.level, self.stream, text.trim_end_matches('\r'));
            self.pending.clear();
        }
    }
}

impl AsyncWrite for LineWriter {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        for chunk in buf.split_inclusive(|b| *b == b'\n') {
            let (line, complete) = match chunk.strip_suffix(b"\n") {
                Some(line) => (line, true),
                None => (chunk, false),
            };
            self.pending.extend_from_slice(line);
            if complete || self.pending.len() >= MAX_PENDING {
                self.emit_pending();
            }
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.emit_pending();
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.poll_flush(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_drops_and_counts_lines_past_the_limit() {
        let sink = LogSink::new("e".into(), "s".into(), 10);
        sink.emit(Level::Info, "log", "12345");
        sink.emit(Level::Info, "log", "12345");
        assert_eq!(sink.dropped(), 0);
        sink.emit(Level::Info, "log", "1");
        assert_eq!(sink.dropped(), 1);
        sink.reset();
        sink.emit(Level::Info, "log", "12345");
        assert_eq!(sink.dropped(), 0);
    }

    #[test]
    fn a_denial_is_noted_once_per_engine_and_capability() {
        assert!(first_denial("denied-a", "complete"));
        assert!(!first_denial("denied-a", "complete"));
        assert!(first_denial("denied-a", "search"));
        assert!(first_denial("denied-b", "complete"));
    }
}
