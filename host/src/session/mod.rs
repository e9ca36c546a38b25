//! A session: the transcript the host owns, and the engine instance that serves it. This is
//! the API an agent runtime embeds: append, assemble, compact, after-turn, subagent hooks, close.

mod compact;
mod convert;
mod file;
mod prefix;
mod request;
mod shared;
mod tools;
mod turn;
mod validate;

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use ctxhost_transcript::store::TranscriptFile;
use ctxhost_transcript::{Transcript, TranscriptError};
use serde_json::Value;

use crate::timestamp::now_iso;

pub use crate::error::ContextOverflow;
pub use prefix::{Prefix, RequestDigest};
pub use request::{Breakdown, FlushSignal, ModelRequest, TurnOptions};
pub use tools::{AgentTool, ToolOutput, ToolSource};
pub use turn::{Turn, TurnCompaction, TurnRequest};
pub use validate::{AssembledItem, Assembly, AssemblyShape, Items};

use crate::error::{Error, Result};
pub use convert::tokens_u32;
use ctxhost_runtime::contract::{
    AfterTurnRequest, AssembleRequest, BootstrapRequest, CompactionTrigger, ContextMode, Message,
    SessionIdentity, SubagentEndReason, SubagentSpawn,
};
use ctxhost_runtime::{EngineError, EngineInstance, Function, PreparedEngine};
use shared::Shared;

/// Options of one `assemble`.
#[derive(Debug, Clone, Default)]
pub struct AssembleOptions {
    /// Tokens the assembled messages may use; None lets the engine fill what the window leaves.
    pub token_budget: Option<u32>,
    /// Names of the tools the model may call on this turn.
    pub available_tools: Vec<String>,
}

/// The current context of `transcript` as an engine receives it in `assemble` (what a session
/// builds and keeps between calls; built afresh here).
pub fn context_of(transcript: &Transcript) -> ctxhost_runtime::contract::Context {
    convert::ContextCache::default().owned_context(transcript)
}

/// What the runtime knows of the coming model call beyond the transcript; engines speaking
/// contract 0.2 or later receive it in `assemble`.
#[derive(Debug, Clone, Default)]
pub struct PendingCall {
    /// The model the call goes to.
    pub model: Option<String>,
    /// The prompt about to be sent, not yet in the transcript.
    pub prompt: Option<String>,
}

/// Options of one `compact`.
#[derive(Debug, Clone)]
pub struct CompactOptions {
    /// Compact even when the context is below every threshold.
    pub force: bool,
    /// Why the compaction runs (manual, automatic, or a request that overflowed).
    pub trigger: CompactionTrigger,
    /// Tokens the compacted context should fit, when the runtime sets a budget.
    pub token_budget: Option<u32>,
    /// What the summary should focus on, from the operator or the agent.
    pub custom_instructions: Option<String>,
}

impl CompactOptions {
    /// A manual compaction that runs even when the context is below every threshold (what
    /// `ctxhost compact --yes` asks for).
    pub fn forced() -> Self {
        Self {
            force: true,
            ..Self::default()
        }
    }
}

impl Default for CompactOptions {
    fn default() -> Self {
        Self {
            force: false,
            trigger: CompactionTrigger::Manual,
            token_budget: None,
            custom_instructions: None,
        }
    }
}

/// What [`Session::after_turn`] tells the engine about the turn that ended.
#[derive(Debug, Clone, Default)]
pub struct AfterTurnOptions {
    /// Context messages before this turn's prompt was appended.
    pub pre_prompt_message_count: u32,
    /// The summary of a compaction the runtime ran during the turn, if any.
    pub auto_compaction_summary: Option<String>,
    /// The turn was a heartbeat, not the user's.
    pub is_heartbeat: bool,
    /// The turn's token budget, when the runtime set one.
    pub token_budget: Option<u32>,
}

/// How a child session of [`Session::prepare_subagent_spawn`] starts.
#[derive(Debug, Clone)]
pub struct SpawnOptions {
    /// Whether the child starts empty (`Isolated`, the default) or from this context (`Fork`).
    pub context_mode: ContextMode,
    /// How long the child may live, in milliseconds.
    pub ttl_ms: Option<u64>,
}

impl Default for SpawnOptions {
    fn default() -> Self {
        Self {
            context_mode: ContextMode::Isolated,
            ttl_ms: None,
        }
    }
}

/// What a `compact` did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompactOutcome {
    /// Whether a compaction entry was written.
    pub compacted: bool,
    /// Why the engine did not compact, when it says.
    pub reason: Option<String>,
    /// The context's tokens before the compaction.
    pub tokens_before: u64,
    /// The context's tokens after it (equal to `tokens_before` when nothing was compacted).
    pub tokens_after: u64,
    /// The id of the first entry kept after the new compaction entry.
    pub first_kept_entry_id: Option<String>,
    /// What the written compaction's record warns of (the degradation guard: "this is
    /// summarizing compaction #4 …"), for the caller to show in its own output. The library
    /// only logs them at info: a session compacting as configured is not a fault.
    pub warnings: Vec<String>,
}

/// One conversation: the transcript file the host owns and the engine instance that serves
/// it. Every method is one step of the lifecycle an agent runtime drives (append, assemble,
/// compact, after-turn, subagent hooks, close). An engine fault fails that call with an error
/// naming the engine and function and discards the instance; the next call starts a fresh
/// one bootstrapped from the transcript, so the session itself survives.
pub struct Session {
    engine: Arc<PreparedEngine>,
    shared: Arc<Shared>,
    file: TranscriptFile,
    context_window: u64,
    instance: Option<EngineInstance>,
    rollbacks: HashSet<u64>,
    estimates_only: bool,
    /// The compaction count at which the memory-flush signal last fired.
    flush_signalled_in: Option<usize>,
    /// What the engine's last assembly sent minus the transcript's counted context then: a
    /// trimming engine's is negative. A compaction is told the transcript's count now plus
    /// this, so messages that arrived since that assembly are not left out of the figure that
    /// chooses its layer.
    assembled_offset: Option<i64>,
    /// Whether the host's recall tools are offered (`recall.tools`).
    recall_tools: bool,
    /// The engine's tools as checked, asked once per instance.
    engine_tools: Option<Vec<tools::CheckedTool>>,
    /// The previous turn's request, to measure how much of the next one a prompt cache keeps.
    prefix: prefix::PrefixTracker,
}

impl Session {
    /// Opens the transcript at `path` (creating it when missing); the engine instance starts
    /// on the first call, or with [`Session::resume`].
    pub(crate) async fn open(
        engine: Arc<PreparedEngine>,
        key: &str,
        path: &Path,
        settings: ctxhost_transcript::compaction::Settings,
        token_counter: Option<ctxhost_transcript::TokenCounter>,
        model: crate::model::ModelConfig,
        report_load: bool,
    ) -> Result<Self> {
        let context_window = settings.context_window;
        let (file, mut transcript) = open_transcript(path, key, report_load)?;
        // Recorded usage above this window was measured elsewhere (a replayed or moved
        // session): it must not stand for this session's context.
        transcript.set_context_window(Some(context_window));
        if token_counter.is_some() {
            transcript.set_token_counter(token_counter);
        }
        let session = SessionIdentity {
            id: transcript.header().id().to_string(),
            key: key.to_string(),
        };
        let file_path = path.to_path_buf();
        let shared = Shared::new(session, file_path, settings, model, transcript);
        Ok(Self::on(engine, Arc::new(shared), file, context_window))
    }

    /// A session of `shared` on `file`, no engine instance started yet.
    fn on(
        engine: Arc<PreparedEngine>,
        shared: Arc<Shared>,
        file: TranscriptFile,
        context_window: u64,
    ) -> Self {
        Self {
            engine,
            shared,
            file,
            context_window,
            instance: None,
            rollbacks: HashSet::new(),
            estimates_only: false,
            flush_signalled_in: None,
            assembled_offset: None,
            recall_tools: true,
            engine_tools: None,
            prefix: prefix::PrefixTracker::default(),
        }
    }

    /// The session key (`agent:main:main`, or a transcript's file stem).
    pub fn key(&self) -> &str {
        &self.shared.session.key
    }
    /// The session id in the transcript's header.
    pub fn id(&self) -> &str {
        &self.shared.session.id
    }
    /// The transcript file.
    pub fn path(&self) -> &Path {
        &self.shared.file
    }
    /// Where the transcript's previous bytes were kept, once this session rewrote the file
    /// (its first write migrates an older version, or sets a torn last line aside).
    pub fn transcript_backup(&self) -> Option<&Path> {
        self.file.backup()
    }
    /// The engine serving the session.
    pub fn engine(&self) -> &Arc<PreparedEngine> {
        &self.engine
    }
    /// The context window the session is measured and compacted against, in tokens.
    pub fn context_window(&self) -> u64 {
        self.context_window
    }

    /// Read access to the transcript.
    pub fn transcript(&self) -> impl std::ops::Deref<Target = Transcript> + '_ {
        self.shared.read()
    }

    /// Whether each append is fsynced (the default) or only flushed: a replay into a scratch
    /// file needs no durability. The engine's state dir follows: without it, the engine's own
    /// `sync` calls succeed without waiting on the disk.
    pub fn set_sync(&mut self, sync: bool) {
        self.file.set_sync(sync);
        self.shared
            .durable
            .store(sync, std::sync::atomic::Ordering::Relaxed);
    }

    /// Measure the context by estimates only, ignoring recorded `usage`: a replay's usage
    /// figures come from the original run, at another window.
    pub fn set_estimates_only(&mut self, estimates_only: bool) {
        self.estimates_only = estimates_only;
    }

    /// The context size the runtime would report now: usage-based (see TRANSCRIPTS.md), or
    /// the sum of estimates when `set_estimates_only`.
    pub fn context_tokens(&self) -> u64 {
        self.measure(&self.shared.read())
    }

    fn measure(&self, transcript: &Transcript) -> u64 {
        if self.estimates_only {
            // Summed as the context grew, not per call.
            self.shared.context.context(transcript).tokens.entries
        } else {
            transcript.context_tokens()
        }
    }

    /// The live instance, created and bootstrapped from the transcript when there is none
    /// (at open, and after a fault discarded the previous one).
    async fn instance(&mut self) -> Result<&mut EngineInstance> {
        if self.instance.is_none() {
            let services = self.shared.clone();
            let mut instance = self
                .engine
                .instantiate(self.shared.session.clone(), services)
                .await?;
            let request = BootstrapRequest {
                session: self.shared.session.clone(),
                session_file: self.path().display().to_string(),
                entry_count: self.shared.read().entries().len() as u32,
            };
            instance.bootstrap(&request).await?;
            self.instance = Some(instance);
            self.engine_tools = None;
        }
        Ok(self.instance.as_mut().expect("set above"))
    }

    /// Drops the instance after a fault so the next call starts from a fresh one.
    fn settle<T>(&mut self, result: Result<T, EngineError>) -> Result<T> {
        result.map_err(|e| {
            if e.discards_instance() {
                tracing::warn!(
                    engine = self.engine.id(),
                    session = self.key(),
                    "{e}; instance discarded"
                );
                self.instance = None;
                self.engine_tools = None;
            }
            Error::Engine(e)
        })
    }

    fn host_bytes_limit(&self) -> usize {
        self.engine.spec().limits.host_bytes_per_call
    }

    fn invalid(&self, function: Function, problem: String) -> Error {
        Error::Engine(EngineError::InvalidOutput {
            engine: self.engine.id().to_string(),
            function,
            session: self.key().to_string(),
            problem,
        })
    }

    /// Appends an AgentMessage to the transcript (written and flushed first: the transcript is
    /// the record), then hands it to the engine. Returns the new entry's index.
    pub async fn append(&mut self, message: &Value) -> Result<usize> {
        // Start (and bootstrap) an instance before writing: a fresh instance bootstraps from
        // the transcript, and must not see this message there and again through ingest.
        let ready = self.instance().await.map(|_| ());
        let (index, contract_message) = {
            let mut transcript = self.shared.write();
            let index = transcript.append_message(message, &now_iso())?;
            write_or_undo(&mut self.file, &mut transcript, index)?;
            (index, convert::message(index, &transcript.entries()[index]))
        };
        ready.map_err(|e| self.saved_but(index, e))?;
        if let Some(message) = contract_message {
            let result = self.instance().await?.ingest(&message, false).await;
            self.settle(result).map_err(|e| self.saved_but(index, e))?;
        }
        Ok(index)
    }

    /// Appends several messages (a turn's worth), then hands them to the engine in one
    /// `ingest-batch` call. Returns the new entries' indices.
    pub async fn append_batch(&mut self, messages: &[Value]) -> Result<Vec<usize>> {
        let texts: Vec<String> = messages.iter().map(Value::to_string).collect();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        self.append_texts_with(&texts, None).await
    }

    /// Appends messages given as JSON text (kept byte for byte), then one entry of another
    /// type (`trailer`: e.g. a marker recording what was committed), all in one write, then
    /// hands the messages to the engine in one `ingest-batch`. Nothing is written when any
    /// message is invalid. Returns the new messages' indices.
    pub async fn append_texts_with(
        &mut self,
        messages: &[&str],
        trailer: Option<(&str, &Value)>,
    ) -> Result<Vec<usize>> {
        let ready = self.instance().await.map(|_| ());
        let (indices, batch) = self.write_texts(messages, trailer)?;
        let Some(&last) = indices.last() else {
            return Ok(indices);
        };
        ready.map_err(|e| self.saved_but(last, e))?;
        let result = self.instance().await?.ingest_batch(&batch, false).await;
        self.settle(result).map_err(|e| self.saved_but(last, e))?;
        Ok(indices)
    }

    /// Appends the messages and the trailer to the transcript and writes them, all or none;
    /// returns the messages' indices, and the messages as the engine receives them.
    fn write_texts(
        &mut self,
        messages: &[&str],
        trailer: Option<(&str, &Value)>,
    ) -> Result<(Vec<usize>, Vec<Message>)> {
        let mut transcript = self.shared.write();
        let first = transcript.entries().len();
        let indices = append_all(&mut transcript, messages, trailer)?;
        write_or_undo(&mut self.file, &mut transcript, first)?;
        let entries = transcript.entries();
        let batch = (indices.iter())
            .filter_map(|&i| convert::message(i, &entries[i]))
            .collect();
        Ok((indices, batch))
    }

    /// Changes the window (and the compaction settings with it) the session is measured and
    /// compacted against, e.g. when the runtime's model has a smaller budget than configured.
    pub fn set_settings(&mut self, settings: ctxhost_transcript::compaction::Settings) {
        self.context_window = settings.context_window;
        self.shared
            .write()
            .set_context_window(Some(settings.context_window));
        self.shared.set_settings(settings);
    }

    /// The compaction settings in force.
    pub fn settings(&self) -> ctxhost_transcript::compaction::Settings {
        self.shared.settings().clone()
    }

    /// An engine error after entry `index` was written: the message is safe, say so.
    fn saved_but(&self, index: usize, error: Error) -> Error {
        match error {
            Error::Engine(source) => Error::Ingest {
                entry_id: self.shared.read().entries()[index].id().to_string(),
                source,
            },
            other => other,
        }
    }

    /// Asks the engine for the context of the next model call.
    pub async fn assemble(&mut self, options: &AssembleOptions) -> Result<Assembly> {
        self.assemble_for(options, &PendingCall::default()).await
    }

    /// [`Session::assemble`], telling the engine what the runtime knows of the call.
    pub async fn assemble_for(
        &mut self,
        options: &AssembleOptions,
        pending: &PendingCall,
    ) -> Result<Assembly> {
        let (request, counted) = self.assemble_request(options, pending);
        let result = self.instance().await?.assemble(&request).await;
        let result = self.settle(result)?;
        let assembly = validate::assembly(
            &request.context,
            request.context_revision,
            result,
            self.host_bytes_limit(),
        )
        .map_err(|problem| self.invalid(Function::Assemble, problem))?;
        self.assembled_offset = Some(i64::from(assembly.estimated_tokens) - counted as i64);
        Ok(assembly)
    }

    /// The engine's `assemble` request, with the host's count of the context rows it sends.
    fn assemble_request(
        &self,
        options: &AssembleOptions,
        pending: &PendingCall,
    ) -> (AssembleRequest, u64) {
        let (snapshot, context_tokens) = {
            let transcript = self.shared.read();
            let snapshot = self.shared.context.context(&transcript);
            (snapshot, self.measure(&transcript))
        };
        let request = AssembleRequest {
            session: self.shared.session.clone(),
            token_budget: options.token_budget,
            context_window: tokens_u32(self.context_window),
            context_tokens: tokens_u32(context_tokens),
            available_tools: options.available_tools.clone(),
            context: snapshot.context,
            context_revision: snapshot.revision,
            model: pending.model.clone(),
            prompt: pending.prompt.clone(),
        };
        (request, snapshot.tokens.rows)
    }

    /// The messages of an assembly as AgentMessage JSON, kept ones byte-identical to the file.
    pub fn render(&self, assembly: &Assembly) -> Vec<String> {
        let transcript = self.shared.read();
        assembly
            .items()
            .map(|item| match item {
                AssembledItem::Entry(index) => transcript.context_message_json(index).into_owned(),
                AssembledItem::Inserted(json) => json.to_string(),
            })
            .collect()
    }

    /// Tells the engine a turn ended.
    pub async fn after_turn(&mut self, options: &AfterTurnOptions) -> Result<()> {
        let message_count = self.shared.read().context().len() as u32;
        let request = AfterTurnRequest {
            session: self.shared.session.clone(),
            session_file: self.path().display().to_string(),
            pre_prompt_message_count: options.pre_prompt_message_count,
            message_count,
            auto_compaction_summary: options.auto_compaction_summary.clone(),
            is_heartbeat: options.is_heartbeat,
            token_budget: options.token_budget,
        };
        let result = self.instance().await?.after_turn(&request).await;
        self.settle(result)
    }

    /// Lets the engine prepare a child session; returns the rollback handle it issued, if any
    /// (hand it back with [`Session::rollback_subagent_spawn`] when the spawn fails).
    pub async fn prepare_subagent_spawn(
        &mut self,
        child_session_key: &str,
        options: &SpawnOptions,
    ) -> Result<Option<u64>> {
        let spawn = SubagentSpawn {
            parent_session_key: self.key().to_string(),
            child_session_key: child_session_key.to_string(),
            context_mode: options.context_mode,
            ttl_ms: options.ttl_ms,
        };
        let result = self.instance().await?.prepare_subagent_spawn(&spawn).await;
        let handle = self.settle(result)?;
        if let Some(handle) = handle {
            self.rollbacks.insert(handle);
        }
        Ok(handle)
    }

    /// The spawn failed: hands the engine back its rollback handle (only one it issued).
    pub async fn rollback_subagent_spawn(&mut self, handle: u64) -> Result<()> {
        if !self.rollbacks.remove(&handle) {
            return Err(Error::UnknownRollback {
                engine: self.engine.id().to_string(),
                session: self.key().to_string(),
                handle,
            });
        }
        let result = self.instance().await?.rollback_subagent_spawn(handle).await;
        self.settle(result)
    }

    /// Tells the engine a child session ended, and why.
    pub async fn on_subagent_ended(
        &mut self,
        child_session_key: &str,
        reason: SubagentEndReason,
    ) -> Result<()> {
        let result = self
            .instance()
            .await?
            .on_subagent_ended(child_session_key, reason)
            .await;
        self.settle(result)
    }

    /// Disposes the engine's session state and closes the session.
    pub async fn close(mut self) -> Result<()> {
        self.release_instance().await
    }

    /// Disposes the engine instance and gives back what it holds (its memory, its pooled
    /// slot); the session stays open and the next call starts a fresh instance bootstrapped
    /// from the transcript, as after a fault. What a runtime does with a session gone idle.
    pub async fn release_instance(&mut self) -> Result<()> {
        self.engine_tools = None;
        if let Some(mut instance) = self.instance.take() {
            let result = instance.dispose().await;
            self.settle(result)?;
        }
        Ok(())
    }

    /// Whether an engine instance is live for this session.
    pub fn has_instance(&self) -> bool {
        self.instance.is_some()
    }

    /// Gives back everything an idle session holds besides its memory: the engine instance
    /// (its pooled slot, its state dir's descriptor), the transcript's descriptor and the
    /// recall index's. The next call, or [`Session::resume`], takes them again. A failure to
    /// dispose the instance is returned; everything is given back either way.
    pub async fn suspend(&mut self) -> Result<()> {
        let disposed = self.release_instance().await;
        self.file.release_handle();
        self.shared.release_recall();
        disposed
    }

    /// Takes what [`Session::suspend`] gave back (or a session opened without an instance
    /// never had): the transcript's descriptor and an engine instance, bootstrapped from the
    /// transcript. Nothing is written, so a call that fails here (the host out of instances
    /// or descriptors) can be made again.
    pub async fn resume(&mut self) -> Result<()> {
        self.file.reopen()?;
        self.instance().await.map(|_| ())
    }
}

/// The transcript at `path`, created (for session `key`) when missing; its load warnings
/// logged when `report_load`.
fn open_transcript(
    path: &Path,
    key: &str,
    report_load: bool,
) -> Result<(TranscriptFile, Transcript)> {
    let (file, transcript) = if path.exists() {
        TranscriptFile::open(path)?
    } else {
        file::create(path, key, &uuid::Uuid::new_v4().to_string())?
    };
    if report_load {
        for warning in ctxhost_transcript::shown_warnings(transcript.warnings()) {
            tracing::warn!("{warning}");
        }
    }
    Ok((file, transcript))
}

/// Appends `messages`, then the `trailer` entry; the first message the transcript refuses
/// undoes them all.
fn append_all(
    transcript: &mut Transcript,
    messages: &[&str],
    trailer: Option<(&str, &Value)>,
) -> Result<Vec<usize>> {
    let first = transcript.entries().len();
    let appended = append_each(transcript, messages, trailer);
    if appended.is_err() {
        transcript.truncate(first);
    }
    appended
}

fn append_each(
    transcript: &mut Transcript,
    messages: &[&str],
    trailer: Option<(&str, &Value)>,
) -> Result<Vec<usize>> {
    // The transcript checks each message as it appends it (JSON, an object, a role).
    let indices = (messages.iter().enumerate())
        .map(|(index, text)| {
            (transcript.append_message_text(text, &now_iso()))
                .map_err(|e| invalid_message(index, e))
        })
        .collect::<Result<Vec<_>>>()?;
    if let Some((entry_type, members)) = trailer {
        transcript.append_other(entry_type, members, &now_iso())?;
    }
    Ok(indices)
}

/// Writes the entries appended from `first` on; when the write fails (a full disk, the file
/// size limit) they are dropped again, so the session never shows or builds on what the file
/// does not hold (the file itself is cut back to its last good length by the append).
fn write_or_undo(
    file: &mut TranscriptFile,
    transcript: &mut Transcript,
    first: usize,
) -> Result<()> {
    file.append(transcript, first).map_err(|e| {
        transcript.truncate(first);
        e.into()
    })
}

/// A message the transcript refused to append, as the caller's error about its `index`-th
/// message (what is wrong, without the transcript's line it would have had).
fn invalid_message(index: usize, error: TranscriptError) -> Error {
    match error {
        TranscriptError::Invalid { problem, .. } => Error::InvalidMessage { index, problem },
        other => other.into(),
    }
}
