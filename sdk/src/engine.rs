//! The [`ContextEngine`] trait and the glue the export macro plugs into the generated bindings.

use std::cell::RefCell;
use std::thread::LocalKey;

use crate::bindings::exports::ctxhost::engine::engine::Guest;
use crate::{
    AfterTurnRequest, AssembleRequest, AssembleResult, BootstrapRequest, BootstrapResult,
    CompactRequest, CompactResult, EngineInfo, IngestResult, Message, Result, Session,
    SubagentEndReason, SubagentSpawn, host, pass_through,
};

/// A context engine. Implement it, then export it with [`export_engine!`](crate::export_engine).
///
/// Only [`info`](Self::info) is required. The defaults make a pass-through engine that keeps no
/// state and leaves compaction to the host's runtime, so an engine overrides just the hooks it
/// cares about. The value is created with [`Default`] on the first session-scoped call; hooks
/// take `&mut self`, so per-session state can live in the struct.
pub trait ContextEngine: Default + 'static {
    /// The engine's id, name, version and whether it owns compaction. Called without an engine
    /// value (no construction happens for it), possibly before any session exists.
    fn info() -> EngineInfo;

    /// The instance starts serving a session. Default: not bootstrapped, "engine keeps no state".
    fn bootstrap(&mut self, request: BootstrapRequest) -> Result<BootstrapResult> {
        let _ = request;
        Ok(BootstrapResult {
            bootstrapped: false,
            imported_messages: None,
            reason: Some("engine keeps no state".into()),
        })
    }

    /// A new message was appended to the transcript. Default: ignored (`ingested: false`).
    fn ingest(
        &mut self,
        session: &Session,
        message: Message,
        is_heartbeat: bool,
    ) -> Result<IngestResult> {
        let _ = (session, message, is_heartbeat);
        Ok(IngestResult { ingested: false })
    }

    /// Several messages at once. Default: [`ingest`](Self::ingest) each, in order, and count
    /// how many were ingested; the first error stops the batch.
    fn ingest_batch(
        &mut self,
        session: &Session,
        messages: Vec<Message>,
        is_heartbeat: bool,
    ) -> Result<u32> {
        let mut ingested = 0;
        for message in messages {
            if self.ingest(session, message, is_heartbeat)?.ingested {
                ingested += 1;
            }
        }
        Ok(ingested)
    }

    /// Plans the context for the next model call. Default: [`pass_through`] (keep every entry).
    fn assemble(&mut self, request: AssembleRequest) -> Result<AssembleResult> {
        Ok(pass_through(&request))
    }

    /// Compacts the session. Default: [`delegate_compact`] (the host's runtime compaction).
    fn compact(&mut self, request: CompactRequest) -> Result<CompactResult> {
        Ok(delegate_compact(&request))
    }

    /// A turn finished. Default: nothing.
    fn after_turn(&mut self, request: AfterTurnRequest) -> Result<()> {
        let _ = request;
        Ok(())
    }

    /// A subagent is about to be spawned; may return a rollback handle, which the host passes
    /// to [`rollback_subagent_spawn`](Self::rollback_subagent_spawn) if the spawn fails.
    /// Default: no handle.
    fn prepare_subagent_spawn(&mut self, spawn: SubagentSpawn) -> Result<Option<u64>> {
        let _ = spawn;
        Ok(None)
    }

    /// Undoes [`prepare_subagent_spawn`](Self::prepare_subagent_spawn). Default: nothing.
    fn rollback_subagent_spawn(&mut self, handle: u64) -> Result<()> {
        let _ = handle;
        Ok(())
    }

    /// A subagent's session ended. Default: nothing.
    fn on_subagent_ended(
        &mut self,
        child_session_key: String,
        reason: SubagentEndReason,
    ) -> Result<()> {
        let _ = (child_session_key, reason);
        Ok(())
    }

    /// The session is closing. Default: nothing. The SDK drops the engine value afterwards.
    fn dispose(&mut self, session: &Session) -> Result<()> {
        let _ = session;
        Ok(())
    }
}

/// Runs the host's runtime compaction (`delegate-compaction`) and wraps what it produced:
/// `compacted` when it returned a compaction, else `reason: "nothing to compact"`; a host error
/// becomes `ok: false` with the error as the reason. What [`ContextEngine::compact`] does by
/// default, and a fallback for engines that compact by themselves.
pub fn delegate_compact(request: &CompactRequest) -> CompactResult {
    match host::delegate_compaction(request) {
        Ok(Some(compaction)) => CompactResult {
            ok: true,
            compacted: true,
            reason: None,
            compaction: Some(compaction),
        },
        Ok(None) => CompactResult {
            ok: true,
            compacted: false,
            reason: Some("nothing to compact".into()),
            compaction: None,
        },
        Err(error) => CompactResult {
            ok: false,
            compacted: false,
            reason: Some(format!("delegate-compaction failed: {error}")),
            compaction: None,
        },
    }
}

/// Where [`export_engine!`](crate::export_engine) keeps the engine value: created on first use,
/// dropped after `dispose`.
#[doc(hidden)]
pub struct Slot<E>(RefCell<Option<E>>);

impl<E: ContextEngine> Slot<E> {
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        Slot(RefCell::new(None))
    }

    fn call<T>(&self, hook: impl FnOnce(&mut E) -> Result<T>) -> std::result::Result<T, String> {
        let mut engine = self.0.borrow_mut();
        hook(engine.get_or_insert_with(E::default)).map_err(crate::Error::into_message)
    }
}

/// Implemented by the export macro's hidden type; gives the generated `Guest` trait its engine.
#[doc(hidden)]
pub trait Export {
    type Engine: ContextEngine;
    fn slot() -> &'static LocalKey<Slot<Self::Engine>>;
}

fn call<X: Export, T>(
    hook: impl FnOnce(&mut X::Engine) -> Result<T>,
) -> std::result::Result<T, String> {
    X::slot().with(|slot| slot.call(hook))
}

type Out<T> = std::result::Result<T, String>;

impl<X: Export> Guest for X {
    fn info() -> EngineInfo {
        X::Engine::info()
    }

    fn bootstrap(request: BootstrapRequest) -> Out<BootstrapResult> {
        call::<X, _>(|e| e.bootstrap(request))
    }

    fn ingest(session: Session, message: Message, is_heartbeat: bool) -> Out<IngestResult> {
        call::<X, _>(|e| e.ingest(&session, message, is_heartbeat))
    }

    fn ingest_batch(session: Session, messages: Vec<Message>, is_heartbeat: bool) -> Out<u32> {
        call::<X, _>(|e| e.ingest_batch(&session, messages, is_heartbeat))
    }

    fn assemble(request: AssembleRequest) -> Out<AssembleResult> {
        call::<X, _>(|e| e.assemble(request))
    }

    fn compact(request: CompactRequest) -> Out<CompactResult> {
        call::<X, _>(|e| e.compact(request))
    }

    fn after_turn(request: AfterTurnRequest) -> Out<()> {
        call::<X, _>(|e| e.after_turn(request))
    }

    fn prepare_subagent_spawn(spawn: SubagentSpawn) -> Out<Option<u64>> {
        call::<X, _>(|e| e.prepare_subagent_spawn(spawn))
    }

    fn rollback_subagent_spawn(handle: u64) -> Out<()> {
        call::<X, _>(|e| e.rollback_subagent_spawn(handle))
    }

    fn on_subagent_ended(child_session_key: String, reason: SubagentEndReason) -> Out<()> {
        call::<X, _>(|e| e.on_subagent_ended(child_session_key, reason))
    }

    fn dispose(session: Session) -> Out<()> {
        let result = call::<X, _>(|e| e.dispose(&session));
        // Drop the engine outside the borrow, so its `Drop` may log through the host.
        let engine = X::slot().with(|slot| slot.0.borrow_mut().take());
        drop(engine);
        result
    }
}
