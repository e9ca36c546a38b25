//! Contract `ctxhost:engine@0.1.0` (frozen, `wit/0.1.0`): its generated bindings stay in this
//! module, and everything leaving it is converted to or from ctxhost's own types
//! (`super::contract`). Fields 0.1 lacks arrive as `None` / empty; fields it lacks are dropped
//! on the way to the guest.

use wasmtime::Store;

use super::contract as d;
use super::plan;
use super::state::StoreState;

mod bindings {
    crate::lifecycle::contract_bindings!("../wit/0.1.0");
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

super::lifecycle::shared_conversions!(g, d);

impl From<&d::ContextEntry> for g::ContextEntry {
    fn from(e: &d::ContextEntry) -> Self {
        Self {
            entry: e.entry,
            role: e.role.into(),
            tokens: e.tokens,
        }
    }
}

super::lifecycle::message_to_guest!(g, d);

impl From<g::ContextItem> for plan::Item {
    fn from(item: g::ContextItem) -> Self {
        match item {
            g::ContextItem::Keep(entry) => Self::Keep(entry),
            g::ContextItem::Insert(json) => Self::Insert(json),
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

impl g::Host for StoreState {}

impl host::Host for StoreState {
    super::lifecycle::shared_host_imports!(host, g, d);

    async fn context_entries(&mut self) -> anyhow::Result<Vec<g::ContextEntry>> {
        let context = self.import_context_entries(std::mem::size_of::<g::ContextEntry>())?;
        Ok(context.entries.iter().map(Into::into).collect())
    }
}

/// A 0.1 instance's exports, in ctxhost's terms.
pub(super) struct Engine(bindings::ContextEngine);

super::lifecycle::engine_exports!(Engine, bindings, g, d);

impl Engine {
    pub(super) async fn assemble(
        &self,
        store: &mut Store<StoreState>,
        request: &d::AssembleRequest,
    ) -> wasmtime::Result<Result<plan::Answer, String>> {
        let request = g::AssembleRequest {
            session: (&request.session).into(),
            token_budget: request.token_budget,
            context_window: request.context_window,
            context_tokens: request.context_tokens,
            available_tools: request.available_tools.clone(),
            entries: request.context.entries.iter().map(Into::into).collect(),
        };
        let result = self.exports().call_assemble(store, &request).await?;
        Ok(result.map(|r| plan::Answer {
            items: r.items.into_iter().map(Into::into).collect(),
            estimated_tokens: r.estimated_tokens,
            system_prompt_addition: r.system_prompt_addition,
        }))
    }
}
