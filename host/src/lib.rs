//! ctxhost runs LLM-agent context engines as sandboxed WebAssembly components.
//!
//! An agent runtime embeds it like this: build a [`Host`] from the operator's config, open a
//! [`Session`] by key or transcript path, then drive the lifecycle: [`Session::append`] each
//! message, [`Session::assemble`] before each model call, [`Session::compact`] when the
//! context passes its threshold, [`Session::close`] at the end.
//!
//! Modules depend one way, each only on those listed after it:
//! - `replay`: drives sessions (the JSON-RPC sidecar, `ctxhost-serve`, drives them from outside);
//! - `host`: the config, the engines it can serve and sessions on them;
//! - `session`: a transcript and the engine instance serving it, the turn driver, and the agent
//!   tools it offers (the host's recall tools over `ctxhost-recall`'s index, and the engine's own);
//! - `auto_compaction` (whether one is due and its notice) and `session_file` (a key's file);
//! - `prompt`, then `config`, then `model` (the summarizer's and `complete`'s model client);
//! - [`runtime`], the `ctxhost-runtime` crate (wasm, the contract versions, the sandbox),
//!   re-exported under that name.
//!
//! Beside them: `error` gathers the errors of `config`, `plugins` and `runtime` (and defines
//! `ContextOverflow`), used by every layer from `session` up; `bundle` (a session's context as a
//! portable file) uses only the transcript crate; `plugins` (the registry and its packages) sits
//! below `host`, and `plugin_ops` above it: the operations on a `Host` (`install`,
//! `uninstall`, ...). `timestamp` (the host's clock as RFC 3339) serves any layer. The binary
//! (`ctxhost-cli`) uses the library only, and `ctxhost-transcript` knows nothing about wasm.

#![warn(missing_docs)]

pub mod auto_compaction;
pub mod bundle;
pub mod config;
pub mod error;
mod host;
pub mod ledger;
pub mod model;
pub mod plugin_ops;
pub mod plugins;
pub mod prompt;
pub mod replay;
pub mod session;
mod session_file;
pub mod timestamp;

pub use ctxhost_recall as recall;
pub use ctxhost_runtime as runtime;
pub use ctxhost_transcript as transcript;
pub use error::{Error, Result};
pub use host::{Host, SessionOptions, SessionTarget};
pub use session::{
    AfterTurnOptions, AgentTool, AssembleOptions, AssembledItem, Assembly, CompactOptions,
    CompactOutcome, Prefix, RequestDigest, Session, SpawnOptions, ToolOutput, ToolSource, Turn,
    TurnCompaction, TurnRequest,
};
pub use session_file::{encode_key, new_transcript, session_file};
