//! One engine instance serving one session: a `Store` and the exports, called under the
//! engine's deadlines, with every trap turned into an `EngineError` naming the engine, the
//! function and the session.

use std::sync::Arc;

use wasmtime::Store;

use super::clock::Watchdog;
use super::contract::{
    AfterTurnRequest, AssembleRequest, AssembleResult, BootstrapRequest, BootstrapResult,
    CompactRequest, CompactResult, EngineInfo, EngineTool, EngineToolOutput, IngestResult, Message,
    SessionIdentity, SubagentEndReason, SubagentSpawn,
};
use super::error::{EngineError, FaultKind, LimitExceeded};
use super::health::Health;
use super::limits::Function;
use super::plan::{Positions, Refusal};
use super::spec::EngineSpec;
use super::state::StoreState;
use super::versions::Bindings;
use super::{epoch, text};

/// One engine instance serving one session: its own wasm store (memory, fuel of host imports,
/// deadline) and the contract's calls, each checked against the engine's limits. A call that
/// faults returns [`EngineError::Fault`] and the instance must be dropped
/// ([`EngineError::discards_instance`]); a session of the embedding library does that and starts a fresh one.
pub struct EngineInstance {
    pub(super) store: Store<StoreState>,
    pub(super) bindings: Bindings,
    pub(super) spec: Arc<EngineSpec>,
    pub(super) health: Arc<Health>,
    pub(super) session: SessionIdentity,
    /// Where the entries of the requests' context are, for reading plans; kept while their
    /// revision holds.
    pub(super) positions: Positions,
}

impl EngineInstance {
    /// The id of the engine this instance runs.
    pub fn engine_id(&self) -> &str {
        &self.spec.id
    }

    /// The session this instance serves.
    pub fn session(&self) -> &SessionIdentity {
        &self.session
    }

    /// Runs one export: armed by [`Self::begin`], bounded by its watchdog, its outcome mapped by
    /// [`Self::end`]. Every call of the contract goes through here.
    async fn call<T>(
        &mut self,
        function: Function,
        export: impl AsyncFnOnce(
            &mut Bindings,
            &mut Store<StoreState>,
        ) -> wasmtime::Result<Result<T, String>>,
    ) -> Result<T, EngineError> {
        let watch = self.begin(function)?;
        let outcome = watch
            .bound(export(&mut self.bindings, &mut self.store))
            .await;
        self.end(function, outcome)
    }

    /// Arms the deadline and resets the per-call budgets; refuses while the circuit is open.
    /// The call runs inside the returned watchdog's [`Watchdog::bound`], so it ends on time
    /// even while the guest waits on something the epoch never interrupts (a WASI sleep).
    fn begin(&mut self, function: Function) -> Result<Watchdog, EngineError> {
        self.health
            .check(&self.spec.id, function, &self.session.key)?;
        let deadline = self.spec.limits.deadline(function);
        let data = self.store.data_mut();
        data.clock.start(deadline, self.spec.limits.wall_timeout);
        data.budget.reset();
        data.limiter.memory_refused = false;
        data.log.reset();
        self.store
            .set_epoch_deadline(epoch::ticks_for(deadline.min(epoch::CHECK_EVERY)));
        Ok(self.store.data().clock.watchdog())
    }

    /// Maps a call's outcome into the host's terms.
    fn end<T>(
        &mut self,
        function: Function,
        outcome: wasmtime::Result<Result<T, String>>,
    ) -> Result<T, EngineError> {
        let result = match outcome {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(message)) => Err(EngineError::Failed {
                engine: self.spec.id.clone(),
                function,
                session: self.session.key.clone(),
                message: text::message(&message, text::MAX_MESSAGE),
            }),
            Err(trap) => Err(self.fault(function, trap)),
        };
        self.health.record(function, &result);
        result
    }

    fn fault(&self, function: Function, error: wasmtime::Error) -> EngineError {
        let kind = classify(&error, self.store.data().limiter.memory_refused);
        let detail = match kind {
            FaultKind::Deadline => format!(
                "ran for more than {:?} of guest time",
                self.spec.limits.deadline(function)
            ),
            FaultKind::OutOfMemory => format!(
                "needed more than its {} MiB memory limit",
                self.spec.limits.memory_bytes >> 20
            ),
            // Which limit, in the host's own words.
            FaultKind::Limit => error
                .downcast_ref::<LimitExceeded>()
                .map_or_else(|| error.to_string(), ToString::to_string),
            // The trap's own words; its wasm backtrace belongs in debug logs, not the error.
            _ => match error.downcast_ref::<wasmtime::Trap>() {
                Some(trap) => trap.to_string(),
                None => error.to_string(),
            },
        };
        tracing::debug!(engine = %self.spec.id, %function, "fault: {error:?}");
        EngineError::Fault {
            engine: self.spec.id.clone(),
            function,
            session: self.session.key.clone(),
            kind,
            detail,
        }
    }

    /// Asks the engine who it is; the answer's strings are cut to bounded lengths.
    pub async fn info(&mut self) -> Result<EngineInfo, EngineError> {
        let info = self
            .call(Function::Info, async |bindings, store| {
                bindings.info(store).await.map(Ok)
            })
            .await;
        // What an engine says of itself is stored and printed (doctor, plugins, replay).
        info.map(|info| EngineInfo {
            id: text::line(&info.id, text::MAX_INFO_ID),
            name: text::line(&info.name, text::MAX_INFO_NAME),
            version: text::line(&info.version, text::MAX_INFO_VERSION),
            owns_compaction: info.owns_compaction,
        })
    }

    /// The instance's first call: the engine does its start-up work for the session.
    pub async fn bootstrap(
        &mut self,
        request: &BootstrapRequest,
    ) -> Result<BootstrapResult, EngineError> {
        let result = self
            .call(Function::Bootstrap, async |bindings, store| {
                bindings.bootstrap(store, request).await
            })
            .await;
        result.map(|mut result| {
            result.reason = result.reason.map(|r| text::message(&r, text::MAX_MESSAGE));
            result
        })
    }

    /// Hands the engine one new message; `is_heartbeat` marks a heartbeat turn's.
    pub async fn ingest(
        &mut self,
        message: &Message,
        is_heartbeat: bool,
    ) -> Result<IngestResult, EngineError> {
        let session = self.session.clone();
        self.call(Function::Ingest, async |bindings, store| {
            bindings
                .ingest(store, &session, message, is_heartbeat)
                .await
        })
        .await
    }

    /// Hands the engine several new messages at once; returns how many it ingested.
    pub async fn ingest_batch(
        &mut self,
        messages: &[Message],
        is_heartbeat: bool,
    ) -> Result<u32, EngineError> {
        let session = self.session.clone();
        self.call(Function::IngestBatch, async |bindings, store| {
            bindings
                .ingest_batch(store, &session, messages, is_heartbeat)
                .await
        })
        .await
    }

    /// Asks the engine for the context of the next model call (a 0.4 engine is sent only the
    /// rows appended since its last call, when it holds the request's context revision). The
    /// plan is read here, whatever the engine's contract version: runs of positions in the
    /// request's context, none kept twice; the host checks what it inserts before using it.
    pub async fn assemble(
        &mut self,
        request: &AssembleRequest,
    ) -> Result<AssembleResult, EngineError> {
        let answer = self
            .call(Function::Assemble, async |bindings, store| {
                bindings.assemble(store, request).await
            })
            .await?;
        (self.positions)
            .read(&request.context, request.context_revision, answer)
            .map_err(|refusal| self.refused(refusal))
    }

    /// A plan [`Positions::read`] refused, as the engine's error.
    fn refused(&self, refusal: Refusal) -> EngineError {
        let (engine, session) = (self.spec.id.clone(), self.session.key.clone());
        let function = Function::Assemble;
        match refusal {
            Refusal::Range(message) => EngineError::Failed {
                engine,
                function,
                session,
                message,
            },
            Refusal::Item(problem) => EngineError::InvalidOutput {
                engine,
                function,
                session,
                problem,
            },
        }
    }

    /// Asks the engine to make the context smaller; the host validates what it returns before
    /// writing it.
    pub async fn compact(
        &mut self,
        request: &CompactRequest,
    ) -> Result<CompactResult, EngineError> {
        let result = self
            .call(Function::Compact, async |bindings, store| {
                bindings.compact(store, request).await
            })
            .await;
        result.map(|mut result| {
            result.reason = result.reason.map(|r| text::message(&r, text::MAX_MESSAGE));
            result
        })
    }

    /// Tells the engine a turn ended.
    pub async fn after_turn(&mut self, request: &AfterTurnRequest) -> Result<(), EngineError> {
        self.call(Function::AfterTurn, async |bindings, store| {
            bindings.after_turn(store, request).await
        })
        .await
    }

    /// Tells the engine a subagent is about to be spawned; it may return a handle for
    /// [`EngineInstance::rollback_subagent_spawn`].
    pub async fn prepare_subagent_spawn(
        &mut self,
        spawn: &SubagentSpawn,
    ) -> Result<Option<u64>, EngineError> {
        self.call(Function::PrepareSubagentSpawn, async |bindings, store| {
            bindings.prepare_subagent_spawn(store, spawn).await
        })
        .await
    }

    /// Undoes a `prepare_subagent_spawn` whose spawn failed.
    pub async fn rollback_subagent_spawn(&mut self, handle: u64) -> Result<(), EngineError> {
        self.call(Function::RollbackSubagentSpawn, async |bindings, store| {
            bindings.rollback_subagent_spawn(store, handle).await
        })
        .await
    }

    /// Tells the engine a subagent's session ended.
    pub async fn on_subagent_ended(
        &mut self,
        child_session_key: &str,
        reason: SubagentEndReason,
    ) -> Result<(), EngineError> {
        self.call(Function::OnSubagentEnded, async |bindings, store| {
            bindings
                .on_subagent_ended(store, child_session_key, reason)
                .await
        })
        .await
    }

    /// Whether the engine can offer agent tools (it speaks contract 0.3 or later).
    pub fn offers_tools(&self) -> bool {
        self.bindings.tools().is_some()
    }

    /// The agent tools the engine offers, as it declared them (none before contract 0.3);
    /// the session checks them before the model sees any.
    pub async fn list_tools(&mut self) -> Result<Vec<EngineTool>, EngineError> {
        if !self.offers_tools() {
            return Ok(Vec::new());
        }
        self.call(
            Function::ListTools,
            async |bindings, store| match bindings.tools() {
                Some(tools) => tools.list_tools(store).await,
                None => Ok(Ok(Vec::new())),
            },
        )
        .await
    }

    /// Runs one of the engine's tools with `arguments` (a JSON object the session checked
    /// against the tool's schema). The content is cut to 32 KiB.
    pub async fn call_tool(
        &mut self,
        name: &str,
        arguments: &str,
    ) -> Result<EngineToolOutput, EngineError> {
        let output = self
            .call(Function::CallTool, async |bindings, store| {
                match bindings.tools() {
                    Some(tools) => tools.call_tool(store, name, arguments).await,
                    None => Ok(Err(format!(
                        "this engine speaks a contract before 0.3 and offers no tools (asked for `{name}`)"
                    ))),
                }
            })
            .await;
        output.map(|mut output| {
            output.content = text::message(&output.content, text::MAX_TOOL_OUTPUT);
            output
        })
    }

    /// Tells the engine the instance is about to be dropped.
    pub async fn dispose(&mut self) -> Result<(), EngineError> {
        let session = self.session.clone();
        self.call(Function::Dispose, async |bindings, store| {
            bindings.dispose(store, &session).await
        })
        .await
    }
}

/// Names the cause of a trap.
pub(super) fn classify(error: &wasmtime::Error, memory_refused: bool) -> FaultKind {
    if error.downcast_ref::<epoch::DeadlineExceeded>().is_some() {
        return FaultKind::Deadline;
    }
    if error.downcast_ref::<LimitExceeded>().is_some() {
        return FaultKind::Limit;
    }
    match error.downcast_ref::<wasmtime::Trap>() {
        Some(wasmtime::Trap::Interrupt) => FaultKind::Deadline,
        Some(wasmtime::Trap::StackOverflow) => FaultKind::StackOverflow,
        Some(wasmtime::Trap::UnreachableCodeReached) if memory_refused => FaultKind::OutOfMemory,
        Some(wasmtime::Trap::UnreachableCodeReached) => FaultKind::Panic,
        _ if memory_refused => FaultKind::OutOfMemory,
        _ => FaultKind::Trap,
    }
}
