//! The open sessions of a server: an actor each, by key, started by `bootstrap` and retired by
//! `close`, and which parent spawned which child.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::actor::{self, Job, Mailbox, Message, Roster, Shared};
use crate::methods::{SessionCall, answer};
use crate::output::{Notify, Reply};
use crate::protocol;
use crate::rpc::{self, RpcError, code};

/// A running actor of one session.
struct Running {
    /// Tells this actor from a later one for the same key.
    id: u64,
    jobs: mpsc::UnboundedSender<Message>,
    task: JoinHandle<()>,
}

#[derive(Default)]
struct Open {
    actors: HashMap<String, Running>,
    /// The id of the next actor started.
    next_actor: u64,
    /// Actors of closed sessions still finishing their queue; a new actor for the same key
    /// waits for its predecessor so one file never has two writers.
    retiring: HashMap<String, JoinHandle<()>>,
    /// Child session key → the parent whose `prepareSpawn` named it.
    children: HashMap<String, String>,
}

impl Open {
    /// Retires the actor of a closed session: later requests for its key start a new actor,
    /// after this one has finished.
    fn retire(&mut self, key: String) {
        let running = self.actors.remove(&key).expect("present");
        self.children.retain(|_, parent| *parent != key);
        self.retiring.insert(key, running.task);
    }
}

/// Every session open in one server, shared by its connections.
pub(crate) struct Sessions {
    shared: Arc<Shared>,
    open: Mutex<Open>,
}

impl Sessions {
    pub(crate) fn new(shared: Arc<Shared>) -> Arc<Self> {
        Arc::new(Self {
            shared,
            open: Mutex::default(),
        })
    }

    fn open(&self) -> MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands a session call to its session's actor; `subagent.ended` without `sessionKey`
    /// goes to the parent whose `prepareSpawn` named the child.
    pub(crate) fn route(
        self: &Arc<Self>,
        key: Option<String>,
        call: SessionCall,
        reply: Reply,
        notify: Notify,
    ) {
        let job = Job {
            call,
            reply,
            notify,
        };
        if let Some(key) = key {
            return self.enqueue(key, job);
        }
        let parent = job.call.ended_child().map(|child| self.parent_of(child));
        match parent {
            Some(Ok(parent)) => self.enqueue(parent, job),
            Some(Err(no_parent)) => (job.reply)(Err(no_parent)),
            None => (job.reply)(Err(RpcError::new(
                code::INVALID_PARAMS,
                "`sessionKey` is required",
            )
            .with_data(rpc::ErrorData::at("sessionKey")))),
        }
    }

    /// The parent session that spawned `child`, or the error naming it when this server saw
    /// no such spawn.
    fn parent_of(&self, child: &str) -> Result<String, RpcError> {
        let parent = self.open().children.get(child).cloned();
        parent.ok_or_else(|| {
            RpcError::new(
                code::UNKNOWN_SESSION,
                format!(
                    "no open session spawned `{}`; pass its parent as sessionKey",
                    ctxhost::error::excerpt(child, ctxhost::error::QUOTE_BYTES)
                ),
            )
            .with_data(rpc::ErrorData {
                child_session_key: Some(child.to_string()),
                ..Default::default()
            })
        })
    }

    /// Hands a session call to its actor (starting one for `bootstrap`), in read order.
    fn enqueue(self: &Arc<Self>, key: String, job: Job) {
        let mut open = self.open();
        if let Some(child) = job.call.spawned_child() {
            open.children.insert(child.to_string(), key.clone());
        }
        let is_close = job.call.closes();
        if !open.actors.contains_key(&key) {
            if !job.call.opens() {
                drop(open);
                return refuse_unopened(&key, job);
            }
            let running = self.start(&mut open, &key);
            open.actors.insert(key.clone(), running);
        }
        let running = open.actors.get(&key).expect("inserted above");
        if let Err(mpsc::error::SendError(Message::Call(job))) =
            running.jobs.send(Message::Call(job))
        {
            (job.reply)(Err(RpcError::unknown_session(&key)));
        }
        if is_close {
            open.retire(key);
        }
    }

    /// Starts the actor of `key`, after the one of a closed session of the same key.
    fn start(self: &Arc<Self>, open: &mut Open, key: &str) -> Running {
        let predecessor = open.retiring.remove(key);
        let (jobs, queue) = mpsc::unbounded_channel();
        let id = open.next_actor;
        open.next_actor += 1;
        let mailbox = Mailbox {
            id,
            handle: jobs.downgrade(),
            queue,
        };
        let roster: Weak<dyn Roster> = Arc::downgrade(self) as Weak<Self>;
        let shared = self.shared.clone();
        let key = key.to_string();
        let task = tokio::spawn(actor::run(shared, roster, mailbox, key, predecessor));
        Running { id, jobs, task }
    }

    /// Closes every session (each actor finishes its queue, then disposes its engine instance).
    pub(crate) async fn close_all(&self) {
        let tasks: Vec<JoinHandle<()>> = {
            let mut open = self.open();
            let actors = std::mem::take(&mut open.actors);
            let retiring = std::mem::take(&mut open.retiring);
            (actors.into_values().map(|running| running.task))
                .chain(retiring.into_values())
                .collect()
        };
        for task in tasks {
            if let Err(e) = task.await {
                tracing::error!("a session task failed: {e}");
            }
        }
    }

    /// How many sessions are open (an actor each).
    pub(crate) fn count(&self) -> usize {
        self.open().actors.len()
    }
}

impl Roster for Sessions {
    /// Under the sessions lock, which `enqueue` holds while it queues, so no request is queued
    /// to an actor that is going away.
    fn retire_if_idle(&self, id: u64, key: &str, queue: &mpsc::UnboundedReceiver<Message>) -> bool {
        let mut open = self.open();
        if !queue.is_empty() || open.actors.get(key).is_none_or(|running| running.id != id) {
            return false;
        }
        open.actors.remove(key);
        open.children.retain(|_, parent| parent != key);
        true
    }
}

/// Answers a call to a session that is not open: `close` says nothing was closed, anything
/// else that the session is unknown.
fn refuse_unopened(key: &str, job: Job) {
    if job.call.closes() {
        (job.reply)(Ok(answer(protocol::CloseResult { closed: false })));
    } else {
        (job.reply)(Err(RpcError::unknown_session(key)));
    }
}
