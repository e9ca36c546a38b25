//! `ctxhost serve`: a sidecar that lets an agent runtime in any language drive sessions over
//! newline-delimited JSON-RPC 2.0 (stdio or a unix socket). The protocol is written down in
//! `docs/serve-protocol.md`.
//!
//! Each open session is an actor: a task that owns its `Mirror` and runs that session's
//! requests one after another in the order they were read, so requests for different
//! sessions run concurrently and requests for one session in order. Only the recently used
//! sessions hold an engine instance and descriptors (`residency`): any number stay open.

mod checks;
mod health;
mod lock;
mod methods;
pub(crate) mod mirror;
mod output;
mod protocol;
mod residency;
pub(crate) mod rpc;
mod schema;
mod scratch;
mod sync;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};

use ctxhost::Host;
use methods::{Call, SessionCall, answer};
use mirror::Mirror;
use rpc::{Line, RpcError, code};

pub use schema::{REGENERATE as REGENERATE_SCHEMA, protocol_schema, protocol_schema_text};

/// The instance pool a server needs, at most `most` slots: one for every session the
/// process's descriptor limit lets hold an instance at once (at 5 descriptors a session after
/// a reserve), and the two engine loads borrow. `ulimit -n` 1024 gives about 180.
pub fn pool_slots(most: u32) -> u32 {
    residency::pool_slots(most)
}

/// Raises the process's soft descriptor limit, up to its hard limit, so that sessions can hold
/// all of an instance pool of `slots` at once (`ctxhost serve --max-instances`); returns the
/// soft limit then in force, None when unlimited. A limit the system will not raise stays.
pub fn raise_descriptor_limit_for(slots: u32) -> Option<u64> {
    residency::raise_descriptor_limit_for(slots)
}

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

/// What a session's actor is asked to do, in order.
enum Message {
    Call(Job),
    /// Give the engine instance and descriptors back (another session needs them); answered
    /// once they are.
    Suspend(oneshot::Sender<()>),
}

/// Asks a resident session to give its resources back; weak, so it never keeps an actor
/// whose session was closed alive.
type Handle = mpsc::WeakUnboundedSender<Message>;

struct Actor {
    /// Tells this actor from a later one for the same key.
    id: u64,
    jobs: mpsc::UnboundedSender<Message>,
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
    /// The sessions holding an instance and descriptors.
    residency: Arc<residency::Residency<Handle>>,
    stop: watch::Sender<bool>,
}

impl Server {
    /// A server for `host`'s sessions; [`Server::serve_stdio`], [`Server::serve_socket`] and
    /// [`Server::serve_connection`] serve connections that share the sessions it opens.
    pub fn new(host: Arc<Host>, options: ServeOptions) -> Arc<Self> {
        scratch::remove_abandoned();
        let (capacity, limit) = residency::capacity(host.runtime().instance_capacity());
        tracing::debug!("at most {capacity} sessions hold an instance at once ({limit})");
        // The engine loads while the first request is read and its mirror created (a request
        // that needs it sooner waits for this load, never starts another).
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let host = host.clone();
            runtime.spawn(async move {
                if let Err(e) = host.active_engine().await {
                    tracing::debug!("loading the engine ahead of the first request: {e}");
                }
            });
        }
        Arc::new(Self {
            host,
            sessions: Mutex::default(),
            health: Arc::new(health::HealthBoard::new(options.ledger)),
            residency: Arc::new(residency::Residency::new(capacity, limit)),
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
                    let stream = match accepted {
                        Ok((stream, _)) => stream,
                        // Out of descriptors: idle sessions give theirs back, and the client
                        // is accepted once there is one (it waits in the backlog meanwhile).
                        Err(e) if residency::out_of_descriptors(&e) => {
                            tracing::warn!("cannot accept a client: {e}");
                            let limit = self.residency.limit();
                            suspend_others(self.residency.short_of(limit)).await;
                            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                            continue;
                        }
                        Err(e) => return Err(e),
                    };
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
                        ctxhost::error::excerpt(child, ctxhost::error::QUOTE_BYTES)
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
        let (resident, resident_limit, evictions) = self.residency.counts();
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
                resident,
                resident_limit: resident_limit.min(u32::MAX as usize),
                evictions,
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
                Mailbox {
                    id,
                    handle: jobs.downgrade(),
                    queue,
                },
                key.clone(),
                predecessor,
            ));
            sessions.open.insert(key.clone(), Actor { id, jobs, task });
        }
        let actor = sessions.open.get(&key).expect("inserted above");
        let job = Job {
            call,
            reply,
            notify,
        };
        if let Err(mpsc::error::SendError(Message::Call(job))) = actor.jobs.send(Message::Call(job))
        {
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
    fn retire_if_idle(&self, id: u64, key: &str, queue: &mpsc::UnboundedReceiver<Message>) -> bool {
        let mut sessions = self.sessions();
        if !queue.is_empty() || sessions.open.get(key).is_none_or(|actor| actor.id != id) {
            return false;
        }
        sessions.open.remove(key);
        sessions.children.retain(|_, parent| parent != key);
        true
    }
}

/// Gives a session's engine instance and descriptors back (idle, or its place taken by
/// another); a failure to dispose the instance is logged (it is dropped either way).
async fn suspend(mirror: Option<&mut Mirror>) {
    let Some(mirror) = mirror else { return };
    if let Err(e) = mirror.suspend().await {
        let key = mirror.session().key();
        tracing::warn!(session = %key, "giving back an idle instance: {e}");
    }
}

/// Asks each session to give its resources back, and waits until they have.
async fn suspend_others(sessions: Vec<Handle>) {
    let mut waiting = Vec::new();
    for session in sessions {
        let (done, wait) = oneshot::channel();
        if let Some(jobs) = session.upgrade()
            && jobs.send(Message::Suspend(done)).is_ok()
        {
            waiting.push(wait);
        }
    }
    for wait in waiting {
        let _ = wait.await;
    }
}

/// An actor's id, its queue, and the handle others ask it to give its resources back by.
struct Mailbox {
    id: u64,
    handle: Handle,
    queue: mpsc::UnboundedReceiver<Message>,
}

/// Makes a session resident before a call: a place among the resident sessions (the least
/// recently used idle one gives its place up when they are full), its mirror opened (for
/// `bootstrap`) and its instance and descriptors taken. When the host runs out of either
/// anyway, more idle sessions give theirs up and it tries again; when none is left to, the
/// error names the limit (never an engine fault: the breaker does not count it).
async fn take_resources(
    server: &Server,
    mailbox: &Mailbox,
    key: &str,
    mirror: &mut Option<Mirror>,
    // What `bootstrap` opens the session with; None for every other call.
    opening: Option<Option<String>>,
) -> Result<(), RpcError> {
    if mirror.is_none() && opening.is_none() {
        return Ok(()); // not open: the call answers so, and takes nobody's place
    }
    let residency = &server.residency;
    suspend_others(residency.enter(mailbox.id, &mailbox.handle)).await;
    loop {
        let taken = match (mirror.as_mut(), &opening) {
            (Some(open), _) => open.resume(&server.host).await,
            (None, Some(session_id)) => {
                match Mirror::open(&server.host, key, session_id.as_deref()).await {
                    Ok(opened) => mirror.insert(opened).resume(&server.host).await,
                    Err(e) => Err(e),
                }
            }
            (None, None) => return Ok(()),
        };
        let error = match taken {
            Ok(()) => return Ok(()),
            Err(error) => error,
        };
        let pool = server.host.runtime().instance_capacity();
        let Some(limit) = residency::shortage(&error, pool) else {
            return Err(error.into());
        };
        let others = residency.short_of(limit);
        if others.is_empty() {
            let cause = ctxhost::error::chain(&error);
            return Err(RpcError::new(
                code::HOST_ERROR,
                format!(
                    "session `{}` cannot be served now: {limit} are all held by sessions with calls running, none idle to give theirs up; retry, or raise the limit ({cause})",
                    ctxhost::error::excerpt(key, ctxhost::error::QUOTE_BYTES)
                ),
            )
            .with_data(rpc::ErrorData {
                session_key: Some(key.to_string()),
                limit: Some(limit.name().to_string()),
                ..rpc::ErrorData::default()
            }));
        }
        suspend_others(others).await;
    }
}

/// One session's requests, in order. The mirror opens on `bootstrap` and closes on `close` or
/// when the server stops; an actor left without a mirror (its bootstrap refused) ends at once.
/// Between calls it may give its instance and descriptors back: when idle for
/// `ServeOptions::idle_release`, or when another session needs its place.
async fn run_actor(
    server: std::sync::Weak<Server>,
    mut mailbox: Mailbox,
    key: String,
    predecessor: Option<JoinHandle<()>>,
) {
    if let Some(predecessor) = predecessor {
        let _ = predecessor.await;
    }
    let Some((host, health, idle_release, residency)) = server.upgrade().map(|server| {
        let idle = server.options.idle_release;
        let residency = server.residency.clone();
        (server.host.clone(), server.health.clone(), idle, residency)
    }) else {
        return;
    };
    let id = mailbox.id;
    let mut mirror: Option<Mirror> = None;
    // Holds (or may hold) an instance and descriptors, and is counted in `residency`.
    let mut resident = false;
    loop {
        let message = match idle_release.filter(|_| resident) {
            Some(idle) => match tokio::time::timeout(idle, mailbox.queue.recv()).await {
                Ok(message) => message,
                Err(_) => {
                    suspend(mirror.as_mut()).await;
                    residency.remove(id);
                    resident = false;
                    health.count_idle_release();
                    tracing::debug!(session = %key, "idle: engine instance released");
                    continue;
                }
            },
            None => mailbox.queue.recv().await,
        };
        let job = match message {
            None => break,
            Some(Message::Suspend(done)) => {
                if resident {
                    suspend(mirror.as_mut()).await;
                    residency.remove(id);
                    resident = false;
                }
                let _ = done.send(());
                continue;
            }
            Some(Message::Call(job)) => job,
        };
        let taken = match server.upgrade() {
            Some(server) if !job.call.closes() => {
                resident = true;
                let opening = job.call.opening().map(|id| id.map(str::to_string));
                take_resources(&server, &mailbox, &key, &mut mirror, opening).await
            }
            _ => Ok(()),
        };
        let result = match taken {
            Ok(()) => run_call(&host, &health, &key, &mut mirror, job.call, &job.notify).await,
            Err(e) => Err(e),
        };
        if resident && mirror.is_some() {
            residency.leave(id);
        } else {
            residency.remove(id);
            resident = false;
        }
        // Retired before answering, so a client that reads the answer finds nothing left.
        let retired = mirror.is_none()
            && server
                .upgrade()
                .is_some_and(|server| server.retire_if_idle(id, &key, &mailbox.queue));
        (job.reply)(result);
        if let Some(mirror) = mirror.as_mut() {
            mirror.write_ledger();
        }
        if retired {
            return;
        }
    }
    residency.remove(id);
    if let Some(mirror) = mirror
        && let Err(e) = mirror.close().await
    {
        tracing::warn!(session = %key, "closing: {e}");
    }
}

/// Runs one call on the session's mirror as its own task, so a bug that panics answers its
/// request with an error (and drops the session, which the client bootstraps again) instead
/// of leaving the client waiting.
async fn run_call(
    host: &Arc<Host>,
    health: &Arc<health::HealthBoard>,
    key: &str,
    mirror: &mut Option<Mirror>,
    call: SessionCall,
    notify: &Notify,
) -> Result<Value, RpcError> {
    let (task_host, task_key, task_health) = (host.clone(), key.to_string(), health.clone());
    let mut slot = mirror.take();
    let notify = notify.clone();
    let call = tokio::spawn(async move {
        let result = methods::run(
            &task_host,
            &task_key,
            &mut slot,
            call,
            &notify,
            &task_health,
        )
        .await;
        (slot, result)
    });
    match call.await {
        Ok((slot, result)) => {
            *mirror = slot;
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
    }
}
