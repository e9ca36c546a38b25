//! `ctxhost serve`: a sidecar that lets an agent runtime in any language drive sessions over
//! newline-delimited JSON-RPC 2.0 (stdio or a unix socket). The protocol is written down in
//! `docs/serve-protocol.md`.
//!
//! Each open session is an actor: a task that owns its `Mirror` and runs that session's
//! requests one after another in the order they were read, so requests for different
//! sessions run concurrently and requests for one session in order.

mod checks;
mod health;
mod lock;
mod methods;
pub(crate) mod mirror;
mod output;
mod protocol;
pub(crate) mod rpc;
mod schema;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncWrite};
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};

use crate::host::Host;
use methods::{Call, SessionCall, answer};
use mirror::Mirror;
use rpc::{Line, RpcError, code};

pub use lock::{HomeLock, LockError};
pub use schema::{REGENERATE as REGENERATE_SCHEMA, protocol_schema, protocol_schema_text};

/// The protocol version `initialize` reports.
pub const PROTOCOL_VERSION: u32 = 1;

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

/// Sends a response line to the connection a request came from (nothing for notifications).
type Reply = Box<dyn FnOnce(Result<Value, RpcError>) + Send>;

/// Sends a notification (method, params) to the connection a request came from.
pub type Notify = Arc<dyn Fn(&str, Value) + Send + Sync>;

struct Job {
    call: SessionCall,
    reply: Reply,
    notify: Notify,
}

struct Actor {
    /// Tells this actor from a later one for the same key.
    id: u64,
    jobs: mpsc::UnboundedSender<Job>,
    task: JoinHandle<()>,
}

#[derive(Default)]
struct Sessions {
    open: HashMap<String, Actor>,
    /// The id of the next actor started.
    next_actor: u64,
    /// Actors of closed sessions still finishing their queue; a new actor for the same key
    /// waits for its predecessor so one file never has two writers.
    retiring: HashMap<String, JoinHandle<()>>,
    /// Child session key → the parent whose `prepareSpawn` named it.
    children: HashMap<String, String>,
}

/// One `Host` and its open sessions, shared by every connection.
pub struct Server {
    host: Arc<Host>,
    options: ServeOptions,
    sessions: Mutex<Sessions>,
    /// Every session's turns, for `health`.
    health: Arc<health::HealthBoard>,
    stop: watch::Sender<bool>,
}

impl Server {
    /// A server for `host`'s sessions; [`Server::serve_stdio`], [`Server::serve_socket`] and
    /// [`Server::serve_connection`] serve connections that share the sessions it opens.
    pub fn new(host: Arc<Host>, options: ServeOptions) -> Arc<Self> {
        mirror::remove_stale_scratch_dirs();
        Arc::new(Self {
            host,
            sessions: Mutex::default(),
            health: Arc::new(health::HealthBoard::new(options.ledger)),
            options,
            stop: watch::channel(false).0,
        })
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, Sessions> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Serves one client on stdin/stdout until EOF or `shutdown`, then closes every session.
    pub async fn serve_stdio(self: &Arc<Self>) -> std::io::Result<()> {
        let input = tokio::io::BufReader::new(tokio::io::stdin());
        self.serve_connection(input, tokio::io::stdout()).await;
        self.close_all().await;
        Ok(())
    }

    /// Serves clients on a unix socket until one sends `shutdown`, then closes every session.
    pub async fn serve_socket(self: &Arc<Self>, path: &Path) -> std::io::Result<()> {
        if path.exists() {
            // A socket left by a previous server that died; a live one would still accept.
            if tokio::net::UnixStream::connect(path).await.is_ok() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AddrInUse,
                    format!("{}: another server is listening here", path.display()),
                ));
            }
            std::fs::remove_file(path)?;
        }
        let listener = tokio::net::UnixListener::bind(path)?;
        let mut stop = self.stop.subscribe();
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let (stream, _) = accepted?;
                    let (read, write) = stream.into_split();
                    let server = self.clone();
                    connections.spawn(async move {
                        server
                            .serve_connection(tokio::io::BufReader::new(read), write)
                            .await;
                    });
                }
                _ = stop.wait_for(|stop| *stop) => break,
            }
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
        let mut shutdown_id = None;
        loop {
            // Backpressure: a client that does not read its answers is not read either.
            let permit = tokio::select! {
                permit = out.admit() => permit,
                _ = stop.wait_for(|stop| *stop) => break,
            };
            let line = tokio::select! {
                line = rpc::read_line(&mut input, &mut buf, self.options.max_line_bytes) => line,
                _ = stop.wait_for(|stop| *stop) => break,
            };
            let text = match line {
                Ok(Line::Text(text)) => text,
                Ok(Line::Eof) => break,
                Ok(Line::TooLong(bytes)) => {
                    let error = RpcError::new(
                        code::LINE_TOO_LONG,
                        format!(
                            "the request line has {bytes} bytes, more than the limit of {} (--max-line-bytes); it was skipped",
                            self.options.max_line_bytes
                        ),
                    )
                    .with_data(rpc::ErrorData {
                        bytes: Some(bytes),
                        max_line_bytes: Some(self.options.max_line_bytes),
                        ..Default::default()
                    });
                    out.send(&rpc::null_id(), Err(error), permit);
                    continue;
                }
                Ok(Line::NotUtf8) => {
                    let error = RpcError::new(code::PARSE_ERROR, "the line is not valid UTF-8");
                    out.send(&rpc::null_id(), Err(error), permit);
                    continue;
                }
                Err(e) => {
                    tracing::warn!("cannot read requests: {e}");
                    break;
                }
            };
            if text.trim().is_empty() {
                continue;
            }
            let request = match rpc::parse_request(&text) {
                Ok(request) => request,
                Err(rejected) => {
                    out.send(&rejected.id, Err(rejected.error), permit);
                    continue;
                }
            };
            let reply = out.reply_to(request.id.clone(), permit);
            match methods::parse(&request.method, &request.params) {
                Err(error) => reply(Err(error)),
                Ok(Call::Server(run)) => {
                    let server = self.clone();
                    tasks.spawn(async move { reply(run(server).await) });
                }
                Ok(Call::Shutdown) => {
                    shutdown_id = Some(reply);
                    break;
                }
                Ok(Call::Session(key, call)) => self.route(key, call, reply, out.notifier()),
            }
        }
        tasks.join_all().await;
        if let Some(reply) = shutdown_id {
            self.close_all().await;
            reply(Ok(answer(protocol::Done {})));
            let _ = self.stop.send(true);
        }
        drop(out);
        writer.finish().await;
    }

    /// Hands a session call to its session's actor; `subagent.ended` without `sessionKey`
    /// goes to the parent whose `prepareSpawn` named the child.
    fn route(
        self: &Arc<Self>,
        key: Option<String>,
        call: SessionCall,
        reply: Reply,
        notify: Notify,
    ) {
        if let Some(key) = key {
            return self.enqueue(key, call, reply, notify);
        }
        match call.ended_child() {
            Some(child) => match self.parent_of(child) {
                Some(parent) => self.enqueue(parent, call, reply, notify),
                None => reply(Err(RpcError::new(
                    code::UNKNOWN_SESSION,
                    format!(
                        "no open session spawned `{}`; pass its parent as sessionKey",
                        crate::error::excerpt(child, crate::error::QUOTE_BYTES)
                    ),
                )
                .with_data(rpc::ErrorData {
                    child_session_key: Some(child.to_string()),
                    ..Default::default()
                }))),
            },
            None => reply(Err(RpcError::new(
                code::INVALID_PARAMS,
                "`sessionKey` is required",
            )
            .with_data(rpc::ErrorData::at("sessionKey")))),
        }
    }

    async fn initialize(&self) -> Result<protocol::InitializeResult, RpcError> {
        let engine = self.host.active_engine().await?;
        let limits = &engine.spec().limits;
        Ok(protocol::InitializeResult {
            protocol_version: checks::ProtocolVersion::SPOKEN,
            host: protocol::HostInfo {
                name: "ctxhost",
                version: env!("CARGO_PKG_VERSION"),
            },
            engine: protocol::EngineSummary {
                info: engine.info().clone(),
                contract: engine.contract_version().to_string(),
            },
            context_window: self.host.compaction_settings().context_window,
            limits: protocol::Limits {
                memory_bytes: limits.memory_bytes,
                call_timeout_ms: u64::try_from(limits.call_timeout.as_millis()).unwrap_or(u64::MAX),
                host_bytes_per_call: limits.host_bytes_per_call,
                max_line_bytes: self.options.max_line_bytes,
            },
        })
    }

    /// `health`: the engine the config selects and the one serving, quarantines and the
    /// circuit breaker, turns served and degraded over every session, and one session's when
    /// `session_key` names it (`known: false` when no turn of it was recorded).
    async fn health(&self, session_key: Option<&str>) -> protocol::HealthResult {
        use protocol::{HealthStatus, SessionReport};
        let configured = self.host.config().active_engine().to_string();
        let quarantined: Vec<_> = (self.host.quarantined().await.into_iter())
            .map(|(engine, cause)| protocol::Quarantined { engine, cause })
            .collect();
        let serving = self.host.loaded_engine(&configured).await;
        let circuit_open = serving
            .as_ref()
            .and_then(|engine| engine.health().circuit_open);
        let (sessions, turns, degraded_turns) = self.health.totals();
        let degraded: Vec<_> = (self.health.degraded().into_iter())
            .map(|(session_key, health)| protocol::DegradedSession {
                session_key,
                health,
            })
            .collect();
        let ok = quarantined.is_empty() && circuit_open.is_none() && degraded.is_empty();
        let session = session_key.map(|key| SessionReport::of(key, self.health.session(key)));
        protocol::HealthResult {
            status: if ok {
                HealthStatus::Ok
            } else {
                HealthStatus::Degraded
            },
            engine: protocol::EngineHealth {
                contract: serving.as_ref().map(|e| e.contract_version().to_string()),
                configured,
                circuit_open,
            },
            quarantined,
            sessions: protocol::SessionCounts {
                open: self.session_count(),
                recorded: sessions,
                turns,
                degraded_turns,
                idle_releases: self.health.idle_releases(),
            },
            degraded_sessions: degraded,
            session,
        }
    }

    /// Hands a session call to its actor (starting one for `bootstrap`), in read order.
    fn enqueue(self: &Arc<Self>, key: String, call: SessionCall, reply: Reply, notify: Notify) {
        let mut sessions = self.sessions();
        if let Some(child) = call.spawned_child() {
            sessions.children.insert(child.to_string(), key.clone());
        }
        let is_bootstrap = call.opens();
        let is_close = call.closes();
        if !sessions.open.contains_key(&key) {
            if !is_bootstrap {
                drop(sessions);
                if is_close {
                    reply(Ok(answer(protocol::CloseResult { closed: false })));
                } else {
                    reply(Err(RpcError::unknown_session(&key)));
                }
                return;
            }
            let predecessor = sessions.retiring.remove(&key);
            let (jobs, queue) = mpsc::unbounded_channel();
            let id = sessions.next_actor;
            sessions.next_actor += 1;
            let task = tokio::spawn(run_actor(
                Arc::downgrade(self),
                id,
                key.clone(),
                predecessor,
                queue,
            ));
            sessions.open.insert(key.clone(), Actor { id, jobs, task });
        }
        let actor = sessions.open.get(&key).expect("inserted above");
        let job = Job {
            call,
            reply,
            notify,
        };
        if let Err(mpsc::error::SendError(job)) = actor.jobs.send(job) {
            (job.reply)(Err(RpcError::unknown_session(&key)));
        }
        if is_close {
            // Later requests for this key start a new actor, after this one has finished.
            let actor = sessions.open.remove(&key).expect("present");
            sessions.children.retain(|_, parent| *parent != key);
            sessions.retiring.insert(key, actor.task);
        }
    }

    /// Closes every session (each actor finishes its queue, then disposes its engine instance).
    pub async fn close_all(&self) {
        let tasks: Vec<JoinHandle<()>> = {
            let mut sessions = self.sessions();
            let open = std::mem::take(&mut sessions.open);
            let retiring = std::mem::take(&mut sessions.retiring);
            open.into_values()
                .map(|actor| actor.task)
                .chain(retiring.into_values())
                .collect()
        };
        for task in tasks {
            if let Err(e) = task.await {
                tracing::error!("a session task failed: {e}");
            }
        }
    }

    /// The parent session that spawned `child`, if this server saw it.
    fn parent_of(&self, child: &str) -> Option<String> {
        self.sessions().children.get(child).cloned()
    }

    /// How many sessions are open in this server (an actor each).
    pub fn session_count(&self) -> usize {
        self.sessions().open.len()
    }

    /// Removes actor `id` of `key` when it has nothing open and nothing queued, so a refused
    /// `bootstrap` (a key that cannot be a file, a mirror that cannot open) or a call that
    /// lost its session leaves nothing behind. Under the sessions lock, which `enqueue` holds
    /// while it queues, so no request is queued to an actor that is going away.
    fn retire_if_idle(&self, id: u64, key: &str, queue: &mpsc::UnboundedReceiver<Job>) -> bool {
        let mut sessions = self.sessions();
        if !queue.is_empty() || sessions.open.get(key).is_none_or(|actor| actor.id != id) {
            return false;
        }
        sessions.open.remove(key);
        sessions.children.retain(|_, parent| parent != key);
        true
    }
}

/// Gives an idle session's engine instance back; a failure to dispose it is logged (the
/// instance is dropped either way).
async fn release_idle(mirror: &mut Mirror, health: &health::HealthBoard) {
    let key = mirror.session().key().to_string();
    if let Err(e) = mirror.session_mut().release_instance().await {
        tracing::warn!(session = %key, "releasing an idle instance: {e}");
    }
    health.count_idle_release();
    tracing::debug!(session = %key, "idle: engine instance released");
}

/// One session's requests, in order. The mirror opens on `bootstrap` and closes on `close` or
/// when the server stops; an actor left without a mirror (its bootstrap refused) ends at once.
async fn run_actor(
    server: std::sync::Weak<Server>,
    id: u64,
    key: String,
    predecessor: Option<JoinHandle<()>>,
    mut queue: mpsc::UnboundedReceiver<Job>,
) {
    if let Some(predecessor) = predecessor {
        let _ = predecessor.await;
    }
    let Some((host, health, idle_release)) = server.upgrade().map(|server| {
        let idle = server.options.idle_release;
        (server.host.clone(), server.health.clone(), idle)
    }) else {
        return;
    };
    let mut mirror: Option<Mirror> = None;
    loop {
        let holds_instance = mirror.as_ref().is_some_and(|m| m.session().has_instance());
        let job = match idle_release.filter(|_| holds_instance) {
            Some(idle) => match tokio::time::timeout(idle, queue.recv()).await {
                Ok(job) => job,
                Err(_) => {
                    if let Some(mirror) = mirror.as_mut() {
                        release_idle(mirror, &health).await;
                    }
                    continue;
                }
            },
            None => queue.recv().await,
        };
        let Some(job) = job else { break };
        // Each call runs as its own task so a bug that panics answers its request with an
        // error (and drops the session, which the client bootstraps again) instead of leaving
        // the client waiting.
        let (task_host, task_key, task_health) = (host.clone(), key.clone(), health.clone());
        let mut slot = mirror.take();
        let notify = job.notify.clone();
        let call = tokio::spawn(async move {
            let result = methods::run(
                &task_host,
                &task_key,
                &mut slot,
                job.call,
                &notify,
                &task_health,
            )
            .await;
            (slot, result)
        });
        let result = match call.await {
            Ok((slot, result)) => {
                mirror = slot;
                result
            }
            Err(e) => {
                tracing::error!(session = %key, "a request failed inside the server: {e}");
                Err(RpcError::new(
                    code::HOST_ERROR,
                    format!(
                        "internal error in session `{key}` (the session was closed; bootstrap it again): {e}"
                    ),
                ))
            }
        };
        // Retired before answering, so a client that reads the answer finds nothing left.
        let retired = mirror.is_none()
            && server
                .upgrade()
                .is_some_and(|server| server.retire_if_idle(id, &key, &queue));
        (job.reply)(result);
        if let Some(mirror) = mirror.as_mut() {
            mirror.write_ledger();
        }
        if retired {
            return;
        }
    }
    if let Some(mirror) = mirror
        && let Err(e) = mirror.close().await
    {
        tracing::warn!(session = %key, "closing: {e}");
    }
}
