//! Contract `ctxhost:engine@0.2.0` (`wit/0.2.0`): its generated bindings stay in
//! this module, and everything leaving it is converted to or from ctxhost's own types
//! (`super::contract`), which follow this version field for field, except two shapes: the
//! context crosses as columns (`context`, built here from ctxhost's entries) and the plan is
//! handed as answered to the runtime's one reading of plans (`plan`).

use wasmtime::Store;

use super::contract as d;
use super::plan;
use super::state::StoreState;

/// Shared with 0.3, which includes 0.2's interfaces unchanged.
pub(super) mod bindings {
    crate::lifecycle::contract_bindings!("../wit/0.2.0");
}

use bindings::ctxhost::engine::{host, types as g};

/// The contract version this module speaks.
pub(super) const VERSION: &str = "0.2.0";

/// Where the engine's exports are in a component, found once per engine.
pub(super) type Indices = bindings::ContextEngineIndices;

/// Bytes of one entry in the context's columns (reference, role, tokens, tool, flags).
const COLUMN_ROW_BYTES: usize = 4 + 1 + 4 + 4 + 1;

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

/// ctxhost's context as the contract's columns: one tight loop per column, the tool names
/// as they are (the host's context already stores each once).
fn context(context: &d::Context) -> g::Context {
    columns(&context.entries, &context.tool_names)
}

/// These entries as the contract's columns, with these tool names (0.4 sends a context's
/// appended rows and the names added since the same way).
pub(super) fn columns(entries: &[d::ContextEntry], tool_names: &[String]) -> g::Context {
    g::Context {
        entries: entries.iter().map(|e| e.entry).collect(),
        roles: entries.iter().map(|e| role_code(e.role)).collect(),
        tokens: entries.iter().map(|e| e.tokens).collect(),
        tools: entries.iter().map(|e| e.tool).collect(),
        flags: entries
            .iter()
            .map(|e| (u8::from(e.is_error) * IS_ERROR) | (u8::from(e.pruned) * PRUNED))
            .collect(),
        tool_names: tool_names.to_vec(),
    }
}

/// `context.flags` bits.
const IS_ERROR: u8 = 1;
const PRUNED: u8 = 2;

/// `context.roles` codes: the position of the role's case in the WIT enum.
fn role_code(role: d::Role) -> u8 {
    match role {
        d::Role::User => 0,
        d::Role::Assistant => 1,
        d::Role::ToolResult => 2,
        d::Role::BashExecution => 3,
        d::Role::Custom => 4,
        d::Role::BranchSummary => 5,
        d::Role::CompactionSummary => 6,
    }
}

super::lifecycle::message_to_guest!(g, d, tool_call_id);

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
            // Sessions always know their window; 0 only for a request a 0.1 guest built.
            context_window: r.context_window.unwrap_or(0),
            assembled_tokens: r.assembled_tokens,
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
            context_window: Some(r.context_window),
            assembled_tokens: r.assembled_tokens,
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
        }
    }
}

impl g::Host for StoreState {}

impl host::Host for StoreState {
    super::lifecycle::shared_host_imports!(host, g, d);

    async fn context_entries(&mut self) -> anyhow::Result<g::Context> {
        // Charged per entry as one row of the columns (reference, role, tokens, tool, flags).
        let host_context = self.import_context_entries(COLUMN_ROW_BYTES)?;
        Ok(context(&host_context))
    }

    async fn tool_call_ids(
        &mut self,
        entries: Vec<d::EntryRef>,
    ) -> anyhow::Result<Result<Vec<Option<String>>, g::HostError>> {
        Ok(self.import_tool_call_ids(&entries)?.map_err(Into::into))
    }
}

/// A 0.2 instance's exports, in ctxhost's terms.
pub(super) struct Engine(bindings::ContextEngine);

super::lifecycle::engine_exports!(Engine, bindings, g, d);

impl Engine {
    pub(super) async fn assemble(
        &self,
        store: &mut Store<StoreState>,
        request: &d::AssembleRequest,
    ) -> wasmtime::Result<Result<plan::Answer, String>> {
        let guest_request = g::AssembleRequest {
            session: (&request.session).into(),
            token_budget: request.token_budget,
            context_window: request.context_window,
            context_tokens: request.context_tokens,
            available_tools: request.available_tools.clone(),
            context: context(&request.context),
            model: request.model.clone(),
            prompt: request.prompt.clone(),
        };
        let result = self.exports().call_assemble(store, &guest_request).await?;
        Ok(result.map(Into::into))
    }
}

/// The plan as answered, for the runtime to read (shared with 0.4, whose `incremental`
/// export answers 0.2's plan).
impl From<g::AssembleResult> for plan::Answer {
    fn from(r: g::AssembleResult) -> Self {
        Self {
            items: r.items.into_iter().map(Into::into).collect(),
            estimated_tokens: r.estimated_tokens,
            system_prompt_addition: r.system_prompt_addition,
        }
    }
}

impl From<g::ContextItem> for plan::Item {
    fn from(item: g::ContextItem) -> Self {
        match item {
            g::ContextItem::Keep(entry) => Self::Keep(entry),
            g::ContextItem::KeepRange(g::KeepRange { first, last }) => {
                Self::KeepRange { first, last }
            }
            g::ContextItem::Insert(json) => Self::Insert(json),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(entry: d::EntryRef) -> d::ContextEntry {
        d::ContextEntry {
            entry,
            role: d::Role::User,
            tokens: 1,
            tool: 0,
            is_error: false,
            pruned: false,
        }
    }

    #[test]
    fn the_context_crosses_as_columns() {
        let tool = |entry, tool, is_error, pruned| d::ContextEntry {
            role: d::Role::ToolResult,
            tool,
            is_error,
            pruned,
            ..self::entry(entry)
        };
        let request = d::Context {
            entries: vec![
                entry(9),
                tool(10, 1, false, true),
                tool(11, 2, true, false),
                tool(12, 1, false, false),
            ],
            tool_names: vec!["read".into(), "bash".into()],
        };
        let columns = context(&request);
        assert_eq!(columns.entries, [9, 10, 11, 12]);
        assert_eq!(columns.tokens, [1, 1, 1, 1]);
        assert_eq!(columns.tool_names, ["read", "bash"]);
        assert_eq!(columns.tools, [0, 1, 2, 1]);
        assert_eq!(columns.flags, [0, PRUNED, IS_ERROR, 0]);
        assert_eq!(columns.roles, [0, 2, 2, 2]);
        // The codes follow the WIT enum's order.
        let all = [
            (d::Role::User, g::Role::User),
            (d::Role::Assistant, g::Role::Assistant),
            (d::Role::ToolResult, g::Role::ToolResult),
            (d::Role::BashExecution, g::Role::BashExecution),
            (d::Role::Custom, g::Role::Custom),
            (d::Role::BranchSummary, g::Role::BranchSummary),
            (d::Role::CompactionSummary, g::Role::CompactionSummary),
        ];
        for (code, (ours, theirs)) in all.into_iter().enumerate() {
            assert_eq!(role_code(ours), code as u8, "{theirs:?}");
        }
    }
}
