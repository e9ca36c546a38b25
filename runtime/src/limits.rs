//! Per-engine resource limits and the per-function deadlines they imply.

use std::fmt;
use std::time::Duration;

/// What one engine instance may use. Defaults are generous for real engines and small enough
/// that a hostile one cannot exhaust the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Linear memory per instance, in bytes.
    pub memory_bytes: usize,
    /// Deadline for the quick calls (info, ingest, assemble, after-turn, subagent hooks).
    pub call_timeout: Duration,
    /// Deadline for the slow calls (bootstrap, compact, dispose).
    pub long_call_timeout: Duration,
    /// Log and stdout/stderr bytes accepted per call; the rest is dropped and counted.
    pub log_bytes_per_call: usize,
    /// Table elements per table.
    pub table_elements: usize,
    /// Core instances per component instance.
    pub instances: usize,
    /// Bytes a guest may hand the host in one call's result (messages, summaries, errors).
    pub host_bytes_per_call: usize,
    /// How long one slow import (delegate-compaction, complete) may take; that time does not
    /// count against the guest's deadline.
    pub import_timeout: Duration,
    /// Consecutive faults after which the engine is refused until reset.
    pub faults_before_circuit_opens: u32,
    /// Bytes the host copies in from or builds for the guest's imports in one call (arguments
    /// it receives, results it returns), so a guest cannot make the host allocate without bound.
    pub import_bytes_per_call: usize,
    /// Host imports one call may make, whatever they cost.
    pub import_calls_per_call: u64,
    /// Calls of the slow imports (delegate-compaction, complete) one call may make.
    pub slow_imports_per_call: u32,
    /// Wall time of one call, guest and host imports together: the hard cap the guest
    /// deadlines (which exclude time in slow imports) cannot give.
    pub wall_timeout: Duration,
    /// Disk the engine's state dir may use (allocated blocks plus a charge per entry).
    pub state_dir_quota_bytes: u64,
}

/// The largest memory limit an operator may set (the pooling allocator reserves this much
/// address space per instance slot).
pub const MAX_MEMORY_BYTES: usize = 1 << 30;

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: 256 << 20,
            call_timeout: Duration::from_secs(2),
            long_call_timeout: Duration::from_secs(60),
            log_bytes_per_call: 64 << 10,
            table_elements: 100_000,
            instances: 64,
            host_bytes_per_call: 64 << 20,
            import_timeout: Duration::from_secs(120),
            faults_before_circuit_opens: 3,
            import_bytes_per_call: 64 << 20,
            import_calls_per_call: 1_000_000,
            slow_imports_per_call: 16,
            wall_timeout: Duration::from_secs(300),
            state_dir_quota_bytes: 256 << 20,
        }
    }
}

impl Limits {
    /// The deadline of one call of `function`: [`Limits::long_call_timeout`] for bootstrap, compact
    /// and dispose, [`Limits::call_timeout`] for the rest.
    pub fn deadline(&self, function: Function) -> Duration {
        match function {
            Function::Bootstrap | Function::Compact | Function::Dispose => self.long_call_timeout,
            _ => self.call_timeout,
        }
    }
}

/// The engine's exported functions, named as in the WIT for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Function {
    /// Creating the instance (the component's start-up).
    Instantiate,
    /// `info`.
    Info,
    /// `bootstrap`.
    Bootstrap,
    /// `ingest`.
    Ingest,
    /// `ingest-batch`.
    IngestBatch,
    /// `assemble`.
    Assemble,
    /// `compact`.
    Compact,
    /// `after-turn`.
    AfterTurn,
    /// `prepare-subagent-spawn`.
    PrepareSubagentSpawn,
    /// `rollback-subagent-spawn`.
    RollbackSubagentSpawn,
    /// `on-subagent-ended`.
    OnSubagentEnded,
    /// `dispose`.
    Dispose,
    /// `list-tools` (0.3 on).
    ListTools,
    /// `call-tool` (0.3 on).
    CallTool,
}

impl Function {
    /// The function's name in the WIT, for messages.
    pub fn wit_name(self) -> &'static str {
        match self {
            Self::Instantiate => "instantiate",
            Self::Info => "info",
            Self::Bootstrap => "bootstrap",
            Self::Ingest => "ingest",
            Self::IngestBatch => "ingest-batch",
            Self::Assemble => "assemble",
            Self::Compact => "compact",
            Self::AfterTurn => "after-turn",
            Self::PrepareSubagentSpawn => "prepare-subagent-spawn",
            Self::RollbackSubagentSpawn => "rollback-subagent-spawn",
            Self::OnSubagentEnded => "on-subagent-ended",
            Self::Dispose => "dispose",
            Self::ListTools => "list-tools",
            Self::CallTool => "call-tool",
        }
    }
}

impl fmt::Display for Function {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.wit_name())
    }
}
