//! ctxhost runs LLM-agent context engines as sandboxed WebAssembly components.
//!
//! An agent runtime embeds it like this: build a [`Host`] from the operator's config, open a
//! [`Session`] by key or transcript path, then drive the lifecycle: [`Session::append`] each
//! message, [`Session::assemble`] before each model call, [`Session::compact`] when the
//! context passes its threshold, [`Session::close`] at the end.
//!
//! Modules depend one way: `cli → session → {runtime, transcript, config, plugins}`; the
//! `runtime` knows nothing about transcripts, and `ctxhost-transcript` nothing about wasm.

pub mod auto_compaction;
pub mod bundle;
pub mod config;
pub mod error;
mod host;
pub mod model;
pub mod plugins;
pub mod prompt;
pub mod replay;
pub mod runtime;
pub mod serve;
pub mod session;

pub use ctxhost_transcript as transcript;
pub use error::{Error, Result};
pub use host::{Host, SessionTarget, encode_key, session_file};
pub use session::{
    AssembleOptions, AssembledItem, Assembly, CompactOptions, CompactOutcome, Session,
};
