//! One `Host` and its open sessions, served to any number of connections: each connection's
//! lines are read in order and handed to the session they name, or answered by the server.

use std::path::Path;
use std::sync::Arc;

use tokio::io::{AsyncBufRead, AsyncWrite};
use tokio::sync::{OwnedSemaphorePermit, watch};
use tokio::task::JoinSet;

use ctxhost::Host;

use crate::actor::{Shared, suspend_others};
use crate::methods::{self, Call, ServerCall, answer};
use crate::output::{self, Output, Reply};
use crate::protocol;
use crate::residency::{self, Residency};
use crate::rpc::{self, Line, Request, RpcError, code};
use crate::sessions::Sessions;
use crate::{health, scratch, stdio};

/// The server's knobs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Longest request line accepted; a longer one is answered with `-32003` and skipped.
    pub max_line_bytes: usize,
    /// Write each answered turn to the session's ledger (`<mirror>.ledger.jsonl`); `health`
    /// counts turns either way.
    pub ledger: bool,
    /// A session that receives no request for this long gives its engine instance back (the
    /// next request bootstraps a fresh one from the mirror), so idle sessions do not hold
    /// instances the pool could give to busy ones. None: never.
    pub idle_release: Option<std::time::Duration>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            max_line_bytes: 16 * 1024 * 1024,
            ledger: true,
            idle_release: Some(std::time::Duration::from_secs(300)),
        }
    }
}

/// One `Host` and its open sessions, shared by every connection.
pub struct Server {
    shared: Arc<Shared>,
    options: ServeOptions,
    sessions: Arc<Sessions>,
    stop: watch::Sender<bool>,
}

impl Server {
    /// A server for `host`'s sessions; [`Server::serve_stdio`], [`Server::serve_socket`] and
    /// [`Server::serve_connection`] serve connections that share the sessions it opens.
    pub fn new(host: Arc<Host>, options: ServeOptions) -> Arc<Self> {
        sweep_abandoned_scratch();
        let (capacity, limit) = residency::capacity(host.runtime().instance_capacity());
        tracing::debug!("at most {capacity} sessions hold an instance at once ({limit})");
        preload(&host);
        let shared = Arc::new(Shared {
            host,
            health: Arc::new(health::HealthBoard::new(options.ledger)),
            residency: Residency::new(capacity, limit),
            idle_release: options.idle_release,
        });
        Arc::new(Self {
            sessions: Sessions::new(shared.clone()),
            shared,
            options,
            stop: watch::channel(false).0,
        })
    }

    /// Serves one client on stdin/stdout until EOF or `shutdown`, then closes every session.
    pub async fn serve_stdio(self: &Arc<Self>) -> std::io::Result<()> {
        // Read on a worker, not on the thread blocked on the runtime: a request's task then
        // starts on the worker that read its line instead of waking another one (a fifth of a
        // small request's round trip).
        let server = self.clone();
        let connection = tokio::spawn(async move {
            let input = tokio::io::BufReader::new(stdio::input());
            server.serve_connection(input, stdio::output()).await;
        });
        let served = connection.await.map_err(std::io::Error::other);
        self.close_all().await;
        served
    }

    /// Serves clients on a unix socket until one sends `shutdown`, then closes every session.
    pub async fn serve_socket(self: &Arc<Self>, path: &Path) -> std::io::Result<()> {
        let listener = bind(path).await?;
        let mut stop = self.stop.subscribe();
        let mut connections = JoinSet::new();
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                _ = stop.wait_for(|stop| *stop) => break,
            };
            let stream = match accepted {
                Ok((stream, _)) => stream,
                Err(e) if residency::out_of_descriptors(&e) => {
                    self.make_room(&e).await;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let (read, write) = stream.into_split();
            let server = self.clone();
            connections.spawn(async move {
                let read = tokio::io::BufReader::new(read);
                server.serve_connection(read, write).await;
            });
        }
        connections.join_all().await;
        self.close_all().await;
        let _ = std::fs::remove_file(path);
        Ok(())
    }

    /// Serves one client on any byte stream (an embedder's pipe, a test's socket pair) until
    /// EOF, `shutdown` or a server-wide stop; answers every request it read before returning.
    /// Sessions stay open for other connections: `close_all` ends them.
    pub async fn serve_connection<R, W>(self: &Arc<Self>, mut input: R, output: W)
    where
        R: AsyncBufRead + Unpin,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (out, writer) = output::writer(output);
        let mut tasks = JoinSet::new();
        let mut stop = self.stop.subscribe();
        let mut buf = Vec::new();
        let mut shutdown = None;
        while shutdown.is_none()
            && let Some((request, permit)) =
                (self.next_request(&mut input, &mut buf, &out, &mut stop)).await
        {
            let reply = out.reply_to(request.id.clone(), permit);
            shutdown = self.dispatch(request, reply, &out, &mut tasks);
        }
        tasks.join_all().await;
        if let Some(reply) = shutdown {
            self.close_all().await;
            reply(Ok(answer(protocol::Done {})));
            let _ = self.stop.send(true);
        }
        drop(out);
        writer.finish().await;
    }

    /// The next request of a connection and the permit its answer holds, answering at once the
    /// lines refused; None at the connection's end or the server's stop.
    async fn next_request<R: AsyncBufRead + Unpin>(
        &self,
        input: &mut R,
        buf: &mut Vec<u8>,
        out: &Output,
        stop: &mut watch::Receiver<bool>,
    ) -> Option<(Request, OwnedSemaphorePermit)> {
        loop {
            // Backpressure: a client that does not read its answers is not read either.
            let permit = tokio::select! {
                permit = out.admit() => permit,
                _ = stop.wait_for(|stop| *stop) => return None,
            };
            let line = tokio::select! {
                line = rpc::read_line(input, buf, self.options.max_line_bytes) => line,
                _ = stop.wait_for(|stop| *stop) => return None,
            };
            match self.request(line) {
                Read::Request(request) => return Some((request, permit)),
                Read::Refused(id, error) => out.send(&id, Err(error), permit),
                Read::Nothing => {}
                Read::End => return None,
            }
        }
    }

    /// Hands a request to what answers it: the server, or its session's actor; `shutdown`'s
    /// reply is given back, to be sent once every session is closed.
    fn dispatch(
        self: &Arc<Self>,
        request: Request,
        reply: Reply,
        out: &Output,
        tasks: &mut JoinSet<()>,
    ) -> Option<Reply> {
        match methods::parse(&request.method, &request.params) {
            Err(error) => reply(Err(error)),
            Ok(Call::Server(call)) => {
                let server = self.clone();
                tasks.spawn(async move { reply(server.answer(call).await) });
            }
            Ok(Call::Shutdown) => return Some(reply),
            Ok(Call::Session(key, call)) => {
                self.sessions.route(key, call, reply, out.notifier());
            }
        }
        None
    }

    /// What a line read means: a request, a refusal to answer at once, nothing (a blank
    /// line), or the end of the connection.
    fn request(&self, line: std::io::Result<Line>) -> Read {
        let refused = match line {
            Ok(Line::Text(text)) => return Read::of(&text),
            Ok(Line::Eof) => return Read::End,
            Ok(Line::TooLong(bytes)) => too_long(bytes, self.options.max_line_bytes),
            Ok(Line::NotUtf8) => RpcError::new(code::PARSE_ERROR, "the line is not valid UTF-8"),
            Err(e) => {
                tracing::warn!("cannot read requests: {e}");
                return Read::End;
            }
        };
        Read::Refused(rpc::null_id(), refused)
    }

    /// Out of descriptors for a client: idle sessions give theirs back, and the client is
    /// accepted once there is one (it waits in the backlog meanwhile).
    async fn make_room(&self, error: &std::io::Error) {
        tracing::warn!("cannot accept a client: {error}");
        let residency = &self.shared.residency;
        suspend_others(residency.short_of(residency.limit())).await;
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }

    /// Answers a method of the server's own.
    async fn answer(&self, call: ServerCall) -> Result<serde_json::Value, RpcError> {
        match call {
            ServerCall::Initialize(params) => {
                if let Some(client) = &params.client {
                    let version = client.version.as_deref().unwrap_or("?");
                    tracing::info!(client = %client.name, version, "initialize");
                }
                let max_line_bytes = self.options.max_line_bytes;
                crate::status::initialize(&self.shared, max_line_bytes)
                    .await
                    .map(answer)
            }
            ServerCall::Health(params) => {
                let key = params.session_key.as_deref();
                let open = self.session_count();
                Ok(answer(crate::status::health(&self.shared, open, key).await))
            }
        }
    }

    /// Closes every session (each actor finishes its queue, then disposes its engine instance).
    pub async fn close_all(&self) {
        self.sessions.close_all().await;
    }

    /// How many sessions are open in this server (an actor each).
    pub fn session_count(&self) -> usize {
        self.sessions.count()
    }
}

/// A line of a connection, read.
enum Read {
    Request(Request),
    /// Answered with this error at once (with the request's id when it had one).
    Refused(rpc::Id, RpcError),
    Nothing,
    End,
}

impl Read {
    /// A line of text: a request, a refused one, or nothing (a blank line).
    fn of(text: &str) -> Read {
        if text.trim().is_empty() {
            return Read::Nothing;
        }
        match rpc::parse_request(text) {
            Ok(request) => Read::Request(request),
            Err(rejected) => Read::Refused(rejected.id, rejected.error),
        }
    }
}

/// The refusal of a line longer than the server reads.
fn too_long(bytes: usize, max_line_bytes: usize) -> RpcError {
    RpcError::new(
        code::LINE_TOO_LONG,
        format!(
            "the request line has {bytes} bytes, more than the limit of {max_line_bytes} (--max-line-bytes); it was skipped"
        ),
    )
    .with_data(rpc::ErrorData {
        bytes: Some(bytes),
        max_line_bytes: Some(max_line_bytes),
        ..Default::default()
    })
}

/// Removes what killed servers left in the temporary folder, beside the first request rather
/// than before it: listing a busy `/tmp` is no part of an answer. The runtime finishes it
/// before the process exits.
fn sweep_abandoned_scratch() {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn_blocking(scratch::remove_abandoned)),
        Err(_) => scratch::remove_abandoned(),
    }
}

/// Loads the engine while the first request is read and its mirror created (a request that
/// needs it sooner waits for this load, never starts another).
fn preload(host: &Arc<Host>) {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        let host = host.clone();
        runtime.spawn(async move {
            if let Err(e) = host.active_engine().await {
                tracing::debug!("loading the engine ahead of the first request: {e}");
            }
        });
    }
}

/// Listens on `path`, taking the place of a socket a previous server left when it died (a
/// live one would still accept).
async fn bind(path: &Path) -> std::io::Result<tokio::net::UnixListener> {
    if path.exists() {
        if tokio::net::UnixStream::connect(path).await.is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("{}: another server is listening here", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    tokio::net::UnixListener::bind(path)
}
