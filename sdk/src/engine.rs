//! The [`ContextEngine`] trait and the glue the export macro plugs into the generated bindings.

use std::cell::RefCell;
use std::thread::LocalKey;

use crate::context::AssembleRequest;
use crate::error::Result;
use crate::host;
use crate::plan::pass_through;
use crate::tools::{ToolOutput, ToolSpec, Tools};
use crate::wit::engine::Guest;
use crate::wit::incremental::{
    AssembleOutcome, AssembleRequest as IncrementalRequest, Guest as IncrementalGuest,
};
use crate::wit::tools::Guest as ToolsGuest;
use crate::wit::types::AssembleRequest as GuestAssembleRequest;
use crate::wit::types::{
    AfterTurnRequest, AssembleResult, BootstrapRequest, BootstrapResult, CompactRequest,
    CompactResult, EngineInfo, IngestResult, Message, Session, SubagentEndReason, SubagentSpawn,
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

    /// The instance starts serving a session: the first call after the value is created, with
    /// the transcript's entry count. For an existing session (a restart, a fault, an idle
    /// eviction) the entries already written are **not** re-fed through
    /// [`ingest`](Self::ingest): read what is needed with [`host::context_entries`] or
    /// [`host::read_entries`] here or later. Default: not bootstrapped, "engine keeps no state".
    fn bootstrap(&mut self, request: BootstrapRequest) -> Result<BootstrapResult> {
        let _ = request;
        Ok(BootstrapResult {
            bootstrapped: false,
            imported_messages: None,
            reason: Some("engine keeps no state".into()),
        })
    }

    /// A message was appended to the transcript after this instance started: decoded (text,
    /// tool calls, and for a tool result its tool's name, call id and error flag) with its JSON
    /// verbatim. Default: ignored (`ingested: false`).
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

    /// Plans the context for the next model call. `request.entries` is the whole current
    /// context (the latest compaction summary, then every entry after it on the active
    /// branch) as [`ContextEntry`](crate::ContextEntry)s: reference, role, tokens and the tool
    /// facts of tool results, never the messages; with the window, the budget, the tools, and
    /// the model and pending prompt when the runtime named them. The answer keeps entries
    /// (alone or as ranges) and inserts messages ([`Plan`](crate::Plan)). Default:
    /// [`pass_through`] (every entry, as one range).
    fn assemble(&mut self, request: AssembleRequest) -> Result<AssembleResult> {
        Ok(pass_through(&request))
    }

    /// Compacts the session, asked by the runtime (the context crossed its threshold, or the
    /// model refused it as too long) or the operator. The request carries the window and
    /// what this engine's last `assemble` said it sends
    /// ([`received_tokens`](crate::CompactRequest::received_tokens)). Default:
    /// [`delegate_compact`] (the host's built-in compaction, which picks its layer from that
    /// size).
    fn compact(&mut self, request: CompactRequest) -> Result<CompactResult> {
        Ok(delegate_compact(&request))
    }

    /// A turn finished: message counts before and after it, and the summary of a compaction
    /// the runtime ran during it. Default: nothing.
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

    /// The agent tools this engine offers the model (contract 0.3), each one typed function
    /// (see [`Tools`]). Asked once per instance, after `bootstrap`; the host checks each call's
    /// arguments against the tool's schema before [`Tools::call`] runs it. Default: none.
    fn tools(&self) -> Tools<Self> {
        Tools::new()
    }

    /// The session is closing. Default: nothing. The SDK drops the engine value afterwards.
    fn dispose(&mut self, session: &Session) -> Result<()> {
        let _ = session;
        Ok(())
    }
}

/// Runs the host's built-in compaction (`delegate-compaction`) and wraps what it produced:
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
    /// An empty slot (the engine value is created on the first call).
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        Slot(RefCell::new(None))
    }

    fn call<T>(&self, hook: impl FnOnce(&mut E) -> Result<T>) -> std::result::Result<T, String> {
        let mut engine = self.0.borrow_mut();
        hook(engine.get_or_insert_with(E::default)).map_err(crate::error::Error::into_message)
    }
}

/// Implemented by the export macro's hidden type; gives the generated `Guest` trait its engine.
#[doc(hidden)]
pub trait Export {
    /// The exported engine.
    type Engine: ContextEngine;
    /// The thread-local slot holding its value.
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

    fn assemble(request: GuestAssembleRequest) -> Out<AssembleResult> {
        call::<X, _>(|e| e.assemble(request.into()))
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
        crate::context::forget();
        result
    }
}

impl<X: Export> IncrementalGuest for X {
    fn assemble(request: IncrementalRequest) -> Out<AssembleOutcome> {
        let Some(request) = AssembleRequest::incremental(request) else {
            return Ok(AssembleOutcome::Resend);
        };
        call::<X, _>(|e| e.assemble(request)).map(AssembleOutcome::Planned)
    }
}

impl<X: Export> ToolsGuest for X {
    fn list_tools() -> Vec<ToolSpec> {
        call::<X, _>(|e| Ok(e.tools().specs())).unwrap_or_default()
    }

    fn call_tool(name: String, arguments: String) -> Out<ToolOutput> {
        call::<X, _>(|e| {
            let tools = e.tools();
            Ok(tools.call(e, &name, &arguments))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::ContextEntry;
    use crate::wit::types::{ContextItem, Role};

    /// Counts what it saw; ingests user messages only.
    #[derive(Default)]
    struct Counter {
        seen: u32,
    }

    thread_local! {
        static CREATED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }

    impl ContextEngine for Counter {
        fn info() -> EngineInfo {
            EngineInfo::new("counter", "Counter", "1.0.0").owns_compaction(true)
        }

        fn ingest(&mut self, _: &Session, message: Message, _: bool) -> Result<IngestResult> {
            if self.seen == 0 {
                CREATED.with(|c| c.set(c.get() + 1));
            }
            self.seen += 1;
            if message.text == "fail" {
                return Err("cannot ingest \"fail\"".into());
            }
            Ok(IngestResult {
                ingested: message.role == Role::User,
            })
        }
    }

    struct Exported;

    impl Export for Exported {
        type Engine = Counter;
        fn slot() -> &'static LocalKey<Slot<Counter>> {
            thread_local!(static SLOT: Slot<Counter> = const { Slot::new() });
            &SLOT
        }
    }

    use crate::testing::{message as message_at, session};

    fn message(role: Role, text: &str) -> Message {
        message_at(0, role, text)
    }

    #[test]
    fn the_export_delegates_keeps_state_and_drops_it_on_dispose() {
        let info = <Exported as Guest>::info();
        assert_eq!((info.id.as_str(), info.owns_compaction), ("counter", true));
        assert!(Exported::slot().with(|s| s.0.borrow().is_none()));

        let bootstrap = <Exported as Guest>::bootstrap(BootstrapRequest {
            session: session(),
            session_file: "f".into(),
            entry_count: 0,
        })
        .unwrap();
        assert!(!bootstrap.bootstrapped);
        assert_eq!(bootstrap.reason.as_deref(), Some("engine keeps no state"));

        let batch = vec![
            message(Role::User, "a"),
            message(Role::Assistant, "b"),
            message(Role::User, "c"),
        ];
        assert_eq!(
            <Exported as Guest>::ingest_batch(session(), batch, false),
            Ok(2)
        );
        assert_eq!(
            Exported::slot().with(|s| s.0.borrow().as_ref().unwrap().seen),
            3
        );
        assert_eq!(
            <Exported as Guest>::ingest(session(), message(Role::User, "fail"), false),
            Err("cannot ingest \"fail\"".to_string())
        );

        // As the host sends it: the context as columns.
        let entries = crate::context::Entries::from(vec![ContextEntry::new(3, Role::User, 5)]);
        let request = crate::wit::types::AssembleRequest {
            session: session(),
            token_budget: None,
            context_window: 100,
            context_tokens: 5,
            available_tools: vec![],
            context: entries.into_columns(),
            model: None,
            prompt: None,
        };
        let assembled = <Exported as Guest>::assemble(request).unwrap();
        assert_eq!(assembled.items, [ContextItem::Keep(3)]);
        assert_eq!(assembled.estimated_tokens, 5);
        let spawn = SubagentSpawn {
            parent_session_key: session().key,
            child_session_key: format!("{}:child", session().key),
            context_mode: crate::wit::types::ContextMode::Isolated,
            ttl_ms: None,
        };
        assert_eq!(<Exported as Guest>::prepare_subagent_spawn(spawn), Ok(None));

        assert_eq!(<Exported as Guest>::dispose(session()), Ok(()));
        assert!(Exported::slot().with(|s| s.0.borrow().is_none()));
        <Exported as Guest>::ingest(session(), message(Role::User, "x"), false).unwrap();
        assert_eq!(CREATED.with(|c| c.get()), 2);
    }
}
