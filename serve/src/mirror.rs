//! The mirror transcript of a runtime that keeps its own history: ctxhost's v3 copy of a
//! session, written only by committed turns (each closed by a marker entry in the same write),
//! and the translation of an assembly into positions of the runtime's message array.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ctxhost_transcript::Transcript;
use ctxhost_transcript::compaction::Settings;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::checks::AgentMessage;
use super::lock::SessionLock;
use super::protocol::ClientItem;
use super::scratch::ScratchRoot;
use super::sync::{Commit, SyncState};
use ctxhost::auto_compaction::AutoCompaction;
use ctxhost::error::{Error, Result};
use ctxhost::ledger::{Ledger, LedgerCompaction, LedgerRecord, TurnOutcome};
use ctxhost::session::{CompactOutcome, Session, Turn, TurnCompaction, TurnRequest};
use ctxhost::timestamp::now_for_file_name;
use ctxhost::{Host, SessionTarget, session_file};

/// Writes an empty mirror of `key` whose header id is the runtime's session id.
fn create_with_id(path: &Path, key: &str, id: &str) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|source| Error::Io {
            path: parent.to_path_buf(),
            source,
        })?;
    }
    let transcript = ctxhost::new_transcript(id, key, path)?;
    ctxhost_transcript::store::TranscriptFile::create(path, &transcript)?;
    Ok(())
}

/// `customType` of the entry that closes every commit.
pub(crate) const MARKER: &str = "ctxhost.mirror";

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

/// Whether the session lock is held, and if not, what the mirror file was when it was let go.
enum Lock {
    Held(SessionLock),
    /// Another process may have opened the session and written the mirror since: a file
    /// that is not this one any more is read again on `resume`.
    Released(Option<FileState>),
}

/// What tells a mirror file written since from one that was not: a rewrite is a new inode,
/// an append a new length and modification time.
#[derive(Debug, PartialEq, Eq)]
struct FileState {
    dev: u64,
    inode: u64,
    len: u64,
    modified: Option<std::time::SystemTime>,
}

impl FileState {
    fn of(path: &Path) -> Option<FileState> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        Some(FileState {
            dev: meta.dev(),
            inode: meta.ino(),
            len: meta.len(),
            modified: meta.modified().ok(),
        })
    }
}

/// An ephemeral session's directory, inside this process's scratch directory.
struct Scratch {
    /// Declared first: removed before the process's directory may be.
    dir: tempfile::TempDir,
    _root: Arc<ScratchRoot>,
}

impl Scratch {
    fn new() -> Result<Scratch> {
        let root = super::scratch::root().map_err(|source| Error::Io {
            path: std::env::temp_dir(),
            source,
        })?;
        let dir = tempfile::Builder::new()
            .prefix("session-")
            .tempdir_in(root.dir())
            .map_err(|source| Error::Io {
                path: root.dir().to_path_buf(),
                source,
            })?;
        Ok(Scratch { dir, _root: root })
    }
}

/// A `custom` entry of the mirror as far as `append` writes it and `scan` reads it: a marker
/// when its type is [`MARKER`].
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MarkerEntry {
    custom_type: Option<String>,
    #[serde(default)]
    data: Marker,
}

/// What a commit ends with: how far the runtime's history reached. One type written by
/// `append` and read back by `scan`, so the two cannot drift apart.
#[derive(Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Marker {
    /// The commit's idempotency key (a `sync` has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    advancement_key: Option<String>,
    /// The runtime's messages in the mirror after the commit.
    #[serde(default)]
    message_count: usize,
    /// The fingerprint of the last of them, as the runtime computed it.
    last_fingerprint: Option<String>,
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
        let created = !path.exists();
        if !created {
            set_aside_torn_commit(&path)?;
        } else if let Some(id) = session_id {
            create_with_id(&path, key, id)?;
        }
        let configured = host.compaction_settings();
        let engine = host.engine_for_session(key).await?;
        let target = SessionTarget::KeyAt {
            key: key.to_string(),
            path,
        };
        let options = ctxhost::SessionOptions {
            defer_instance: true,
            ..ctxhost::SessionOptions::on(engine).with_settings(configured.clone())
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
        last_fingerprint: Option<String>,
    ) -> Result<Commit> {
        if self.committed.contains(advancement_key) {
            return Ok(Commit::Duplicate);
        }
        self.append(messages, last_fingerprint, Some(advancement_key))
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
        last_fingerprint: Option<String>,
        reset: bool,
    ) -> (Option<Mirror>, Result<()>) {
        if reset {
            let key = self.session.key().to_string();
            // The reset mirror is still the runtime's session: it keeps the header id.
            let id = self.session.id().to_string();
            let path = self.session.path().to_path_buf();
            let lock = match std::mem::replace(&mut self.lock, Lock::Released(None)) {
                Lock::Held(lock) => lock,
                // Calls run on a resumed mirror, which holds it; should one not, it is taken.
                Lock::Released(_) => match SessionLock::acquire(&path, &key) {
                    Ok(lock) => lock,
                    Err(e) => return (Some(self), Err(e)),
                },
            };
            let scratch = self.scratch.take();
            if let Err(e) = self.session.close().await {
                tracing::warn!(session = %key, "closing before a reset: {e}");
            }
            let aside = unused_sibling(&path, "reset");
            if let Err(source) = std::fs::rename(&path, &aside) {
                return (None, Err(Error::Io { path, source }));
            }
            let mut fresh = match Mirror::load(host, &key, Some(&id), path, scratch, lock).await {
                Ok(fresh) => fresh,
                Err(e) => return (None, Err(e)),
            };
            let result = fresh.append(messages, last_fingerprint, None).await;
            return (Some(fresh), result);
        }
        if from != self.state.message_count {
            let problem = Error::SyncFrom {
                from,
                mirror: self.state.message_count,
            };
            return (Some(self), Err(problem));
        }
        let result = self.append(messages, last_fingerprint, None).await;
        (Some(self), result)
    }

    async fn append(
        &mut self,
        messages: &[AgentMessage],
        last_fingerprint: Option<String>,
        advancement_key: Option<&str>,
    ) -> Result<()> {
        let count = self.state.message_count + messages.len();
        let fingerprint = if messages.is_empty() {
            self.state.last_fingerprint.clone()
        } else {
            last_fingerprint
        };
        let data = Marker {
            advancement_key: advancement_key.map(str::to_string),
            message_count: count,
            last_fingerprint: fingerprint.clone(),
        };
        let marker = MarkerEntry {
            custom_type: Some(MARKER.to_string()),
            data,
        };
        let marker = serde_json::to_value(marker).expect("a marker serializes");
        let texts: Vec<&str> = messages.iter().map(AgentMessage::json).collect();
        let result = self
            .session
            .append_texts_with(&texts, Some(("custom", &marker)))
            .await;
        // Written (an engine that failed to ingest does not undo the record): count it.
        if result.is_ok() || matches!(result, Err(Error::Ingest { .. })) {
            self.state = SyncState {
                message_count: count,
                last_fingerprint: fingerprint,
            };
            if let Some(key) = advancement_key {
                self.committed.insert(key.to_string());
            }
        }
        result.map(|_| ())
    }

    /// Whether the runtime's history (its length and the fingerprint of its last message) is
    /// the mirror's.
    pub(crate) fn in_sync(&self, message_count: usize, last_fingerprint: Option<&str>) -> bool {
        message_count == self.state.message_count
            && match (last_fingerprint, self.state.last_fingerprint.as_deref()) {
                (Some(theirs), Some(ours)) => theirs == ours,
                _ => true,
            }
    }

    /// Narrows the window to the runtime's budget (never above the configured window).
    pub(crate) fn set_budget(&mut self, token_budget: Option<u32>) {
        let window = token_budget.map_or(self.configured.context_window, |budget| {
            self.configured.context_window.min(u64::from(budget))
        });
        if window != self.session.context_window() {
            self.session
                .set_settings(self.configured.for_window(window));
        }
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
        let turn = self
            .session
            .assemble_turn(request, before_compaction)
            .await?;
        let transcript = self.session.transcript();
        let items = self.translator.translate(&transcript, &turn.assembly);
        drop(transcript);
        Ok(ClientAssembly {
            items,
            estimated_tokens: turn.assembly.estimated_tokens,
            system_prompt_addition: turn.assembly.system_prompt_addition.clone(),
            compaction: turn
                .compaction
                .as_ref()
                .and_then(|c| c.outcome.clone().ok()),
            turn,
        })
    }

    /// The record of an assemble the runtime asked for, kept for the session's ledger when
    /// `write` (written by [`Mirror::write_ledger`] after the answer is sent, so the runtime
    /// never waits on the disk for it).
    pub(crate) fn record_turn(
        &mut self,
        host: &Host,
        assembly: std::result::Result<&ClientAssembly, &Error>,
        bridge_time: std::time::Duration,
        write: bool,
    ) -> LedgerRecord {
        let engine = self.session.engine();
        let configured = host.config().engine_for(self.session.key()).engine;
        let fallback = (engine.id() != configured).then(|| configured.to_string());
        let mut record = LedgerRecord {
            at: ctxhost::timestamp::now_iso(),
            engine: engine.id().to_string(),
            contract: engine.contract_version().to_string(),
            outcome: TurnOutcome::Ok,
            error: None,
            messages: self.state.message_count,
            assembled_tokens: 0,
            prefix: Default::default(),
            request: None,
            compaction: None,
            engine_micros: 0,
            bridge_micros: micros(bridge_time),
            configured_engine: fallback,
        };
        if record.configured_engine.is_some() {
            record.outcome = TurnOutcome::Fallback;
            record.error = Some(format!(
                "the configured engine `{configured}` is quarantined; `{}` serves (plugins.contextEngineFallback)",
                record.engine
            ));
        }
        match assembly {
            Ok(assembly) => {
                let turn = &assembly.turn;
                record.assembled_tokens = turn.assembly.estimated_tokens;
                record.prefix = turn.prefix;
                record.request = Some(turn.request_digest.clone());
                record.engine_micros = micros(turn.engine_time);
                record.compaction = turn.compaction.as_ref().map(|c| self.ledger_compaction(c));
            }
            Err(e) => {
                record.outcome = TurnOutcome::Failed;
                record.error = Some(ctxhost::error::chain(e));
            }
        }
        if write {
            self.write_ledger();
            self.unwritten = Some(record.clone());
        }
        record
    }

    /// Appends the last turn's record to the ledger, if one is waiting (a failure to write it
    /// is logged, never the turn's failure).
    pub(crate) fn write_ledger(&mut self) {
        if let Some(record) = self.unwritten.take()
            && let Err(e) = self.ledger.append(&record)
        {
            tracing::warn!(session = %self.session.key(), "the turn ledger was not written: {e}");
        }
    }

    /// A turn's compaction as the ledger keeps it, with the layer the transcript recorded.
    fn ledger_compaction(&self, compaction: &TurnCompaction) -> LedgerCompaction {
        match &compaction.outcome {
            Ok(outcome) => {
                let layer = outcome
                    .compacted
                    .then(|| self.last_compaction_layer())
                    .flatten();
                LedgerCompaction {
                    compacted: outcome.compacted,
                    layer,
                    tokens_before: compaction.measured_tokens,
                    tokens_after: if outcome.compacted {
                        outcome.tokens_after
                    } else {
                        compaction.measured_tokens
                    },
                    reason: outcome.reason.clone().filter(|_| !outcome.compacted),
                }
            }
            Err(reason) => LedgerCompaction {
                compacted: false,
                layer: None,
                tokens_before: compaction.measured_tokens,
                tokens_after: compaction.measured_tokens,
                reason: Some(reason.clone()),
            },
        }
    }

    fn last_compaction_layer(&self) -> Option<String> {
        let transcript = self.session.transcript();
        let entry = (transcript.entries().iter().rev()).find(|e| e.entry_type() == "compaction")?;
        let layer = entry.compaction_record()?.layer?;
        serde_json::to_value(layer)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
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
            self.lock = Lock::Released(FileState::of(self.session.path()));
        }
    }

    /// Takes back what [`Mirror::suspend`] gave: the session lock (refused while another
    /// process holds the session), and the instance and descriptors. A mirror another process
    /// wrote meanwhile is read again, so this one never writes over what it did not see.
    pub(crate) async fn resume(&mut self, host: &Host) -> Result<()> {
        if let Lock::Released(left) = &self.lock {
            let path = self.session.path().to_path_buf();
            let key = self.session.key().to_string();
            let lock = SessionLock::acquire(&path, &key)?;
            if *left == FileState::of(&path) {
                self.lock = Lock::Held(lock);
            } else {
                tracing::info!(session = %key, "{}: written by another process since this one let it go; reading it again", path.display());
                let id = self.session.id().to_string();
                let scratch = self.scratch.take();
                let reread = Mirror::load(host, &key, Some(&id), path, scratch, lock).await?;
                let stale = std::mem::replace(self, reread);
                // Its instance was disposed by `suspend`: nothing left to close but memory.
                drop(stale);
            }
        }
        let resumed = self.session.resume().await;
        if resumed.is_err() {
            // Not resident after all (out of instances or descriptors): hold nothing.
            self.release_lock();
        }
        resumed
    }

    /// Disposes the engine instance; an ephemeral mirror's directory goes with the value.
    pub(crate) async fn close(mut self) -> Result<()> {
        self.write_ledger();
        self.session.close().await
    }
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

/// The mirror's position and its committed keys, from its markers.
fn scan(transcript: &Transcript) -> (SyncState, HashSet<String>) {
    let mut state = SyncState {
        message_count: 0,
        last_fingerprint: None,
    };
    let mut committed = HashSet::new();
    for index in transcript.active_branch() {
        let entry = &transcript.entries()[index];
        match entry.entry_type() {
            "message" => state.message_count += 1,
            "custom" => {
                let Ok(marker) = serde_json::from_str::<MarkerEntry>(entry.line()) else {
                    continue;
                };
                if marker.custom_type.as_deref() != Some(MARKER) {
                    continue;
                }
                state.last_fingerprint = marker.data.last_fingerprint;
                if let Some(key) = marker.data.advancement_key {
                    committed.insert(key);
                }
            }
            _ => {}
        }
    }
    (state, committed)
}

/// A message ctxhost puts into the runtime's context, as the runtime can send it: roles a
/// model API knows stay, others (a compaction summary, a branch summary, a custom message)
/// become a user message; each is marked so the runtime can recognise ctxhost's output.
pub(crate) fn inserted(json: &str) -> Value {
    let Ok(Value::Object(mut message)) = serde_json::from_str::<Value>(json) else {
        return user_text(String::new(), "unknown", None);
    };
    let role = message
        .get("role")
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_string();
    // A runtime prints a message's time beside it: one ctxhost made up gets the current time
    // rather than none (which shows as 1970).
    let timestamp = Some(message.get("timestamp").cloned().unwrap_or_else(now_ms));
    match role.as_str() {
        "user" | "assistant" | "toolResult" => {
            if let Some(timestamp) = timestamp {
                message.entry("timestamp").or_insert(timestamp);
            }
            message.insert(
                "__ctxhost".into(),
                json!({ "inserted": true, "kind": role }),
            );
            Value::Object(message)
        }
        "compactionSummary" => {
            let summary = message.get("summary").and_then(Value::as_str).unwrap_or("");
            let text = format!(
                "The earlier part of this conversation was compacted. Summary of it:\n\n<summary>\n{summary}\n</summary>"
            );
            user_text(text, &role, timestamp)
        }
        "branchSummary" => {
            let summary = message.get("summary").and_then(Value::as_str).unwrap_or("");
            let text = format!(
                "Summary of a branch of this conversation that was left:\n\n<summary>\n{summary}\n</summary>"
            );
            user_text(text, &role, timestamp)
        }
        _ => user_text(content_text(&message), &role, timestamp),
    }
}

fn now_ms() -> Value {
    ctxhost::timestamp::now_unix_ms().into()
}

/// The text of a message's `content`, else the message as JSON.
fn content_text(message: &Map<String, Value>) -> String {
    (message
        .get("content")
        .and_then(super::protocol::content_text))
    .unwrap_or_else(|| Value::Object(message.clone()).to_string())
}

fn user_text(text: String, kind: &str, timestamp: Option<Value>) -> Value {
    let mut message = json!({
        "role": "user",
        "content": [{ "type": "text", "text": text }],
        "__ctxhost": { "inserted": true, "kind": kind },
    });
    if let Some(timestamp) = timestamp {
        message["timestamp"] = timestamp;
    }
    message
}

/// Moves messages after the last complete commit (a write a crash cut short) to
/// `<file>.torn-<time>`, so the mirror resumes from its last marker and nothing is lost.
fn set_aside_torn_commit(path: &Path) -> Result<()> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let text = std::fs::read(path).map_err(io)?;
    let cut = torn_commit_start(&text);
    let Some(cut) = cut else {
        return Ok(());
    };
    let aside = unused_sibling(path, "torn");
    std::fs::write(&aside, &text[cut..]).map_err(|source| Error::Io {
        path: aside.clone(),
        source,
    })?;
    ctxhost_transcript::store::rewrite_atomically(path, &String::from_utf8_lossy(&text[..cut]))?;
    tracing::warn!(
        "{}: a commit was cut short (the process stopped while writing it); its {} bytes were moved to {} and the mirror continues from its last complete commit",
        path.display(),
        text.len() - cut,
        aside.display()
    );
    Ok(())
}

/// The byte offset of the first message line after the last marker line (or, with no marker,
/// of the first message line), or of a torn last line: where an incomplete commit starts.
fn torn_commit_start(text: &[u8]) -> Option<usize> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Kind {
        #[serde(rename = "type")]
        kind: Option<String>,
        custom_type: Option<String>,
    }
    let mut offset = 0;
    let mut start = None;
    for (n, line) in text.split_inclusive(|&b| b == b'\n').enumerate() {
        let here = offset;
        offset += line.len();
        if n == 0 {
            continue; // the header
        }
        let complete = line.ends_with(b"\n");
        match serde_json::from_slice::<Kind>(line) {
            Ok(kind) if complete => {
                let is_marker = kind.kind.as_deref() == Some("custom")
                    && kind.custom_type.as_deref() == Some(MARKER);
                if is_marker {
                    start = None;
                } else if kind.kind.as_deref() == Some("message") {
                    start = start.or(Some(here));
                }
            }
            _ => {
                // A torn or unreadable line: everything from the open commit (or here) goes.
                start = start.or(Some(here));
                break;
            }
        }
    }
    start
}

/// `<file>.<kind>-<time>` for a copy set aside, with `-2`, `-3`… after the time when a copy
/// was set aside in the same millisecond (a burst of resets): one never replaces another.
/// Only the holder of the session's lock sets its copies aside, so no one takes the name
/// between the look and the write.
fn unused_sibling(path: &Path, kind: &str) -> PathBuf {
    let stem = format!("{kind}-{}", now_for_file_name());
    let mut aside = sibling(path, &stem);
    let mut n = 1;
    while aside.symlink_metadata().is_ok() {
        n += 1;
        aside = sibling(path, &format!("{stem}-{n}"));
    }
    aside
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(format!(".{suffix}"));
    PathBuf::from(name)
}

fn micros(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
mod translate;
