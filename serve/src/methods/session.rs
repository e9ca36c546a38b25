//! The methods a session's actor runs, each on the session's mirror.

use ctxhost::auto_compaction::AutoCompaction;
use ctxhost::runtime::contract::CompactionTrigger;
use ctxhost::session::{CompactOptions, CompactOutcome, PendingCall, TurnRequest};

use super::{Method, Route, SessionContext, SessionMethod, answer};
use crate::checks::{Base, SessionKey, base_mismatch, check_fingerprints};
use crate::mirror::Mirror;
use crate::output::Notify;
use crate::protocol::*;
use crate::rpc::RpcError;
use crate::sync::{Fingerprints, SyncState};

impl Method for BootstrapParams {
    const NAME: &'static str = "session.bootstrap";
    type Result = BootstrapResult;
}

impl SessionMethod for BootstrapParams {
    fn session_key(&self) -> Option<&SessionKey> {
        Some(&self.session_key)
    }
    fn route(&self) -> Route {
        Route::Open(self.session_id.as_ref().map(|id| id.as_str().to_string()))
    }
    async fn run(self, session: SessionContext<'_>) -> Result<BootstrapResult, RpcError> {
        let mirror = match session.slot {
            Some(mirror) => mirror,
            None => {
                let id = self.session_id.as_ref().map(|id| id.as_str());
                let opened = Mirror::open(session.host, session.key, id).await?;
                session.slot.insert(opened)
            }
        };
        Ok(BootstrapResult {
            session_key: session.key.to_string(),
            session_id: mirror.session().id().to_string(),
            created: mirror.created(),
            ephemeral: mirror.is_ephemeral(),
            state: mirror.state().clone(),
            mirror: mirror.session().path().display().to_string(),
        })
    }
}

impl Method for ToolsParams {
    const NAME: &'static str = "session.tools";
    type Result = ToolsResult;
}

impl SessionMethod for ToolsParams {
    fn session_key(&self) -> Option<&SessionKey> {
        Some(&self.session_key)
    }
    async fn run(self, mut session: SessionContext<'_>) -> Result<ToolsResult, RpcError> {
        let tools = session.mirror()?.session_mut().tools().await?;
        Ok(ToolsResult { tools })
    }
}

impl Method for CallToolParams {
    const NAME: &'static str = "session.callTool";
    type Result = CallToolResult;
}

impl SessionMethod for CallToolParams {
    fn session_key(&self) -> Option<&SessionKey> {
        Some(&self.session_key)
    }
    async fn run(self, mut session: SessionContext<'_>) -> Result<CallToolResult, RpcError> {
        let output = (session.mirror()?.session_mut())
            .call_tool(&self.name, &self.arguments)
            .await?;
        Ok(CallToolResult {
            content: output.content,
            is_error: output.is_error,
        })
    }
}

impl Method for CloseParams {
    const NAME: &'static str = "session.close";
    type Result = CloseResult;
}

impl SessionMethod for CloseParams {
    fn session_key(&self) -> Option<&SessionKey> {
        Some(&self.session_key)
    }
    fn route(&self) -> Route {
        Route::Close
    }
    async fn run(self, session: SessionContext<'_>) -> Result<CloseResult, RpcError> {
        let Some(mirror) = session.slot.take() else {
            return Ok(CloseResult { closed: false });
        };
        mirror.close().await?;
        Ok(CloseResult { closed: true })
    }
}

impl Method for SyncParams {
    const NAME: &'static str = "session.sync";
    type Result = SyncState;

    fn check(&self) -> Result<(), RpcError> {
        let (each, last) = (
            self.fingerprints.as_deref(),
            self.last_fingerprint.as_deref(),
        );
        check_fingerprints(self.messages.len(), each, last)
    }
}

impl SessionMethod for SyncParams {
    fn session_key(&self) -> Option<&SessionKey> {
        Some(&self.session_key)
    }
    async fn run(self, mut session: SessionContext<'_>) -> Result<SyncState, RpcError> {
        // A reset replaces the history whatever it was; a tail must extend the mirror's.
        if let (Some(base), false) = (&self.base, self.reset) {
            check_base(session.mirror()?, base)?;
        }
        let mirror = (session.slot.take()).ok_or_else(|| RpcError::unknown_session(session.key))?;
        let fingerprints = Fingerprints {
            each: self.fingerprints,
            last: self.last_fingerprint,
        };
        let (host, messages) = (session.host, &self.messages);
        let (mirror, result) =
            (mirror.sync(host, self.from, messages, &fingerprints, self.reset)).await;
        *session.slot = mirror;
        result?;
        Ok((session.slot.as_ref()).map_or_else(Default::default, |m| m.state().clone()))
    }
}

impl Method for CommitTurnParams {
    const NAME: &'static str = "session.commitTurn";
    type Result = CommitTurnResult;

    fn check(&self) -> Result<(), RpcError> {
        let (each, last) = (
            self.fingerprints.as_deref(),
            self.last_fingerprint.as_deref(),
        );
        check_fingerprints(self.messages.len(), each, last)
    }
}

impl SessionMethod for CommitTurnParams {
    fn session_key(&self) -> Option<&SessionKey> {
        Some(&self.session_key)
    }
    async fn run(self, mut session: SessionContext<'_>) -> Result<CommitTurnResult, RpcError> {
        let mirror = session.mirror()?;
        // A commit already made answers `duplicate` whatever its base says now.
        if let Some(base) = &self.base
            && !mirror.is_committed(&self.advancement_key)
        {
            check_base(mirror, base)?;
        }
        let fingerprints = Fingerprints {
            each: self.fingerprints,
            last: self.last_fingerprint,
        };
        let status = (mirror.commit(&self.advancement_key, &self.messages, &fingerprints)).await?;
        Ok(CommitTurnResult {
            status,
            message_count: mirror.state().message_count,
        })
    }
}

impl Method for AssembleParams {
    const NAME: &'static str = "session.assemble";
    type Result = AssembleResult;
}

impl SessionMethod for AssembleParams {
    fn session_key(&self) -> Option<&SessionKey> {
        Some(&self.session_key)
    }
    async fn run(mut self, mut session: SessionContext<'_>) -> Result<AssembleResult, RpcError> {
        let (host, key, notify, health) =
            (session.host, session.key, session.notify, session.health);
        let mirror = session.mirror()?;
        let (last, chain) = (self.last_fingerprint.as_deref(), self.chain.as_deref());
        if !mirror.state().holds(self.message_count, last, chain) {
            return Ok(AssembleResult::Mismatch(mirror.state().clone()));
        }
        let request = self.turn_request();
        let started = std::time::Instant::now();
        let assembly = (mirror.assemble(self.token_budget, &request, &mut announce(notify))).await;
        let write = health.writes_ledger();
        let record = mirror.record_turn(host, assembly.as_ref(), started.elapsed(), write);
        health.record(key, &record);
        let assembly = assembly?;
        let compaction =
            (assembly.compaction.as_ref()).map(|outcome| compact_result(mirror, outcome));
        Ok(AssembleResult::Ok(Assembled {
            items: assembly.items,
            estimated_tokens: assembly.estimated_tokens,
            system_prompt_addition: assembly.system_prompt_addition,
            compaction,
        }))
    }
}

impl AssembleParams {
    /// The turn the session's driver runs: the tools and the call the runtime is about to make.
    fn turn_request(&mut self) -> TurnRequest {
        TurnRequest {
            available_tools: std::mem::take(&mut self.available_tools),
            pending: PendingCall {
                model: model_id(self.model.take()),
                prompt: prompt_text(self.prompt.take()),
            },
            agent_tokens: 0,
        }
    }
}

/// `notifyBeforeAuto`: the client hears of an automatic compaction before the assemble that
/// runs it answers.
fn announce(notify: &Notify) -> impl FnMut(&AutoCompaction) + Send + '_ {
    move |due: &AutoCompaction| {
        let pending = CompactionPending {
            session_key: due.session_key.clone(),
            trigger: CompactionTrigger::Auto,
            context_tokens: due.context_tokens,
            threshold: due.threshold,
            context_window: due.context_window,
            message: due.to_string(),
        };
        notify(CompactionPending::METHOD, answer(pending));
    }
}

impl Method for CompactParams {
    const NAME: &'static str = "session.compact";
    type Result = CompactResult;
}

impl SessionMethod for CompactParams {
    fn session_key(&self) -> Option<&SessionKey> {
        Some(&self.session_key)
    }
    async fn run(self, mut session: SessionContext<'_>) -> Result<CompactResult, RpcError> {
        let mirror = session.mirror()?;
        let token_budget = mirror.set_budget(self.token_budget);
        let options = CompactOptions {
            force: self.force,
            trigger: self.trigger.unwrap_or(CompactionTrigger::Manual),
            token_budget,
            custom_instructions: self.custom_instructions,
        };
        let outcome = mirror.session_mut().compact(&options).await?;
        Ok(compact_result(mirror, &outcome))
    }
}

impl Method for AfterTurnParams {
    const NAME: &'static str = "session.afterTurn";
    type Result = Done;
}

impl SessionMethod for AfterTurnParams {
    fn session_key(&self) -> Option<&SessionKey> {
        Some(&self.session_key)
    }
    async fn run(self, mut session: SessionContext<'_>) -> Result<Done, RpcError> {
        let options = ctxhost::AfterTurnOptions {
            pre_prompt_message_count: self.pre_prompt_message_count,
            auto_compaction_summary: self.auto_compaction_summary,
            is_heartbeat: self.is_heartbeat,
            token_budget: self.token_budget,
        };
        session.mirror()?.session_mut().after_turn(&options).await?;
        Ok(Done {})
    }
}

impl Method for PrepareSpawnParams {
    const NAME: &'static str = "subagent.prepareSpawn";
    type Result = PrepareSpawnResult;
}

impl SessionMethod for PrepareSpawnParams {
    fn session_key(&self) -> Option<&SessionKey> {
        Some(&self.session_key)
    }
    fn route(&self) -> Route {
        Route::Spawn(self.child_session_key.clone())
    }
    async fn run(self, mut session: SessionContext<'_>) -> Result<PrepareSpawnResult, RpcError> {
        let options = ctxhost::SpawnOptions {
            context_mode: self.context_mode,
            ttl_ms: self.ttl_ms,
        };
        let rollback_handle = (session.mirror()?.session_mut())
            .prepare_subagent_spawn(&self.child_session_key, &options)
            .await?;
        Ok(PrepareSpawnResult { rollback_handle })
    }
}

impl Method for RollbackParams {
    const NAME: &'static str = "subagent.rollback";
    type Result = Done;
}

impl SessionMethod for RollbackParams {
    fn session_key(&self) -> Option<&SessionKey> {
        Some(&self.session_key)
    }
    async fn run(self, mut session: SessionContext<'_>) -> Result<Done, RpcError> {
        (session.mirror()?.session_mut())
            .rollback_subagent_spawn(self.rollback_handle)
            .await?;
        Ok(Done {})
    }
}

impl Method for EndedParams {
    const NAME: &'static str = "subagent.ended";
    type Result = Done;
}

impl SessionMethod for EndedParams {
    fn session_key(&self) -> Option<&SessionKey> {
        self.session_key.as_ref()
    }
    fn route(&self) -> Route {
        Route::EndChild(self.child_session_key.clone())
    }
    async fn run(self, mut session: SessionContext<'_>) -> Result<Done, RpcError> {
        (session.mirror()?.session_mut())
            .on_subagent_ended(&self.child_session_key, self.reason)
            .await?;
        Ok(Done {})
    }
}

/// Refuses to extend a history other than the one the client says it extends.
fn check_base(mirror: &Mirror, base: &Base) -> Result<(), RpcError> {
    let (last, chain) = (base.last_fingerprint.as_deref(), base.chain.as_deref());
    if mirror.state().holds(base.message_count, last, chain) {
        return Ok(());
    }
    Err(base_mismatch(base, mirror.state()))
}

fn compact_result(mirror: &Mirror, outcome: &CompactOutcome) -> CompactResult {
    let first_kept_index =
        (outcome.first_kept_entry_id.as_deref()).and_then(|id| mirror.position_of(id));
    CompactResult {
        ok: true,
        compacted: outcome.compacted,
        reason: outcome.reason.clone(),
        tokens_before: outcome.tokens_before,
        tokens_after: outcome.tokens_after,
        first_kept_index,
    }
}
