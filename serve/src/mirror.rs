//! The mirror transcript of a runtime that keeps its own history: ctxhost's v3 copy of a
//! session, written only by committed turns (each closed by a marker entry in the same write),
//! and the translation of an assembly into positions of the runtime's message array.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use ctxhost::auto_compaction::AutoCompaction;
use ctxhost::error::{Error, Result};
use ctxhost::ledger::{Ledger, LedgerRecord};
use ctxhost::session::{CompactOutcome, Session, Turn, TurnRequest};
use ctxhost::transcript::Transcript;
use ctxhost::transcript::compaction::Settings;
use ctxhost::{Host, SessionTarget, session_file};

use crate::checks::AgentMessage;
use crate::lock::{SessionLock, lock_path};
use crate::protocol::ClientItem;
use crate::sync::{Commit, Fingerprints, SyncState};
use hold::{FileState, Lock, Scratch};
use marker::scan;

pub(crate) use inserted::inserted;

/// Sessions whose key holds this are a runtime's internal turns (memory flushes): their mirror
/// lives in a scratch directory, never under the sessions dir.
const EPHEMERAL_KEY_PART: &str = ":internal-session-effects:";

/// An assembly in the runtime's terms.
#[derive(Debug, Clone)]
pub(crate) struct ClientAssembly {
    pub(crate) items: Vec<ClientItem>,
    pub(crate) estimated_tokens: u32,
    pub(crate) system_prompt_addition: Option<String>,
    pub(crate) compaction: Option<CompactOutcome>,
    /// The turn as the session's driver ran it (for the ledger).
    pub(crate) turn: Turn,
}

pub(crate) struct Mirror {
    session: Session,
    /// The host's configured compaction settings; a runtime budget only ever narrows them.
    configured: Settings,
    state: SyncState,
    committed: HashSet<String>,
    created: bool,
    /// Keeps an ephemeral session's directory alive; removed when the mirror is dropped.
    scratch: Option<Scratch>,
    /// Every turn answered, beside the mirror.
    ledger: Ledger,
    /// The last turn's record, written once its answer is on its way ([`Mirror::write_ledger`]).
    unwritten: Option<LedgerRecord>,
    /// The last turn's assembly in the runtime's terms, for the next turn to extend.
    translator: translate::Translator,
    /// This process's right to write the mirror: held while resident, given back with the
    /// instance (`suspend`) so an idle session costs no descriptor, taken again on `resume`.
    /// Last, so that a mirror dropped unclosed lets go only after everything else.
    lock: Lock,
}

impl Mirror {
    /// Opens (creating when missing) the mirror of `key` on the host's active engine, after
    /// setting aside a commit that a crash left half-written. A mirror created here carries the
    /// runtime's `session_id` as its header id, so the two name the session alike. The engine
    /// instance starts on the first call (or `Session::resume`).
    pub(crate) async fn open(host: &Host, key: &str, session_id: Option<&str>) -> Result<Mirror> {
        let scratch = match key.contains(EPHEMERAL_KEY_PART) {
            true => Some(Scratch::new()?),
            false => None,
        };
        let sessions_dir = match &scratch {
            Some(scratch) => scratch.dir.path().to_path_buf(),
            None => host.home().sessions_dir(),
        };
        let path = session_file(&sessions_dir, key)?;
        // Before anything reads the file: a torn commit may be another process's write.
        let lock = SessionLock::acquire(&path, key)?;
        Mirror::load(host, key, session_id, path, scratch, lock).await
    }

    /// [`Mirror::open`] of the mirror at `path`, whose lock this process holds.
    async fn load(
        host: &Host,
        key: &str,
        session_id: Option<&str>,
        path: PathBuf,
        scratch: Option<Scratch>,
        lock: SessionLock,
    ) -> Result<Mirror> {
        let created = prepare_file(&path, key, session_id)?;
        let configured = host.compaction_settings();
        let session = open_session(host, key, path, &configured).await?;
        let (state, committed) = scan(&session.transcript());
        Ok(Mirror {
            ledger: Ledger::new(session.path()),
            unwritten: None,
            translator: translate::Translator::default(),
            session,
            configured,
            state,
            committed,
            created,
            scratch,
            lock: Lock::Held(lock),
        })
    }

    pub(crate) fn session(&self) -> &Session {
        &self.session
    }
    pub(crate) fn session_mut(&mut self) -> &mut Session {
        &mut self.session
    }
    pub(crate) fn state(&self) -> &SyncState {
        &self.state
    }
    pub(crate) fn created(&self) -> bool {
        self.created
    }
    pub(crate) fn is_ephemeral(&self) -> bool {
        self.scratch.is_some()
    }

    /// Appends a turn and its marker in one write; a key seen before changes nothing.
    pub(crate) async fn commit(
        &mut self,
        advancement_key: &str,
        messages: &[AgentMessage],
        fingerprints: &Fingerprints,
    ) -> Result<Commit> {
        if self.committed.contains(advancement_key) {
            return Ok(Commit::Duplicate);
        }
        self.append(messages, fingerprints, Some(advancement_key))
            .await?;
        Ok(Commit::Committed)
    }

    /// Whether a commit with this advancement key is in the mirror.
    pub(crate) fn is_committed(&self, advancement_key: &str) -> bool {
        self.committed.contains(advancement_key)
    }

    /// Brings the mirror to the runtime's history: appends its tail from `from`, or with
    /// `reset` starts a new mirror from the whole history (the old file kept whole).
    pub(crate) async fn sync(
        mut self,
        host: &Host,
        from: usize,
        messages: &[AgentMessage],
        fingerprints: &Fingerprints,
        reset: bool,
    ) -> (Option<Mirror>, Result<()>) {
        if reset {
            return self.reset(host, messages, fingerprints).await;
        }
        if from != self.state.message_count {
            let problem = Error::SyncFrom {
                from,
                mirror: self.state.message_count,
            };
            return (Some(self), Err(problem));
        }
        let result = self.append(messages, fingerprints, None).await;
        (Some(self), result)
    }

    /// Sets the mirror file aside whole and starts a new one, with the same header id (it is
    /// still the runtime's session), from `messages`.
    async fn reset(
        mut self,
        host: &Host,
        messages: &[AgentMessage],
        fingerprints: &Fingerprints,
    ) -> (Option<Mirror>, Result<()>) {
        let key = self.session.key().to_string();
        let id = self.session.id().to_string();
        let path = self.session.path().to_path_buf();
        let lock = match self.take_lock() {
            Ok(lock) => lock,
            Err(e) => return (Some(self), Err(e)),
        };
        let scratch = self.scratch.take();
        if let Err(e) = self.session.close().await {
            tracing::warn!(session = %key, "closing before a reset: {e}");
        }
        if let Err(e) = Session::set_aside_file(&path, "reset") {
            return (None, Err(e));
        }
        let mut fresh = match Mirror::load(host, &key, Some(&id), path, scratch, lock).await {
            Ok(fresh) => fresh,
            Err(e) => return (None, Err(e)),
        };
        let result = fresh.append(messages, fingerprints, None).await;
        (Some(fresh), result)
    }

    /// The session lock, out of the mirror: calls run on a resumed mirror, which holds it;
    /// should one not, it is taken.
    fn take_lock(&mut self) -> Result<SessionLock> {
        match std::mem::replace(&mut self.lock, Lock::Released(None)) {
            Lock::Held(lock) => Ok(lock),
            Lock::Released(_) => SessionLock::acquire(self.session.path(), self.session.key()),
        }
    }

    /// Appends `messages` and the marker of the state they bring the mirror to, in one write.
    async fn append(
        &mut self,
        messages: &[AgentMessage],
        fingerprints: &Fingerprints,
        advancement_key: Option<&str>,
    ) -> Result<()> {
        let state = self.state.extended(messages.len(), fingerprints);
        let marker = marker::entry(&state, advancement_key);
        let texts: Vec<&str> = messages.iter().map(AgentMessage::json).collect();
        let result = (self.session)
            .append_texts_with(&texts, Some(("custom", &marker)))
            .await;
        // Written (an engine that failed to ingest does not undo the record): count it.
        if result.is_ok() || matches!(result, Err(Error::Ingest { .. })) {
            self.state = state;
            if let Some(key) = advancement_key {
                self.committed.insert(key.to_string());
            }
        }
        result.map(|_| ())
    }

    /// Narrows the window to the runtime's budget (never above the configured window); returns
    /// the budget an engine is given, narrowed the same way, so a compaction aims at the window
    /// the turns are assembled for.
    pub(crate) fn set_budget(&mut self, token_budget: Option<u32>) -> Option<u32> {
        let configured = self.configured.context_window;
        let budget = narrowed_budget(configured, token_budget);
        let window = budget.map_or(configured, u64::from);
        if window != self.session.context_window() {
            self.session
                .set_settings(self.configured.for_window(window));
        }
        budget
    }

    /// One turn through the session's turn driver (assemble, and compact first when the context
    /// passed the threshold), answered in positions of the runtime's array.
    pub(crate) async fn assemble(
        &mut self,
        token_budget: Option<u32>,
        request: &TurnRequest,
        before_compaction: &mut (dyn FnMut(&AutoCompaction) + Send),
    ) -> Result<ClientAssembly> {
        self.set_budget(token_budget);
        let turn = (self.session.assemble_turn(request, before_compaction)).await?;
        let items = (self.translator).translate(&self.session.transcript(), &turn.assembly);
        let compaction = turn.compaction.as_ref();
        Ok(ClientAssembly {
            items,
            estimated_tokens: turn.assembly.estimated_tokens,
            system_prompt_addition: turn.assembly.system_prompt_addition.clone(),
            compaction: compaction.and_then(|c| c.outcome.clone().ok()),
            turn,
        })
    }

    /// The runtime position of a transcript entry id (a compaction's first kept entry).
    pub(crate) fn position_of(&self, entry_id: &str) -> Option<usize> {
        let transcript = self.session.transcript();
        let index = transcript.index_of(entry_id)?;
        message_positions(&transcript).get(index).copied().flatten()
    }

    /// Gives back the engine instance and every descriptor (the ledger's too) until the next
    /// call takes them again; the ledger's waiting record is written first.
    pub(crate) async fn suspend(&mut self) -> Result<()> {
        self.write_ledger();
        self.ledger.release_handle();
        let suspended = self.session.suspend().await;
        self.release_lock();
        suspended
    }

    /// Lets another process open the session, remembering the file as this one leaves it.
    fn release_lock(&mut self) {
        if let Lock::Held(_) = self.lock {
            let left = Lock::Released(FileState::of(self.session.path()));
            if let Lock::Held(lock) = std::mem::replace(&mut self.lock, left) {
                lock.release();
            }
        }
    }

    /// Takes back what [`Mirror::suspend`] gave: the session lock (refused while another
    /// process holds the session), and the instance and descriptors. A mirror another process
    /// wrote meanwhile is read again, so this one never writes over what it did not see.
    pub(crate) async fn resume(&mut self, host: &Host) -> Result<()> {
        if let Lock::Released(left) = &self.lock {
            let path = self.session.path().to_path_buf();
            let lock = SessionLock::acquire(&path, self.session.key())?;
            if *left == FileState::of(&path) {
                self.lock = Lock::Held(lock);
            } else {
                self.reread(host, lock).await?;
            }
        }
        let resumed = self.session.resume().await;
        if resumed.is_err() {
            // Not resident after all (out of instances or descriptors): hold nothing.
            self.release_lock();
        }
        resumed
    }

    /// Reads the mirror file again, another process having written it since this one let it
    /// go; the stale value's instance was disposed by `suspend`, nothing is left to close.
    async fn reread(&mut self, host: &Host, lock: SessionLock) -> Result<()> {
        let (key, path) = (
            self.session.key().to_string(),
            self.session.path().to_path_buf(),
        );
        tracing::info!(session = %key, "{}: written by another process since this one let it go; reading it again", path.display());
        let id = self.session.id().to_string();
        let scratch = self.scratch.take();
        *self = Mirror::load(host, &key, Some(&id), path, scratch, lock).await?;
        Ok(())
    }

    /// Disposes the engine instance; an ephemeral mirror's directory goes with the value.
    pub(crate) async fn close(mut self) -> Result<()> {
        self.write_ledger();
        self.remove_released_lock_file();
        self.session.close().await
    }

    /// A session closed while given up leaves no lock file behind (its suspensions keep it),
    /// unless another process holds the lock now. Only a file that is there is taken: taking
    /// the lock would make the folder of a mirror removed meanwhile again.
    fn remove_released_lock_file(&self) {
        let path = self.session.path();
        if let Lock::Released(_) = self.lock
            && lock_path(path).exists()
            && let Ok(lock) = SessionLock::acquire(path, self.session.key())
        {
            drop(lock);
        }
    }
}

/// Readies the mirror file at `path` before its session opens: a torn commit set aside, or a
/// missing file created with the runtime's session id when it gave one; whether it was missing.
fn prepare_file(path: &Path, key: &str, session_id: Option<&str>) -> Result<bool> {
    if path.exists() {
        torn::set_aside_torn_commit(path)?;
        return Ok(false);
    }
    if let Some(id) = session_id {
        Session::create_file(path, key, id)?;
    }
    Ok(true)
}

/// The session of the mirror at `path`, its instance deferred to the first call.
async fn open_session(
    host: &Host,
    key: &str,
    path: PathBuf,
    settings: &Settings,
) -> Result<Session> {
    let engine = host.engine_for_session(key).await?;
    let target = SessionTarget::KeyAt {
        key: key.to_string(),
        path,
    };
    let options = ctxhost::SessionOptions {
        defer_instance: true,
        ..ctxhost::SessionOptions::on(engine).with_settings(settings.clone())
    };
    let mut session = host.open_session(&target, &options).await?;
    // The runtime's recorded usage describes what its model was sent (the engine's
    // assembly, at the runtime's window), not the mirror's context: measure by estimates,
    // the same way before and after a compaction.
    session.set_estimates_only(true);
    // A runtime that starts a sidecar per run (pi, `openclaw agent --local`) measures its
    // first turn's prefix against the previous run's last one.
    if let Some(digest) = ctxhost::ledger::last_record(session.path()).and_then(|r| r.request) {
        session.resume_prefix(digest);
    }
    Ok(session)
}

/// For each entry index, its position among the messages of the active branch.
fn message_positions(transcript: &Transcript) -> Vec<Option<usize>> {
    let mut positions = vec![None; transcript.entries().len()];
    let mut next = 0;
    for index in transcript.active_branch() {
        if transcript.entries()[index].entry_type() == "message" {
            positions[index] = Some(next);
            next += 1;
        }
    }
    positions
}

/// The runtime's budget, never above the configured window.
fn narrowed_budget(configured_window: u64, token_budget: Option<u32>) -> Option<u32> {
    token_budget
        .map(|budget| u32::try_from(configured_window.min(u64::from(budget))).unwrap_or(budget))
}

mod hold;
mod inserted;
mod marker;
mod record;
#[cfg(test)]
mod tests;
mod torn;
mod translate;
