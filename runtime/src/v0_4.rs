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
use super::plan;
use super::state::StoreState;
use super::v0_2;

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
}

impl Incremental {
    /// 0.2's `assemble`, with the context sent as the change since the engine's last call.
    pub(super) async fn assemble(
        &mut self,
        store: &mut Store<StoreState>,
        request: &d::AssembleRequest,
    ) -> wasmtime::Result<Result<plan::Answer, String>> {
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
                    return Ok(Ok(result.into()));
                }
            }
        }
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
