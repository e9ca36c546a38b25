//! Write a ctxhost context engine in Rust: implement one trait, call one macro.
//!
//! A context engine decides what the model sees on every turn. ctxhost runs it as a sandboxed
//! WebAssembly component (`wasm32-wasip2`) and calls it through the `ctxhost:engine` contract.
//! This crate hides the generated bindings: you implement [`ContextEngine`] (only
//! [`info`](ContextEngine::info) is required; every other hook has a sensible default) and export
//! it with [`export_engine!`].
//!
//! ```
//! use ctxhost_sdk::{AssembleRequest, AssembleResult, ContextEngine, EngineInfo, Plan, Result};
//! use ctxhost_sdk::{host, log};
//!
//! /// Keeps the newest `keep` entries of the context (config: `{"keep": 50}`).
//! #[derive(Default)]
//! struct LastN {
//!     keep: Option<usize>,
//! }
//!
//! impl ContextEngine for LastN {
//!     fn info() -> EngineInfo {
//!         EngineInfo::new("last-n", "Last N", env!("CARGO_PKG_VERSION"))
//!     }
//!
//!     fn assemble(&mut self, request: AssembleRequest) -> Result<AssembleResult> {
//!         // Read the configuration on first use: constructors must not call the host.
//!         let keep = *self
//!             .keep
//!             .get_or_insert_with(|| host::config()["keep"].as_u64().unwrap_or(50) as usize);
//!         let start = request.entries.len().saturating_sub(keep);
//!         let mut plan = Plan::with_capacity(keep + 1);
//!         if start > 0 {
//!             log::debug(format!("omitting {start} entries"));
//!             plan = plan.insert_custom("last-n", &format!("[{start} earlier messages omitted]"));
//!         }
//!         Ok(plan.keep_range(&request.entries[start..]).build())
//!     }
//! }
//!
//! ctxhost_sdk::export_engine!(LastN);
//! ```
//!
//! The engine's `Cargo.toml` needs `crate-type = ["cdylib"]` (or `["cdylib", "rlib"]` to
//! unit-test it natively) and `ctxhost-sdk` as its only dependency. Build it with
//! `cargo build --target wasm32-wasip2 --release`; the `.wasm` in
//! `target/wasm32-wasip2/release/` is the component ctxhost loads, named by the plugin's
//! `ctxhost.plugin.json`.
//!
//! What is here:
//! - [`ContextEngine`] and [`export_engine!`]: the engine and its export.
//! - [`Plan`], [`pass_through`], [`user_text_message`], [`custom_message`],
//!   [`tool_result_placeholder`]: answers to `assemble` (one `keep-range` item keeps a run of
//!   entries, so keeping everything costs one item, not one per entry).
//! - Helpers for what 0.2 carries: [`AssembleRequest::tool_results`] and
//!   [`AssembleRequest::tool_results_named`] (tool results by tool name, from the entries
//!   alone), [`AssembleRequest::budget`], [`AssembleRequest::model`] and
//!   [`AssembleRequest::prompt`]; [`Plan::keep_as_placeholder`] (a tool result's output
//!   replaced, its call still answered: the call id comes from [`host::tool_call_ids`]);
//!   [`CompactRequest::received_tokens`] and [`CompactRequest::window_share`] (what the model
//!   receives, against the window).
//! - [`Entries`]: the context as the host sent it (columns, copied flat across the boundary),
//!   seen as a slice of [`ContextEntry`] built on first use; [`Entries::refs`],
//!   [`Entries::tokens`] and [`Entries::total_tokens`] read the columns without building it.
//! - [`host`]: what the host provides (configuration, transcript reads, built-in compaction,
//!   completions); [`log`]: logging; [`estimate_tokens`]: the host's token estimate, locally.
//! - [`config`]: the engine's configuration as a type of its own (`serde::Deserialize`).
//! - [`testing`] (native builds only): a fake host and request constructors, so `cargo test`
//!   runs an engine's logic and its calls into the host without wasm.
//! - The contract's types ([`Message`], [`ContextEntry`], [`AssembleRequest`], …), re-exported,
//!   and [`serde_json`], so an engine needs no other dependency.
//!
//! The SDK speaks contract `ctxhost:engine@0.4.0` ([`CONTRACT_VERSION`]; `wit/0.4.0` in the
//! ctxhost repository, its changes in `wit/CHANGES.md`). ctxhost also runs engines built
//! against 0.1, 0.2 and 0.3. With 0.4 the host sends `assemble` only the context rows
//! appended since the engine's last call (the whole context after a compaction or a restart);
//! the SDK keeps the columns between calls and hands [`ContextEngine::assemble`] the whole
//! context as before, so a call costs what was appended. Cloning `request.entries` is cheap
//! (shared), but an engine that keeps a clone across calls makes the next append copy the
//! columns once.
//!
//! # Lifecycle
//!
//! One component instance serves one session. The engine value is created lazily with
//! [`Default::default`] on the first session-scoped call (never for [`info`](ContextEngine::info)),
//! lives as long as the instance, and is dropped after [`dispose`](ContextEngine::dispose)
//! (a later call starts again from `Default`). Keep constructors cheap and free of host calls.
//!
//! What each hook sees (each hook's documentation on [`ContextEngine`] says more):
//! - `bootstrap` first, with the transcript's entry count. A fresh instance of an existing
//!   session (after a restart, a fault or an idle eviction) is **not** re-fed the old messages
//!   through `ingest`: what it needs of them it reads from the entries `assemble` gets (role,
//!   tokens and the tool facts), from [`host::context_entries`], or whole with
//!   [`host::read_entries`].
//! - `ingest` / `ingest_batch` once per message appended after the instance started, with the
//!   decoded message (text, tool calls, tool name and call id, usage) and its JSON verbatim.
//! - `assemble` before each model call: the current context as [`ContextEntry`]s (reference,
//!   role, tokens, and for tool results the tool's name, call id, error flag and whether a
//!   compaction already pruned it), never the messages themselves; the window, the budget,
//!   the available tools, and the model and pending prompt when the runtime named them.
//! - `after_turn` after each turn; `compact` when the runtime or the operator asks, with the
//!   window and what this engine's last `assemble` said it sends; the subagent hooks around a
//!   subagent's life; `dispose` when the session closes.
//!
//! Errors returned from a hook are reported by the host, naming the engine, the function and
//! the session. A panic traps: the host fails that call and discards the instance.

// Lints here, not from the workspace table: `plugins new` vendors this crate outside it.
#![warn(missing_docs, unreachable_pub)]

#[doc(hidden)]
pub mod bindings;
mod config;
mod context;
mod engine;
mod error;
pub mod host;
pub mod log;
mod plan;
pub mod state_dir;
#[cfg(not(target_arch = "wasm32"))]
pub mod testing;
mod tokens;
mod tools;
mod types;
mod wit;

pub use config::config;
pub use context::{AssembleRequest, ContextEntry, Entries};
pub use engine::{ContextEngine, delegate_compact};
pub use error::{Error, Result};
pub use plan::{Plan, custom_message, pass_through, tool_result_placeholder, user_text_message};
/// The JSON library the SDK uses (re-exported so engines need no extra dependency).
pub use serde_json;
pub use tokens::estimate_tokens;
pub use tools::{ToolOutput, ToolSpec, Tools};

pub use wit::types::{
    AfterTurnRequest, AssembleResult, BootstrapRequest, BootstrapResult, CompactRequest,
    CompactResult, Compaction, CompactionTrigger, ContextItem, ContextMode, EngineInfo, EntryRef,
    HostError, IngestResult, KeepRange, Message, Role, Session, SubagentEndReason, SubagentSpawn,
    ToolCall, Usage,
};

/// The contract version this SDK builds engines for (`package ctxhost:engine@…` of its WIT).
pub const CONTRACT_VERSION: &str = "0.4.0";

impl EngineInfo {
    /// Engine metadata with `owns_compaction: false` (the runtime's compaction is the safety net).
    pub fn new(id: impl Into<String>, name: impl Into<String>, version: impl Into<String>) -> Self {
        EngineInfo {
            id: id.into(),
            name: name.into(),
            version: version.into(),
            owns_compaction: false,
        }
    }

    /// Declares whether the engine compacts by itself.
    pub fn owns_compaction(mut self, owns: bool) -> Self {
        self.owns_compaction = owns;
        self
    }
}

/// Exports a [`ContextEngine`] as the component's `ctxhost:engine/engine` implementation.
///
/// Call it once, at the top level of the engine's crate:
///
/// ```
/// # #[derive(Default)]
/// # struct MyEngine;
/// # impl ctxhost_sdk::ContextEngine for MyEngine {
/// #     fn info() -> ctxhost_sdk::EngineInfo { ctxhost_sdk::EngineInfo::new("my", "My", "0.1.0") }
/// # }
/// ctxhost_sdk::export_engine!(MyEngine);
/// ```
///
/// The engine type must implement [`ContextEngine`] (and so [`Default`]). The SDK keeps one
/// engine value per instance, created on first use; see the [crate docs](crate#lifecycle).
#[macro_export]
macro_rules! export_engine {
    ($engine:ty) => {
        const _: () = {
            // Only `Guest` uses it, and the export itself exists only in the wasm build (a
            // native cdylib cannot carry the component's export names).
            #[allow(dead_code)]
            struct __CtxhostExport;

            impl $crate::__private::Export for __CtxhostExport {
                type Engine = $engine;

                fn slot() -> &'static ::std::thread::LocalKey<$crate::__private::Slot<$engine>> {
                    ::std::thread_local! {
                        static SLOT: $crate::__private::Slot<$engine> =
                            const { $crate::__private::Slot::new() };
                    }
                    &SLOT
                }
            }

            #[cfg(target_arch = "wasm32")]
    $crate::__export_context_engine_impl!(__CtxhostExport with_types_in $crate::bindings);
        };
    };
}

#[doc(hidden)]
pub mod __private {
    pub use crate::engine::{Export, Slot};
}
