//! Contract `ctxhost:engine@0.4.0` (`wit/0.4.0`), the newest: 0.3's interfaces unchanged plus
//! the `incremental` export, an `assemble` sent only the rows appended since the engine's last
//! one. Only that interface is bound here; 0.2's types and host imports and 0.3's `recall` are
//! their own versions' bindings (`with`), and every other export is driven by `v0_2` / `v0_3`.
//!
//! The host side of the protocol lives here: each instance remembers what its engine holds
//! (the context's revision, its rows and tool names) after a planned answer, sends the rows
//! after those while the revision holds, and sends the whole context otherwise, or when the
//! engine answers `resend`.

use wasmtime::Store;
use wasmtime::component::{Instance, InstancePre};

use super::contract as d;
use super::state::StoreState;
use super::v0_2;
use super::v0_2::bindings::ctxhost::engine::types as g;

mod bindings {
    crate::lifecycle::contract_bindings!("../wit/0.4.0", with: {
        "ctxhost:engine/types@0.2.0": crate::v0_2::bindings::ctxhost::engine::types,
        "ctxhost:engine/host@0.2.0": crate::v0_2::bindings::ctxhost::engine::host,
        "ctxhost:engine/recall@0.3.0": crate::v0_3::bindings::ctxhost::engine0_3_0::recall,
    });
}

use bindings::exports::ctxhost::engine0_4_0::incremental;

/// The contract version this module speaks.
pub(super) const VERSION: &str = "0.4.0";

/// The export whose presence makes a component a 0.4 engine (beside 0.3's and 0.2's).
pub(super) const INCREMENTAL_EXPORT_PREFIX: &str = "ctxhost:engine/incremental@";

/// Where a 0.4 engine's `incremental` export is, found once per engine.
pub(super) struct IncrementalIndices(incremental::GuestIndices);

impl IncrementalIndices {
    pub(super) fn new(pre: &InstancePre<StoreState>) -> wasmtime::Result<Self> {
        incremental::GuestIndices::new(pre).map(Self)
    }

    pub(super) fn load(
        &self,
        store: &mut Store<StoreState>,
        instance: &Instance,
    ) -> wasmtime::Result<Incremental> {
        Ok(Incremental {
            guest: self.0.load(store, instance)?,
            held: None,
            positions: PositionIndex::default(),
        })
    }
}

/// What the engine holds after its last planned `assemble`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Held {
    revision: u64,
    rows: usize,
    tool_names: usize,
}

/// How the context goes to the engine on one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sending {
    Whole,
    /// The rows and tool names after these many.
    After {
        rows: usize,
        tool_names: usize,
    },
}

impl Sending {
    /// The cheapest change the engine can apply, given what it holds.
    fn for_request(held: Option<Held>, revision: u64, context: &d::Context) -> Self {
        match held {
            Some(h)
                if revision != 0
                    && h.revision == revision
                    && h.rows <= context.entries.len()
                    && h.tool_names <= context.tool_names.len() =>
            {
                Self::After {
                    rows: h.rows,
                    tool_names: h.tool_names,
                }
            }
            _ => Self::Whole,
        }
    }

    fn change(self, context: &d::Context) -> incremental::ContextChange {
        match self {
            Self::Whole => incremental::ContextChange::Whole(v0_2::columns(
                &context.entries,
                &context.tool_names,
            )),
            Self::After { rows, tool_names } => {
                incremental::ContextChange::Appended(incremental::Appended {
                    // Both bounded by the context's lengths, which a u32 reference counts.
                    rows: rows as u32,
                    tool_names: tool_names as u32,
                    added: v0_2::columns(
                        &context.entries[rows..],
                        &context.tool_names[tool_names..],
                    ),
                })
            }
        }
    }
}

/// A live 0.4 instance's `incremental` export, with what its engine holds.
pub(super) struct Incremental {
    guest: incremental::Guest,
    /// None until the engine planned over a context, and again while a call is under way (an
    /// engine that failed or trapped mid-call may hold anything: it is sent the whole next).
    held: Option<Held>,
    /// Where each entry of the requests' context is, kept while their revision holds.
    positions: PositionIndex,
}

impl Incremental {
    /// 0.2's `assemble`, with the context sent as the change since the engine's last call.
    pub(super) async fn assemble(
        &mut self,
        store: &mut Store<StoreState>,
        request: &d::AssembleRequest,
    ) -> wasmtime::Result<Result<d::AssembleResult, String>> {
        let context = &*request.context;
        let mut send = Sending::for_request(self.held.take(), request.context_revision, context);
        loop {
            let guest_request = incremental::AssembleRequest {
                session: (&request.session).into(),
                token_budget: request.token_budget,
                context_window: request.context_window,
                context_tokens: request.context_tokens,
                available_tools: request.available_tools.clone(),
                revision: request.context_revision,
                change: send.change(context),
                model: request.model.clone(),
                prompt: request.prompt.clone(),
            };
            let outcome = self
                .guest
                .call_assemble(&mut *store, &guest_request)
                .await?;
            match outcome {
                Err(message) => return Ok(Err(message)),
                Ok(incremental::AssembleOutcome::Resend) if send != Sending::Whole => {
                    send = Sending::Whole;
                }
                Ok(incremental::AssembleOutcome::Resend) => {
                    return Ok(Err(
                        "answered `resend` to the whole context, which always applies".into(),
                    ));
                }
                Ok(incremental::AssembleOutcome::Planned(result)) => {
                    self.held = Some(Held {
                        revision: request.context_revision,
                        rows: context.entries.len(),
                        tool_names: context.tool_names.len(),
                    });
                    let items =
                        self.positions
                            .items(context, request.context_revision, result.items);
                    return Ok(items.map(|items| d::AssembleResult {
                        items,
                        estimated_tokens: result.estimated_tokens,
                        system_prompt_addition: result.system_prompt_addition,
                    }));
                }
            }
        }
    }
}

/// Where each entry of a context is (its position, by entry reference), for turning a plan's
/// `keep-range` ends into positions without scanning. Contexts only grow at their end while
/// their revision holds, so the index is extended by the rows appended since, and rebuilt for
/// another revision (or an unknown one, 0). Every position it gives is checked against the
/// context, so a stale index can miss an entry (it is rebuilt then) but never misplace one.
#[derive(Default)]
struct PositionIndex {
    revision: u64,
    /// Rows of the context indexed.
    rows: usize,
    /// Per entry reference, 1 + its position; 0 for entries not in the context.
    by_entry: Vec<u32>,
}

impl PositionIndex {
    /// Brings the index level with `context` (of `revision`).
    fn update(&mut self, context: &d::Context, revision: u64) {
        let entries = &context.entries;
        if revision == 0 || revision != self.revision || self.rows > entries.len() {
            self.by_entry.clear();
            self.rows = 0;
            self.revision = revision;
        }
        for (position, row) in entries.iter().enumerate().skip(self.rows) {
            let slot = row.entry as usize;
            if self.by_entry.len() <= slot {
                self.by_entry.resize(slot + 1, 0);
            }
            // Positions are bounded by the context's length, which a u32 reference counts.
            self.by_entry[slot] = position as u32 + 1;
        }
        self.rows = entries.len();
    }

    /// Where `entry` is in `context`, when it is there.
    fn position(
        &mut self,
        context: &d::Context,
        revision: u64,
        entry: d::EntryRef,
    ) -> Option<usize> {
        let found = |index: &Self| {
            let position = index.by_entry.get(entry as usize)?.checked_sub(1)? as usize;
            (context.entries.get(position)?.entry == entry).then_some(position)
        };
        found(self).or_else(|| {
            self.update(context, revision);
            found(self)
        })
    }

    /// A 0.4 plan in the host's terms: what `v0_2::items` makes of it, except that a
    /// `keep-range` stays one item, its ends found by position (a pass-through and a kept tail
    /// without looking anything up). Single keeps are left to the host's validation, which
    /// names the entry when it is not in the context.
    fn items(
        &mut self,
        context: &d::Context,
        revision: u64,
        items: Vec<g::ContextItem>,
    ) -> Result<Vec<d::ContextItem>, String> {
        let request = &context.entries;
        let mut out = Vec::with_capacity(items.len().min(request.len() + 64));
        let mut cursor = 0;
        let mut kept = 0usize;
        for item in items {
            let (first, last) = match item {
                g::ContextItem::KeepRange(g::KeepRange { first, last }) => (first, last),
                g::ContextItem::Keep(entry) => {
                    out.push(d::ContextItem::Keep(entry));
                    continue;
                }
                g::ContextItem::Insert(json) => {
                    out.push(d::ContextItem::Insert(json));
                    continue;
                }
            };
            let outside =
                || format!("keep-range({first}, {last}) names an entry that is not in the request");
            let from = match request.get(cursor) {
                Some(row) if row.entry == first => cursor,
                _ => self
                    .position(context, revision, first)
                    .ok_or_else(outside)?,
            };
            let to = match request.last() {
                Some(end) if end.entry == last => request.len() - 1,
                _ => self.position(context, revision, last).ok_or_else(outside)?,
            };
            if to < from {
                return Err(format!(
                    "keep-range({first}, {last}) runs backwards in the request's order"
                ));
            }
            kept += to - from + 1;
            if kept > request.len() {
                return Err(format!(
                    "the plan keeps more entries than the {} of the request: some entry twice",
                    request.len()
                ));
            }
            // Both below the context's length, which a u32 reference counts.
            out.push(d::ContextItem::KeepPositions {
                first: from as u32,
                last: to as u32,
            });
            cursor = to + 1;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(rows: u32, names: &[&str]) -> d::Context {
        d::Context {
            entries: (0..rows)
                .map(|entry| d::ContextEntry {
                    entry,
                    role: d::Role::User,
                    tokens: 1,
                    tool: 0,
                    is_error: false,
                    pruned: false,
                })
                .collect(),
            tool_names: names.iter().map(|n| n.to_string()).collect(),
        }
    }

    #[test]
    fn keep_ranges_become_positions_as_v0_2_would_expand_them() {
        let mut now = context(5, &[]);
        // A compaction summary (entry 9) first, as after a compaction.
        now.entries[0].entry = 9;
        let range = |first, last| g::ContextItem::KeepRange(g::KeepRange { first, last });
        let plan = vec![
            range(9, 1),
            g::ContextItem::Insert("{}".into()),
            g::ContextItem::Keep(2),
            range(3, 4),
        ];
        for revision in [0, 7] {
            let mut index = PositionIndex::default();
            let items = index.items(&now, revision, plan.clone()).unwrap();
            let expanded = v0_2::items(&now.entries, plan.clone()).unwrap();
            let positions = |first, last| d::ContextItem::KeepPositions { first, last };
            assert_eq!(
                items,
                [
                    positions(0, 1),
                    d::ContextItem::Insert("{}".into()),
                    d::ContextItem::Keep(2),
                    positions(3, 4),
                ]
            );
            assert_eq!(expanded.len(), 6, "{expanded:?}");
        }
        // The same refusals as v0_2's, with the same words.
        let mut index = PositionIndex::default();
        for bad in [
            vec![range(3, 1)],
            vec![range(1, 77)],
            vec![range(1, 4), range(2, 4)],
        ] {
            let ours = index.items(&now, 7, bad.clone()).unwrap_err();
            let theirs = v0_2::items(&now.entries, bad).unwrap_err();
            assert_eq!(ours, theirs);
        }
        // Rows appended under the same revision are found; another revision rebuilds.
        now.entries.push(d::ContextEntry {
            entry: 12,
            ..now.entries[1]
        });
        assert_eq!(index.position(&now, 7, 12), Some(5));
        now.entries.remove(1);
        assert_eq!(index.position(&now, 8, 12), Some(4));
        assert_eq!(index.position(&now, 8, 1), None);
    }

    #[test]
    fn only_a_held_revision_that_the_context_extends_gets_the_rows_after_it() {
        let now = context(5, &["read", "bash"]);
        let held = |revision, rows, tool_names| {
            Some(Held {
                revision,
                rows,
                tool_names,
            })
        };
        assert_eq!(
            Sending::for_request(held(7, 3, 1), 7, &now),
            Sending::After {
                rows: 3,
                tool_names: 1
            }
        );
        // Nothing held (a fresh instance), another revision, or more than the context has.
        assert_eq!(Sending::for_request(None, 7, &now), Sending::Whole);
        assert_eq!(Sending::for_request(held(6, 3, 1), 7, &now), Sending::Whole);
        assert_eq!(Sending::for_request(held(7, 6, 1), 7, &now), Sending::Whole);
        assert_eq!(Sending::for_request(held(7, 3, 3), 7, &now), Sending::Whole);
        // An unknown revision is never taken for a held one.
        assert_eq!(Sending::for_request(held(0, 3, 1), 0, &now), Sending::Whole);

        let incremental::ContextChange::Appended(appended) = Sending::After {
            rows: 3,
            tool_names: 1,
        }
        .change(&now) else {
            panic!("rows after a held revision go as appended");
        };
        assert_eq!((appended.rows, appended.tool_names), (3, 1));
        assert_eq!(appended.added.entries, [3, 4]);
        assert_eq!(appended.added.tool_names, ["bash"]);
    }
}
