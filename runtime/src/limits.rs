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

/// One limit an operator may set in `plugins.entries.<id>.limits`: the one list of them, so
/// config reads its keys and ranges here, applies values through it, `config show` prints each
/// one's effective value, and the runtime's messages name the key an operator would raise.
#[derive(Debug)]
pub struct LimitKey {
    /// The config key, its unit in the name (`memoryMiB`, `callTimeoutMs`).
    pub key: &'static str,
    /// What it bounds, in a few words.
    pub about: &'static str,
    /// The least an operator may set, in the key's unit.
    pub min: u64,
    /// The most an operator may set, in the key's unit.
    pub max: u64,
    get: fn(&Limits) -> u64,
    set: fn(&mut Limits, u64),
}

impl LimitKey {
    /// This limit's value in `limits`, in the key's unit.
    pub fn get(&self, limits: &Limits) -> u64 {
        (self.get)(limits)
    }

    /// Sets this limit in `limits` from a value in the key's unit (already range-checked).
    pub fn set(&self, limits: &mut Limits, value: u64) {
        (self.set)(limits, value)
    }

    /// The key under which it is looked up.
    pub fn named(key: &str) -> Option<&'static LimitKey> {
        LIMIT_KEYS.iter().copied().find(|k| k.key == key)
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn saturating_u32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// `memoryMiB`.
pub const MEMORY_MIB: LimitKey = LimitKey {
    key: "memoryMiB",
    about: "linear memory per instance",
    min: 1,
    max: (MAX_MEMORY_BYTES >> 20) as u64,
    get: |l| (l.memory_bytes >> 20) as u64,
    set: |l, v| l.memory_bytes = (v as usize) << 20,
};
/// `callTimeoutMs`.
pub const CALL_TIMEOUT_MS: LimitKey = LimitKey {
    key: "callTimeoutMs",
    about: "deadline of info, ingest, assemble, after-turn and the subagent hooks",
    min: 10,
    max: 600_000,
    get: |l| millis(l.call_timeout),
    set: |l, v| l.call_timeout = Duration::from_millis(v),
};
/// `longCallTimeoutMs`.
pub const LONG_CALL_TIMEOUT_MS: LimitKey = LimitKey {
    key: "longCallTimeoutMs",
    about: "deadline of bootstrap, compact and dispose",
    min: 10,
    max: 3_600_000,
    get: |l| millis(l.long_call_timeout),
    set: |l, v| l.long_call_timeout = Duration::from_millis(v),
};
/// `importTimeoutMs`.
pub const IMPORT_TIMEOUT_MS: LimitKey = LimitKey {
    key: "importTimeoutMs",
    about: "how long one slow import (delegate-compaction, complete) may take",
    min: 10,
    max: 3_600_000,
    get: |l| millis(l.import_timeout),
    set: |l, v| l.import_timeout = Duration::from_millis(v),
};
/// `logBytesPerCall`.
pub const LOG_BYTES_PER_CALL: LimitKey = LimitKey {
    key: "logBytesPerCall",
    about: "log and stdout/stderr bytes kept per call",
    min: 0,
    max: 64 << 20,
    get: |l| l.log_bytes_per_call as u64,
    set: |l, v| l.log_bytes_per_call = v as usize,
};
/// `hostBytesPerCall`.
pub const HOST_BYTES_PER_CALL: LimitKey = LimitKey {
    key: "hostBytesPerCall",
    about: "bytes one call's result may hand the host",
    min: 1024,
    max: 1 << 30,
    get: |l| l.host_bytes_per_call as u64,
    set: |l, v| l.host_bytes_per_call = v as usize,
};
/// `faultsBeforeCircuitOpens`.
pub const FAULTS_BEFORE_CIRCUIT_OPENS: LimitKey = LimitKey {
    key: "faultsBeforeCircuitOpens",
    about: "consecutive faults before the engine is refused",
    min: 1,
    max: 1_000_000,
    get: |l| u64::from(l.faults_before_circuit_opens),
    set: |l, v| l.faults_before_circuit_opens = saturating_u32(v),
};
/// `importBytesPerCall`.
pub const IMPORT_BYTES_PER_CALL: LimitKey = LimitKey {
    key: "importBytesPerCall",
    about: "bytes the host builds for one call's imports",
    min: 1024,
    max: 1 << 30,
    get: |l| l.import_bytes_per_call as u64,
    set: |l, v| l.import_bytes_per_call = v as usize,
};
/// `importCallsPerCall`.
pub const IMPORT_CALLS_PER_CALL: LimitKey = LimitKey {
    key: "importCallsPerCall",
    about: "host imports one call may make",
    min: 1,
    max: 1_000_000_000,
    get: |l| l.import_calls_per_call,
    set: |l, v| l.import_calls_per_call = v,
};
/// `slowImportsPerCall`.
pub const SLOW_IMPORTS_PER_CALL: LimitKey = LimitKey {
    key: "slowImportsPerCall",
    about: "delegate-compaction / complete / search calls one call may make",
    min: 1,
    max: 10_000,
    get: |l| u64::from(l.slow_imports_per_call),
    set: |l, v| l.slow_imports_per_call = saturating_u32(v),
};
/// `wallTimeoutMs`.
pub const WALL_TIMEOUT_MS: LimitKey = LimitKey {
    key: "wallTimeoutMs",
    about: "wall time of one call, imports included",
    min: 10,
    max: 24 * 3_600_000,
    get: |l| millis(l.wall_timeout),
    set: |l, v| l.wall_timeout = Duration::from_millis(v),
};
/// `stateDirQuotaMiB`.
pub const STATE_DIR_QUOTA_MIB: LimitKey = LimitKey {
    key: "stateDirQuotaMiB",
    about: "disk the engine's state dir may use",
    min: 1,
    max: 1 << 20,
    get: |l| l.state_dir_quota_bytes >> 20,
    set: |l, v| l.state_dir_quota_bytes = v << 20,
};

/// Every limit an operator may set, in the order `config show` and the README list them.
pub const LIMIT_KEYS: &[&LimitKey] = &[
    &MEMORY_MIB,
    &CALL_TIMEOUT_MS,
    &LONG_CALL_TIMEOUT_MS,
    &IMPORT_TIMEOUT_MS,
    &LOG_BYTES_PER_CALL,
    &HOST_BYTES_PER_CALL,
    &FAULTS_BEFORE_CIRCUIT_OPENS,
    &IMPORT_BYTES_PER_CALL,
    &IMPORT_CALLS_PER_CALL,
    &SLOW_IMPORTS_PER_CALL,
    &WALL_TIMEOUT_MS,
    &STATE_DIR_QUOTA_MIB,
];

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_reads_back_what_it_sets_and_its_default_is_in_range() {
        let defaults = Limits::default();
        let mut seen = std::collections::HashSet::new();
        for key in LIMIT_KEYS {
            assert!(seen.insert(key.key), "{} listed twice", key.key);
            assert_eq!(
                LimitKey::named(key.key).map(|k| (k.min, k.max)),
                Some((key.min, key.max))
            );
            let default = key.get(&defaults);
            assert!((key.min..=key.max).contains(&default), "{}", key.key);
            for value in [key.min, key.max, default] {
                let mut limits = defaults.clone();
                key.set(&mut limits, value);
                assert_eq!(key.get(&limits), value, "{}", key.key);
            }
            let mut limits = defaults.clone();
            key.set(&mut limits, default);
            assert_eq!(limits, defaults, "{} changes more than itself", key.key);
        }
    }
}
