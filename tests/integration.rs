//! The host's integration tests, one module per subject: real guest components (bundled,
//! example, frozen-contract and SDK-built engines) run in the embedded host. One binary, so a
//! clean `cargo test` links wasmtime once for all of them (`hostile.rs` has a process of its own).

mod checkpoint;
mod context_assembly;
mod contract_versions;
mod engines;
mod foreign_engines;
mod incremental_context;
mod lossless;
mod recall;
mod serve_faults;
