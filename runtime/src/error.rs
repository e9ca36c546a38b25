//! Errors of the runtime: loading a component, and calling an engine.

use std::fmt;

use super::limits::Function;

/// Why a component cannot be loaded as an engine, or an engine call failed.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The file is not WebAssembly.
    #[error("{origin}: not a WebAssembly file (no `\\0asm` header)")]
    NotWasm {
        /// Where the bytes came from (a path, or `bundled:<id>`).
        origin: String,
    },
    /// The file is a core module, not a component.
    #[error(
        "{origin}: a core WebAssembly module, not a component; build the engine for `wasm32-wasip2` (cargo build --target wasm32-wasip2 --release)"
    )]
    CoreModule {
        /// Where the bytes came from.
        origin: String,
    },
    /// wasmtime's reasons are the source (an error-chain printer such as anyhow's `{:#}` shows
    /// them after the message).
    #[error("{origin}: cannot compile the component")]
    Compile {
        /// Where the bytes came from.
        origin: String,
        /// wasmtime's reasons.
        #[source]
        cause: wasmtime::Error,
    },
    /// The component does not export the engine interface.
    #[error(
        "{origin}: not a ctxhost context engine: it does not export `ctxhost:engine/engine` (exports: {exports})"
    )]
    NotAnEngine {
        /// Where the bytes came from.
        origin: String,
        /// The interfaces it does export, comma-separated.
        exports: String,
    },
    /// The component implements a contract version this host does not run.
    #[error(
        "{origin}: built against contract ctxhost:engine@{found}, which this host does not support (supported: {supported})"
    )]
    UnsupportedContract {
        /// Where the bytes came from.
        origin: String,
        /// The contract version it was built against.
        found: String,
        /// The versions this host runs ([`crate::SUPPORTED_CONTRACTS`]), comma-separated.
        supported: String,
    },
    /// The component's imports cannot be satisfied by the host.
    #[error("{origin}: cannot link the component")]
    Link {
        /// Where the bytes came from.
        origin: String,
        /// wasmtime's reasons.
        #[source]
        cause: wasmtime::Error,
    },
    /// The engine's state directory cannot be created.
    #[error("engine `{engine}`: cannot create its state dir {path}: {source}")]
    StateDir {
        /// The engine's id.
        engine: String,
        /// The directory.
        path: std::path::PathBuf,
        /// Why creating it failed.
        source: std::io::Error,
    },
    /// wasmtime refused the host's engine configuration.
    #[error("cannot create the wasm engine")]
    WasmEngine {
        /// wasmtime's reasons.
        #[source]
        cause: wasmtime::Error,
    },
    /// Instantiating the engine or its `info` call failed while loading it.
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
    /// The guest exhausted its stack.
    StackOverflow,
    /// The guest panicked or reached `unreachable`.
    Panic,
    /// A host-enforced limit ended the call (import budgets, wall time, disk quota); the
    /// detail names the limit.
    Limit,
    /// Another trap (e.g. out-of-bounds access, division by zero).
    Trap,
    /// The host could not give the engine an instance (every instance slot of the pool in
    /// use, no file descriptor left for its state dir): nothing the engine did, so it never
    /// counts toward the engine's circuit breaker.
    HostResources,
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
            Self::HostResources => "host out of resources",
        })
    }
}

/// A call into an engine that did not produce a usable result.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The guest trapped; its instance is discarded.
    #[error("engine `{engine}` faulted in `{function}` (session `{session}`): {kind}: {detail}")]
    Fault {
        /// The engine's id.
        engine: String,
        /// The exported function that was called.
        function: Function,
        /// The session's key.
        session: String,
        /// What kind of trap it was.
        kind: FaultKind,
        /// The trap's details (the limit and its config key, for [`FaultKind::Limit`]).
        detail: String,
    },
    /// The guest returned `err(message)`.
    #[error("engine `{engine}` failed in `{function}` (session `{session}`): {message}")]
    Failed {
        /// The engine's id.
        engine: String,
        /// The exported function that was called.
        function: Function,
        /// The session's key.
        session: String,
        /// The engine's message (cut to a bounded length).
        message: String,
    },
    /// The engine faulted too often in a row and is refused until the operator resets it.
    #[error(
        "engine `{engine}` is refused ({faults} faults in a row; reset it or restart the process); call `{function}` for session `{session}` not made. Last fault: {last_fault}"
    )]
    CircuitOpen {
        /// The engine's id.
        engine: String,
        /// The call that was refused.
        function: Function,
        /// The session's key.
        session: String,
        /// The faults in a row that opened the circuit.
        faults: u32,
        /// The last fault's message.
        last_fault: String,
    },
    /// The guest returned something the host refuses to apply.
    #[error(
        "engine `{engine}` returned an invalid result from `{function}` (session `{session}`): {problem}"
    )]
    InvalidOutput {
        /// The engine's id.
        engine: String,
        /// The exported function that was called.
        function: Function,
        /// The session's key.
        session: String,
        /// What the host refused, e.g. an entry kept twice.
        problem: String,
    },
}

impl EngineError {
    /// The trap's kind, when this is a [`EngineError::Fault`].
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
    /// Names the limit reached and the config key that sets it.
    pub message: String,
}

impl LimitExceeded {
    /// A trap with this message.
    pub fn new(message: String) -> Self {
        Self { message }
    }
}
