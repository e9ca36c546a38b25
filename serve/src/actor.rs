//! One session's actor: a task that owns the session's `Mirror` and runs its requests one
//! after another in the order they were read. Between calls it may give its engine instance
//! and descriptors back: when idle for `ServeOptions::idle_release`, or when another session
//! needs its place among the resident ones.

use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use ctxhost::Host;

use crate::health::HealthBoard;
use crate::methods::{self, SessionCall};
use crate::mirror::Mirror;
use crate::output::{Notify, Reply};
use crate::residency::{self, Residency};
use crate::rpc::{self, RpcError, code};

/// What every actor of a server shares.
pub(crate) struct Shared {
    pub(crate) host: Arc<Host>,
    /// Every session's turns, for `health`.
    pub(crate) health: Arc<HealthBoard>,
    /// The sessions holding an instance and descriptors.
    pub(crate) residency: Residency<Handle>,
    /// How long a resident session waits for a request before it gives its resources back.
    pub(crate) idle_release: Option<Duration>,
}

/// A request for a session's actor, with where its answer and notifications go.
pub(crate) struct Job {
    pub(crate) call: SessionCall,
    pub(crate) reply: Reply,
    pub(crate) notify: Notify,
}

/// What a session's actor is asked to do, in order.
pub(crate) enum Message {
    Call(Job),
    /// Give the engine instance and descriptors back (another session needs them); answered
    /// once they are.
    Suspend(oneshot::Sender<()>),
}

/// Asks a resident session to give its resources back; weak, so it never keeps an actor
/// whose session was closed alive.
pub(crate) type Handle = mpsc::WeakUnboundedSender<Message>;

/// The open sessions an actor belongs to, as far as it needs them: to leave once its
/// bootstrap was refused, so nothing is left behind.
pub(crate) trait Roster: Send + Sync {
    /// Removes actor `id` of `key` when it has nothing open and nothing queued; whether it did.
    fn retire_if_idle(&self, id: u64, key: &str, queue: &mpsc::UnboundedReceiver<Message>) -> bool;
}

/// An actor's id, its queue, and the handle others ask it to give its resources back by.
pub(crate) struct Mailbox {
    pub(crate) id: u64,
    pub(crate) handle: Handle,
    pub(crate) queue: mpsc::UnboundedReceiver<Message>,
}

/// One actor's session: its key, its mirror once open, and whether it holds (or may hold) an
/// instance and descriptors, counted in `residency`.
struct Actor {
    shared: Arc<Shared>,
    roster: Weak<dyn Roster>,
    mailbox: Mailbox,
    key: String,
    mirror: Option<Mirror>,
    resident: bool,
}

/// Runs one session's requests, in order. The mirror opens on `bootstrap` and closes on
/// `close` or when the server stops; an actor left without a mirror (its bootstrap refused)
/// ends at once.
pub(crate) async fn run(
    shared: Arc<Shared>,
    roster: Weak<dyn Roster>,
    mailbox: Mailbox,
    key: String,
    predecessor: Option<JoinHandle<()>>,
) {
    if let Some(predecessor) = predecessor {
        let _ = predecessor.await;
    }
    let mut actor = Actor::new(shared, roster, mailbox, key);
    while let Some(job) = actor.next_job().await {
        if actor.serve(job).await {
            return;
        }
    }
    actor.close().await;
}

impl Actor {
    fn new(shared: Arc<Shared>, roster: Weak<dyn Roster>, mailbox: Mailbox, key: String) -> Self {
        Actor {
            shared,
            roster,
            mailbox,
            key,
            mirror: None,
            resident: false,
        }
    }

    /// The next call, giving resources back meanwhile when asked or when idle too long; None
    /// once the session's queue is closed.
    async fn next_job(&mut self) -> Option<Job> {
        loop {
            let idle = self.shared.idle_release.filter(|_| self.resident);
            let queue = &mut self.mailbox.queue;
            let Ok(message) =
                tokio::time::timeout(idle.unwrap_or(Duration::MAX), queue.recv()).await
            else {
                self.release().await;
                self.shared.health.count_idle_release();
                tracing::debug!(session = %self.key, "idle: engine instance released");
                continue;
            };
            match message? {
                Message::Suspend(done) => {
                    if self.resident {
                        self.release().await;
                    }
                    let _ = done.send(());
                }
                Message::Call(job) => return Some(job),
            }
        }
    }

    /// Gives the instance and descriptors back and leaves the resident sessions.
    async fn release(&mut self) {
        suspend(self.mirror.as_mut()).await;
        self.shared.residency.remove(self.mailbox.id);
        self.resident = false;
    }

    /// Runs one call and answers it; whether the actor retired (its bootstrap refused).
    async fn serve(&mut self, job: Job) -> bool {
        let alive = self.roster.strong_count() > 0;
        let taken = match job.call.opening() {
            _ if !alive || job.call.closes() => Ok(()),
            opening => {
                self.resident = true;
                let opening = opening.map(|id| id.map(str::to_string));
                self.take_resources(opening).await
            }
        };
        let result = match taken {
            Ok(()) => self.run_call(job.call, &job.notify).await,
            Err(e) => Err(e),
        };
        let id = self.mailbox.id;
        if self.resident && self.mirror.is_some() {
            self.shared.residency.leave(id);
        } else {
            self.shared.residency.remove(id);
            self.resident = false;
        }
        // Retired before answering, so a client that reads the answer finds nothing left.
        let retired = self.mirror.is_none()
            && (self.roster.upgrade())
                .is_some_and(|roster| roster.retire_if_idle(id, &self.key, &self.mailbox.queue));
        (job.reply)(result);
        if let Some(mirror) = self.mirror.as_mut() {
            mirror.write_ledger();
        }
        retired
    }

    /// Makes the session resident before a call: a place among the resident sessions (the
    /// least recently used idle one gives its place up when they are full), its mirror opened
    /// (for `bootstrap`, which passes `opening`: the session id it asks for) and its instance
    /// and descriptors taken. When the host runs out of either anyway, more idle sessions give
    /// theirs up and it tries again; when none is left to, the error names the limit (never an
    /// engine fault: the breaker does not count it).
    async fn take_resources(&mut self, opening: Option<Option<String>>) -> Result<(), RpcError> {
        if self.mirror.is_none() && opening.is_none() {
            return Ok(()); // not open: the call answers so, and takes nobody's place
        }
        let shared = self.shared.clone();
        let residency = &shared.residency;
        suspend_others(residency.enter(self.mailbox.id, &self.mailbox.handle)).await;
        loop {
            let error = match self.open_and_resume(opening.as_ref()).await {
                Ok(()) => return Ok(()),
                Err(error) => error,
            };
            let pool = shared.host.runtime().instance_capacity();
            let Some(limit) = residency::shortage(&error, pool) else {
                return Err(error.into());
            };
            let others = residency.short_of(limit);
            if others.is_empty() {
                return Err(none_idle(&self.key, limit, &error));
            }
            suspend_others(others).await;
        }
    }

    /// Opens the mirror when `opening` asks for it and it is not open, then resumes it.
    async fn open_and_resume(&mut self, opening: Option<&Option<String>>) -> ctxhost::Result<()> {
        let host = &self.shared.host;
        match (self.mirror.as_mut(), opening) {
            (Some(open), _) => open.resume(host).await,
            (None, Some(session_id)) => {
                let opened = Mirror::open(host, &self.key, session_id.as_deref()).await?;
                self.mirror.insert(opened).resume(host).await
            }
            (None, None) => Ok(()),
        }
    }

    /// Runs one call on the session's mirror as its own task, so a bug that panics answers its
    /// request with an error (and drops the session, which the client bootstraps again)
    /// instead of leaving the client waiting.
    async fn run_call(&mut self, call: SessionCall, notify: &Notify) -> Result<Value, RpcError> {
        let shared = self.shared.clone();
        let (key, notify) = (self.key.clone(), notify.clone());
        let mut slot = self.mirror.take();
        let call = tokio::spawn(async move {
            let (host, health) = (&shared.host, &shared.health);
            let result = methods::run(host, &key, &mut slot, call, &notify, health).await;
            (slot, result)
        });
        match call.await {
            Ok((slot, result)) => {
                self.mirror = slot;
                result
            }
            Err(e) => Err(failed_inside(&self.key, &e)),
        }
    }

    /// Leaves the resident sessions and disposes the engine instance.
    async fn close(self) {
        self.shared.residency.remove(self.mailbox.id);
        if let Some(mirror) = self.mirror
            && let Err(e) = mirror.close().await
        {
            tracing::warn!(session = %self.key, "closing: {e}");
        }
    }
}

/// The answer to a call whose task failed (a bug that panicked): the session is gone.
fn failed_inside(key: &str, error: &tokio::task::JoinError) -> RpcError {
    tracing::error!(session = %key, "a request failed inside the server: {error}");
    RpcError::new(
        code::HOST_ERROR,
        format!(
            "internal error in session `{key}` (the session was closed; bootstrap it again): {error}"
        ),
    )
}

/// The refusal of a session that cannot become resident: every place of `limit` is held by a
/// session with a call running.
fn none_idle(key: &str, limit: residency::Limit, error: &ctxhost::Error) -> RpcError {
    let cause = ctxhost::error::chain(error);
    RpcError::new(
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
    })
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
pub(crate) async fn suspend_others(sessions: Vec<Handle>) {
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
