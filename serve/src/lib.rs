//! `ctxhost serve`: a sidecar that lets an agent runtime in any language drive sessions over
//! newline-delimited JSON-RPC 2.0 (stdio or a unix socket). The protocol is written down in
//! `docs/serve-protocol.md`.
//!
//! Each open session is an actor: a task that owns its `Mirror` and runs that session's
//! requests one after another in the order they were read, so requests for different
//! sessions run concurrently and requests for one session in order. Only the recently used
//! sessions hold an engine instance and descriptors (`residency`): any number stay open.

mod actor;
mod checks;
mod health;
mod lock;
mod methods;
mod mirror;
mod output;
mod protocol;
mod residency;
mod rpc;
mod schema;
mod scratch;
mod server;
mod sessions;
mod status;
mod stdio;
mod sync;

pub use checks::PROTOCOL_VERSION;
pub use output::Notify;
pub use schema::{REGENERATE as REGENERATE_SCHEMA, protocol_schema, protocol_schema_text};
pub use server::{ServeOptions, Server};

/// The instance pool a server needs, at most `most` slots: one for every session the
/// process's descriptor limit lets hold an instance at once (at 5 descriptors a session after
/// a reserve), and the two engine loads borrow. `ulimit -n` 1024 gives about 180.
pub fn pool_slots(most: u32) -> u32 {
    residency::pool_slots(most)
}

/// Raises the process's soft descriptor limit, up to its hard limit, so that sessions can hold
/// all of an instance pool of `slots` at once (`ctxhost serve --max-instances`); returns the
/// soft limit then in force, None when unlimited. A limit the system will not raise stays.
pub fn raise_descriptor_limit_for(slots: u32) -> Option<u64> {
    residency::raise_descriptor_limit_for(slots)
}
