//! What one connection sends, and how much of it may wait: every request read holds a permit
//! until its answer is written, so a client that never reads stops being read after
//! [`MAX_UNANSWERED`] requests instead of making the server buffer answers without end; and a
//! connection that ends gives a client that does not read [`CLOSING_GRACE`] to take its last
//! answers, so a shutdown finishes whatever any client does.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::rpc::{self, RpcError};

/// Sends a response line to the connection a request came from (nothing for notifications).
pub(crate) type Reply = Box<dyn FnOnce(Result<Value, RpcError>) + Send>;

/// Sends a notification (method, params) to the connection a request came from.
pub type Notify = Arc<dyn Fn(&str, Value) + Send + Sync>;

/// Requests of one connection read but not yet answered on the wire.
pub(super) const MAX_UNANSWERED: usize = 256;

/// How long a connection that has ended waits for its client to read what is left.
pub(super) const CLOSING_GRACE: Duration = Duration::from_secs(5);

/// A line to write; the permit of the request it answers is released once it is written.
struct Outgoing {
    line: String,
    _permit: Option<OwnedSemaphorePermit>,
}

/// The sending side of a connection.
#[derive(Clone)]
pub(super) struct Output {
    lines: mpsc::UnboundedSender<Outgoing>,
    unanswered: Arc<Semaphore>,
}

/// The task writing a connection's lines, and how to tell it the connection ended.
pub(super) struct Writer {
    task: JoinHandle<()>,
    closing: watch::Sender<Option<Instant>>,
}

impl Writer {
    /// Waits for the answers still to come to be written, giving up on a client that has not
    /// read for [`CLOSING_GRACE`] since now.
    pub(super) async fn finish(self) {
        let _ = self.closing.send(Some(Instant::now()));
        let _ = self.task.await;
    }
}

/// Starts the task writing lines to `output` in the order they are produced.
pub(super) fn writer<W>(mut output: W) -> (Output, Writer)
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (lines, mut queue) = mpsc::unbounded_channel::<Outgoing>();
    let (closing, mut closed_at) = watch::channel(None::<Instant>);
    let task = tokio::spawn(async move {
        // Resolves once the connection has ended and its client has had its grace.
        let mut given_up = Box::pin(async move {
            let Ok(at) = closed_at.wait_for(Option::is_some).await.map(|at| *at) else {
                return std::future::pending::<()>().await;
            };
            tokio::time::sleep_until(at.expect("waited for") + CLOSING_GRACE).await;
        });
        while let Some(mut out) = queue.recv().await {
            out.line.push('\n');
            let written = tokio::select! {
                // A write that can go ahead does, even past the grace.
                biased;
                written = output.write_all(out.line.as_bytes()) => written.is_ok(),
                () = &mut given_up => {
                    tracing::warn!("a client did not read its answers for {CLOSING_GRACE:?} after its connection ended; they were dropped");
                    false
                }
            };
            if !written || (queue.is_empty() && output.flush().await.is_err()) {
                break; // the client went away: later answers are dropped unsent
            }
        }
        let _ = tokio::time::timeout(CLOSING_GRACE, output.flush()).await;
    });
    let output = Output {
        lines,
        unanswered: Arc::new(Semaphore::new(MAX_UNANSWERED)),
    };
    (output, Writer { task, closing })
}

impl Output {
    /// Waits until one more request may be read (fewer than [`MAX_UNANSWERED`] wait).
    pub(super) async fn admit(&self) -> OwnedSemaphorePermit {
        self.unanswered
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed")
    }

    /// Sends the answer to request `id`; `permit` is released once it is written.
    pub(super) fn send(
        &self,
        id: &RawValue,
        result: Result<Value, RpcError>,
        permit: OwnedSemaphorePermit,
    ) {
        let line = rpc::response(id, result);
        let _ = self.lines.send(Outgoing {
            line,
            _permit: Some(permit),
        });
    }

    /// How a request's answer is sent (nothing for a notification, whose permit is released
    /// when it has run).
    pub(super) fn reply_to(&self, id: Option<rpc::Id>, permit: OwnedSemaphorePermit) -> Reply {
        let output = self.clone();
        Box::new(move |result| {
            if let Some(id) = id {
                output.send(&id, result, permit);
            }
        })
    }

    /// How the server's own notifications reach this connection.
    pub(super) fn notifier(&self) -> Notify {
        let lines = self.lines.clone();
        Arc::new(move |method, params| {
            let _ = lines.send(Outgoing {
                line: rpc::notification(method, params),
                _permit: None,
            });
        })
    }
}
