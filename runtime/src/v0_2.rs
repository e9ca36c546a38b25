//! Contract `ctxhost:engine@0.2.0` (`wit/0.2.0`): its generated bindings stay in
//! this module, and everything leaving it is converted to or from ctxhost's own types
//! (`super::contract`), which follow this version field for field, except two shapes: the
//! context crosses as columns (`context`, built here from ctxhost's entries) and `keep-range`
//! is expanded here into the `keep`s it stands for.

use wasmtime::Store;

use super::contract as d;
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

super::lifecycle::shared_conversions!();

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

super::lifecycle::message_to_guest!(tool_call_id);

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
    super::lifecycle::shared_host_imports!();

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

impl Engine {
    super::lifecycle::shared_engine_calls!();

    pub(super) async fn assemble(
        &self,
        store: &mut Store<StoreState>,
        request: &d::AssembleRequest,
    ) -> wasmtime::Result<Result<d::AssembleResult, String>> {
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
        Ok(result.and_then(|r| {
            Ok(d::AssembleResult {
                items: items(&request.context.entries, r.items)?,
                estimated_tokens: r.estimated_tokens,
                system_prompt_addition: r.system_prompt_addition,
            })
        }))
    }
}

/// The plan in ctxhost's terms: each `keep-range` becomes the `keep`s of the request's entries
/// it spans, so validation and rendering see one shape whatever the version. A range whose ends
/// are not in the request, or run backwards, is the engine's error.
///
/// Bounded before it is expanded: every keep a range expands into is charged as it is
/// converted, and ranges keeping more entries than the request holds (so some entry twice,
/// which validation refuses anyway) stop there, so two million ranges over the whole request cost one range's worth of work,
/// not a copy of the request per range.
pub(super) fn items(
    request: &[d::ContextEntry],
    items: Vec<g::ContextItem>,
) -> Result<Vec<d::ContextItem>, String> {
    let mut out = Vec::with_capacity(items.len().min(request.len() + 64));
    let mut lookup = Lookup::new(request);
    let mut cursor = 0;
    let mut kept = 0usize;
    let mut charge = |n: usize| {
        kept += n;
        if kept > request.len() {
            return Err(format!(
                "the plan keeps more entries than the {} of the request: some entry twice",
                request.len()
            ));
        }
        Ok(())
    };
    for item in items {
        match item {
            // Single keeps are not expanded: validation judges them (an entry kept twice).
            g::ContextItem::Keep(entry) => out.push(d::ContextItem::Keep(entry)),
            g::ContextItem::Insert(json) => out.push(d::ContextItem::Insert(json)),
            g::ContextItem::KeepRange(g::KeepRange { first, last }) => {
                let outside = || {
                    format!("keep-range({first}, {last}) names an entry that is not in the request")
                };
                let from = lookup.position(first, cursor).ok_or_else(outside)?;
                // A range to the context's end (a pass-through, a kept tail) is found without
                // scanning up to it.
                let to = match request.last() {
                    Some(end) if end.entry == last && from < request.len() => request.len() - 1,
                    _ => lookup.position(last, from).ok_or_else(outside)?,
                };
                if to < from {
                    return Err(format!(
                        "keep-range({first}, {last}) runs backwards in the request's order"
                    ));
                }
                charge(to - from + 1)?;
                out.extend(
                    request[from..=to]
                        .iter()
                        .map(|e| d::ContextItem::Keep(e.entry)),
                );
                cursor = to + 1;
            }
        }
    }
    Ok(out)
}

/// Finds entries in the request. Plans go forward, so an entry is first looked for from where
/// the previous range ended: a pass-through is two comparisons, with no index built. Scanning
/// is charged, and past twice the request's length (a plan jumping back and forth) an index
/// is built once, so no plan costs more than linear work.
struct Lookup<'a> {
    request: &'a [d::ContextEntry],
    scanned: usize,
    index: Option<std::collections::HashMap<d::EntryRef, usize>>,
}

impl<'a> Lookup<'a> {
    fn new(request: &'a [d::ContextEntry]) -> Self {
        Self {
            request,
            scanned: 0,
            index: None,
        }
    }

    /// Where `entry` is in the request, looked for from `hint` on first.
    fn position(&mut self, entry: d::EntryRef, hint: usize) -> Option<usize> {
        if let Some(index) = &self.index {
            return index.get(&entry).copied();
        }
        let hint = hint.min(self.request.len());
        if self.scanned <= 2 * self.request.len() {
            let ahead = self.request[hint..].iter().position(|e| e.entry == entry);
            self.scanned += ahead.map_or(self.request.len() - hint, |i| i + 1);
            if let Some(i) = ahead {
                return Some(hint + i);
            }
        }
        let index = self.index.insert(
            self.request
                .iter()
                .enumerate()
                .map(|(i, e)| (e.entry, i))
                .collect(),
        );
        index.get(&entry).copied()
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

    #[test]
    fn keep_ranges_expand_in_request_order() {
        // A compaction summary (entry 9) comes first, then the kept entries.
        let request: Vec<_> = [9, 2, 3, 5, 7].into_iter().map(entry).collect();
        let plan = vec![
            g::ContextItem::KeepRange(g::KeepRange { first: 9, last: 3 }),
            g::ContextItem::Insert("{}".into()),
            g::ContextItem::KeepRange(g::KeepRange { first: 7, last: 7 }),
            g::ContextItem::Keep(5),
        ];
        let keep = d::ContextItem::Keep;
        assert_eq!(
            items(&request, plan).unwrap(),
            vec![
                keep(9),
                keep(2),
                keep(3),
                d::ContextItem::Insert("{}".into()),
                keep(7),
                keep(5),
            ]
        );
    }

    #[test]
    fn keep_ranges_outside_the_request_or_backwards_are_refused() {
        let request: Vec<_> = [1, 2, 3].into_iter().map(entry).collect();
        let range = |first, last| vec![g::ContextItem::KeepRange(g::KeepRange { first, last })];
        let err = items(&request, range(1, 4)).unwrap_err();
        assert!(err.contains("keep-range(1, 4)"), "{err}");
        let err = items(&request, range(3, 1)).unwrap_err();
        assert!(err.contains("backwards"), "{err}");
        assert!(items(&[], range(0, 0)).is_err());
        // A range may also come back to entries before the previous one.
        let back = vec![
            g::ContextItem::KeepRange(g::KeepRange { first: 3, last: 3 }),
            g::ContextItem::KeepRange(g::KeepRange { first: 1, last: 2 }),
        ];
        let keep = d::ContextItem::Keep;
        assert_eq!(
            items(&request, back).unwrap(),
            vec![keep(3), keep(1), keep(2)]
        );
        // Keeping more than the request holds is refused while converting (some entry twice).
        let twice = vec![
            g::ContextItem::KeepRange(g::KeepRange { first: 2, last: 3 }),
            g::ContextItem::KeepRange(g::KeepRange { first: 1, last: 2 }),
        ];
        let err = items(&request, twice).unwrap_err();
        assert!(err.contains("some entry twice"), "{err}");
    }

    #[test]
    fn a_plan_keeping_more_than_the_request_stops_before_expanding_it() {
        let request: Vec<_> = (0..1000).map(entry).collect();
        let whole = g::ContextItem::KeepRange(g::KeepRange {
            first: 0,
            last: 999,
        });
        let err = items(&request, vec![whole; 2_000_000]).unwrap_err();
        assert!(err.contains("more entries than the 1000"), "{err}");
    }

    #[test]
    fn ranges_jumping_back_and_forth_are_found_without_rescanning() {
        // Each range looks back before the previous one: the index takes over from scanning.
        let request: Vec<_> = (0..2000).map(entry).collect();
        let plan: Vec<_> = (0..1000)
            .map(|i| {
                let at = if i % 2 == 0 { 1999 - i / 2 } else { i / 2 };
                g::ContextItem::KeepRange(g::KeepRange {
                    first: at,
                    last: at,
                })
            })
            .collect();
        let kept = items(&request, plan).unwrap();
        assert_eq!(kept.len(), 1000);
        assert_eq!(kept[0], d::ContextItem::Keep(1999));
        assert_eq!(kept[1], d::ContextItem::Keep(0));
    }
}
