//! Errors of the runtime: loading a component, and calling an engine.

use std::fmt;

use super::limits::Function;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("{origin}: not a WebAssembly file (no `\\0asm` header)")]
    NotWasm { origin: String },
    #[error(
        "{origin}: a core WebAssembly module, not a component; build the engine for `wasm32-wasip2` (cargo build --target wasm32-wasip2 --release)"
    )]
    CoreModule { origin: String },
    /// wasmtime's reasons are the source (an error-chain printer such as anyhow's `{:#}` shows
    /// them after the message).
    #[error("{origin}: cannot compile the component")]
    Compile {
        origin: String,
        #[source]
        cause: wasmtime::Error,
    },
    #[error(
        "{origin}: not a ctxhost context engine: it does not export `ctxhost:engine/engine` (exports: {exports})"
    )]
    NotAnEngine { origin: String, exports: String },
    #[error(
        "{origin}: built against contract ctxhost:engine@{found}, which this host does not support (supported: {supported})"
    )]
    UnsupportedContract {
        origin: String,
        found: String,
        supported: String,
    },
    #[error("{origin}: cannot link the component")]
    Link {
        origin: String,
        #[source]
        cause: wasmtime::Error,
    },
    #[error("engine `{engine}`: cannot create its state dir {path}: {source}")]
    StateDir {
        engine: String,
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("cannot create the wasm engine")]
    WasmEngine {
        #[source]
        cause: wasmtime::Error,
    },
    #[error(transparent)]
    Call(#[from] EngineError),
}

/// Why a guest call trapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// The call ran past its deadline.
    Deadline,
    /// The guest needed more linear memory than its limit allows.
    OutOfMemory,
    StackOverflow,
    /// The guest panicked or reached `unreachable`.
    Panic,
    /// A host-enforced limit ended the call (import budgets, wall time, disk quota); the
    /// detail names the limit.
    Limit,
    /// Another trap (e.g. out-of-bounds access, division by zero).
    Trap,
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Deadline => "deadline exceeded",
            Self::OutOfMemory => "out of memory",
            Self::StackOverflow => "stack overflow",
            Self::Panic => "panic",
            Self::Limit => "limit exceeded",
            Self::Trap => "trap",
        })
    }
}

/// A call into an engine that did not produce a usable result.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The guest trapped; its instance is discarded.
    #[error("engine `{engine}` faulted in `{function}` (session `{session}`): {kind}: {detail}")]
    Fault {
        engine: String,
        function: Function,
        session: String,
        kind: FaultKind,
        detail: String,
    },
    /// The guest returned `err(message)`.
    #[error("engine `{engine}` failed in `{function}` (session `{session}`): {message}")]
    Failed {
        engine: String,
        function: Function,
        session: String,
        message: String,
    },
    /// The engine faulted too often in a row and is refused until the operator resets it.
    #[error(
        "engine `{engine}` is refused ({faults} faults in a row; reset it or restart the process); call `{function}` for session `{session}` not made. Last fault: {last_fault}"
    )]
    CircuitOpen {
        engine: String,
        function: Function,
        session: String,
        faults: u32,
        last_fault: String,
    },
    /// The guest returned something the host refuses to apply.
    #[error(
        "engine `{engine}` returned an invalid result from `{function}` (session `{session}`): {problem}"
    )]
    InvalidOutput {
        engine: String,
        function: Function,
        session: String,
        problem: String,
    },
}

impl EngineError {
    pub fn fault_kind(&self) -> Option<FaultKind> {
        match self {
            Self::Fault { kind, .. } => Some(*kind),
            _ => None,
        }
    }

    /// True when the instance that produced this error must not be used again.
    pub fn discards_instance(&self) -> bool {
        matches!(self, Self::Fault { .. })
    }
}

/// The trap a host import or the host's filesystem layer raises when the guest reaches one of
/// its host-side limits; the message names the limit and its config key.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct LimitExceeded {
    pub message: String,
}

impl LimitExceeded {
    pub fn new(message: String) -> Self {
        Self { message }
    }
}
