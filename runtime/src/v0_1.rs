//! Contract `ctxhost:engine@0.1.0` (frozen, `wit/0.1.0`): its generated bindings stay in this
//! module, and everything leaving it is converted to or from ctxhost's own types
//! (`super::contract`). Fields 0.1 lacks arrive as `None` / empty; fields it lacks are dropped
//! on the way to the guest.

use wasmtime::Store;

use super::contract as d;
use super::state::StoreState;

mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit/0.1.0",
        world: "context-engine",
        imports: { default: async | trappable },
        exports: { default: async },
        anyhow: true,
    });
}

use bindings::ctxhost::engine::{host, types as g};

/// The contract version this module speaks.
pub(super) const VERSION: &str = "0.1.0";

/// Where the engine's exports are in a component, found once per engine.
pub(super) type Indices = bindings::ContextEngineIndices;

pub(super) fn add_to_linker(
    linker: &mut wasmtime::component::Linker<StoreState>,
) -> wasmtime::Result<()> {
    use wasmtime::component::HasSelf;
    bindings::ContextEngine::add_to_linker::<StoreState, HasSelf<StoreState>>(linker, |s| s)
}

pub(super) fn indices(
    pre: &wasmtime::component::InstancePre<StoreState>,
) -> wasmtime::Result<Indices> {
    bindings::ContextEngineIndices::new(pre)
}

super::convert_enum!(Role [User, Assistant, ToolResult, BashExecution, Custom, BranchSummary, CompactionSummary]);
super::convert_enum!(CompactionTrigger [Manual, Auto, Overflow]);
super::convert_enum!(ContextMode [Isolated, Fork]);
super::convert_enum!(SubagentEndReason [Deleted, Completed, Swept, Released]);

impl From<&d::Session> for g::Session {
    fn from(s: &d::Session) -> Self {
        Self {
            id: s.id.clone(),
            key: s.key.clone(),
        }
    }
}

impl From<g::Session> for d::Session {
    fn from(s: g::Session) -> Self {
        Self {
            id: s.id,
            key: s.key,
        }
    }
}

impl From<&d::ContextEntry> for g::ContextEntry {
    fn from(e: &d::ContextEntry) -> Self {
        Self {
            entry: e.entry,
            role: e.role.into(),
            tokens: e.tokens,
        }
    }
}

impl From<&d::Message> for g::Message {
    fn from(m: &d::Message) -> Self {
        Self {
            entry: m.entry,
            entry_id: m.entry_id.clone(),
            role: m.role.into(),
            timestamp: m.timestamp,
            text: m.text.clone(),
            tool_calls: m
                .tool_calls
                .iter()
                .map(|c| g::ToolCall {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                })
                .collect(),
            tool_name: m.tool_name.clone(),
            is_error: m.is_error,
            stop_reason: m.stop_reason.clone(),
            usage: m.usage.map(|u| g::Usage {
                input: u.input,
                output: u.output,
                cache_read: u.cache_read,
                cache_write: u.cache_write,
                total_tokens: u.total_tokens,
            }),
            tokens: m.tokens,
            json: m.json.clone(),
        }
    }
}

impl From<&d::CompactRequest> for g::CompactRequest {
    fn from(r: &d::CompactRequest) -> Self {
        Self {
            session: (&r.session).into(),
            session_file: r.session_file.clone(),
            force: r.force,
            token_budget: r.token_budget,
            current_tokens: r.current_tokens,
            custom_instructions: r.custom_instructions.clone(),
            trigger: r.trigger.into(),
        }
    }
}

impl From<g::CompactRequest> for d::CompactRequest {
    fn from(r: g::CompactRequest) -> Self {
        Self {
            session: r.session.into(),
            session_file: r.session_file,
            force: r.force,
            token_budget: r.token_budget,
            current_tokens: r.current_tokens,
            custom_instructions: r.custom_instructions,
            trigger: r.trigger.into(),
            context_window: None,
            assembled_tokens: None,
        }
    }
}

impl From<d::Compaction> for g::Compaction {
    fn from(c: d::Compaction) -> Self {
        Self {
            summary: c.summary,
            first_kept_entry: c.first_kept_entry,
            tokens_before: c.tokens_before,
            tokens_after: c.tokens_after,
            details: c.details,
            new_session_id: None,
            new_session_file: None,
        }
    }
}

/// 0.1's rotation fields were never acted on; they are dropped here, as the host always did.
impl From<g::Compaction> for d::Compaction {
    fn from(c: g::Compaction) -> Self {
        Self {
            summary: c.summary,
            first_kept_entry: c.first_kept_entry,
            tokens_before: c.tokens_before,
            tokens_after: c.tokens_after,
            details: c.details,
        }
    }
}

impl From<d::HostError> for g::HostError {
    fn from(e: d::HostError) -> Self {
        match e {
            d::HostError::PermissionDenied(m) => Self::PermissionDenied(m),
            d::HostError::InvalidArgument(m) => Self::InvalidArgument(m),
            d::HostError::Unavailable(m) => Self::Unavailable(m),
            d::HostError::Failed(m) => Self::Failed(m),
        }
    }
}

impl g::Host for StoreState {}

impl host::Host for StoreState {
    async fn log(&mut self, level: host::LogLevel, message: String) -> anyhow::Result<()> {
        let level = match level {
            host::LogLevel::Trace => d::LogLevel::Trace,
            host::LogLevel::Debug => d::LogLevel::Debug,
            host::LogLevel::Info => d::LogLevel::Info,
            host::LogLevel::Warn => d::LogLevel::Warn,
            host::LogLevel::Error => d::LogLevel::Error,
        };
        self.import_log(level, &message)
    }

    async fn estimate_tokens(&mut self, text: String) -> anyhow::Result<u32> {
        self.import_estimate_tokens(&text)
    }

    async fn context_entries(&mut self) -> anyhow::Result<Vec<g::ContextEntry>> {
        let context = self.import_context_entries(std::mem::size_of::<g::ContextEntry>())?;
        Ok(context.entries.iter().map(Into::into).collect())
    }

    async fn read_entries(
        &mut self,
        entries: Vec<d::EntryRef>,
    ) -> anyhow::Result<Result<Vec<g::Message>, g::HostError>> {
        Ok(self
            .import_read_entries(&entries)
            .await?
            .map(|messages| messages.iter().map(Into::into).collect())
            .map_err(Into::into))
    }

    async fn delegate_compaction(
        &mut self,
        request: g::CompactRequest,
    ) -> anyhow::Result<Result<Option<g::Compaction>, g::HostError>> {
        Ok(self
            .import_delegate_compaction(request.into())
            .await?
            .map(|c| c.map(Into::into))
            .map_err(Into::into))
    }

    async fn config(&mut self) -> anyhow::Result<String> {
        self.import_config()
    }

    async fn complete(
        &mut self,
        request: host::CompletionRequest,
    ) -> anyhow::Result<Result<String, g::HostError>> {
        let request = d::CompletionRequest {
            system: request.system,
            prompt: request.prompt,
            max_tokens: request.max_tokens,
        };
        Ok(self.import_complete(request).await?.map_err(Into::into))
    }
}

/// A 0.1 instance's exports, in ctxhost's terms.
pub(super) struct Engine(bindings::ContextEngine);

impl Engine {
    pub(super) fn load(
        indices: &Indices,
        store: &mut Store<StoreState>,
        instance: &wasmtime::component::Instance,
    ) -> wasmtime::Result<Self> {
        indices.load(store, instance).map(Self)
    }

    fn exports(&self) -> &bindings::exports::ctxhost::engine::engine::Guest {
        self.0.ctxhost_engine_engine()
    }

    pub(super) async fn info(
        &self,
        store: &mut Store<StoreState>,
    ) -> wasmtime::Result<d::EngineInfo> {
        let info = self.exports().call_info(store).await?;
        Ok(d::EngineInfo {
            id: info.id,
            name: info.name,
            version: info.version,
            owns_compaction: info.owns_compaction,
        })
    }

    pub(super) async fn bootstrap(
        &self,
        store: &mut Store<StoreState>,
        request: &d::BootstrapRequest,
    ) -> wasmtime::Result<Result<d::BootstrapResult, String>> {
        let request = g::BootstrapRequest {
            session: (&request.session).into(),
            session_file: request.session_file.clone(),
            entry_count: request.entry_count,
        };
        let result = self.exports().call_bootstrap(store, &request).await?;
        Ok(result.map(|r| d::BootstrapResult {
            bootstrapped: r.bootstrapped,
            imported_messages: r.imported_messages,
            reason: r.reason,
        }))
    }

    pub(super) async fn ingest(
        &self,
        store: &mut Store<StoreState>,
        session: &d::Session,
        message: &d::Message,
        is_heartbeat: bool,
    ) -> wasmtime::Result<Result<d::IngestResult, String>> {
        let result = self
            .exports()
            .call_ingest(store, &session.into(), &message.into(), is_heartbeat)
            .await?;
        Ok(result.map(|r| d::IngestResult {
            ingested: r.ingested,
        }))
    }

    pub(super) async fn ingest_batch(
        &self,
        store: &mut Store<StoreState>,
        session: &d::Session,
        messages: &[d::Message],
        is_heartbeat: bool,
    ) -> wasmtime::Result<Result<u32, String>> {
        let messages: Vec<g::Message> = messages.iter().map(Into::into).collect();
        self.exports()
            .call_ingest_batch(store, &session.into(), &messages, is_heartbeat)
            .await
    }

    pub(super) async fn assemble(
        &self,
        store: &mut Store<StoreState>,
        request: &d::AssembleRequest,
    ) -> wasmtime::Result<Result<d::AssembleResult, String>> {
        let request = g::AssembleRequest {
            session: (&request.session).into(),
            token_budget: request.token_budget,
            context_window: request.context_window,
            context_tokens: request.context_tokens,
            available_tools: request.available_tools.clone(),
            entries: request.context.entries.iter().map(Into::into).collect(),
        };
        let result = self.exports().call_assemble(store, &request).await?;
        Ok(result.map(|r| d::AssembleResult {
            items: r
                .items
                .into_iter()
                .map(|item| match item {
                    g::ContextItem::Keep(entry) => d::ContextItem::Keep(entry),
                    g::ContextItem::Insert(json) => d::ContextItem::Insert(json),
                })
                .collect(),
            estimated_tokens: r.estimated_tokens,
            system_prompt_addition: r.system_prompt_addition,
        }))
    }

    pub(super) async fn compact(
        &self,
        store: &mut Store<StoreState>,
        request: &d::CompactRequest,
    ) -> wasmtime::Result<Result<d::CompactResult, String>> {
        let result = self.exports().call_compact(store, &request.into()).await?;
        Ok(result.map(|r| d::CompactResult {
            ok: r.ok,
            compacted: r.compacted,
            reason: r.reason,
            compaction: r.compaction.map(Into::into),
        }))
    }

    pub(super) async fn after_turn(
        &self,
        store: &mut Store<StoreState>,
        request: &d::AfterTurnRequest,
    ) -> wasmtime::Result<Result<(), String>> {
        let request = g::AfterTurnRequest {
            session: (&request.session).into(),
            session_file: request.session_file.clone(),
            pre_prompt_message_count: request.pre_prompt_message_count,
            message_count: request.message_count,
            auto_compaction_summary: request.auto_compaction_summary.clone(),
            is_heartbeat: request.is_heartbeat,
            token_budget: request.token_budget,
        };
        self.exports().call_after_turn(store, &request).await
    }

    pub(super) async fn prepare_subagent_spawn(
        &self,
        store: &mut Store<StoreState>,
        spawn: &d::SubagentSpawn,
    ) -> wasmtime::Result<Result<Option<u64>, String>> {
        let spawn = g::SubagentSpawn {
            parent_session_key: spawn.parent_session_key.clone(),
            child_session_key: spawn.child_session_key.clone(),
            context_mode: spawn.context_mode.into(),
            ttl_ms: spawn.ttl_ms,
        };
        self.exports()
            .call_prepare_subagent_spawn(store, &spawn)
            .await
    }

    pub(super) async fn rollback_subagent_spawn(
        &self,
        store: &mut Store<StoreState>,
        handle: u64,
    ) -> wasmtime::Result<Result<(), String>> {
        self.exports()
            .call_rollback_subagent_spawn(store, handle)
            .await
    }

    pub(super) async fn on_subagent_ended(
        &self,
        store: &mut Store<StoreState>,
        child_session_key: &str,
        reason: d::SubagentEndReason,
    ) -> wasmtime::Result<Result<(), String>> {
        self.exports()
            .call_on_subagent_ended(store, child_session_key, reason.into())
            .await
    }

    pub(super) async fn dispose(
        &self,
        store: &mut Store<StoreState>,
        session: &d::Session,
    ) -> wasmtime::Result<Result<(), String>> {
        self.exports().call_dispose(store, &session.into()).await
    }
}
