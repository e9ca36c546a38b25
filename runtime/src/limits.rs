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

/// How a field of [`Limits`] is written in its key's unit.
trait Unit<T> {
    fn to_key(value: T) -> u64;
    fn from_key(value: u64) -> T;
}

/// Milliseconds, for a [`Duration`].
struct Ms;
/// MiB, for a size in bytes.
struct MiB;
/// The number itself.
struct Count;

impl Unit<Duration> for Ms {
    fn to_key(value: Duration) -> u64 {
        u64::try_from(value.as_millis()).unwrap_or(u64::MAX)
    }
    fn from_key(value: u64) -> Duration {
        Duration::from_millis(value)
    }
}

/// The integer fields: a value from a key wider than the field saturates instead of wrapping
/// (ranges are checked first, so it does not arise).
macro_rules! integer_units {
    ($($t:ty),*) => {$(
        impl Unit<$t> for Count {
            fn to_key(value: $t) -> u64 {
                u64::try_from(value).unwrap_or(u64::MAX)
            }
            fn from_key(value: u64) -> $t {
                <$t>::try_from(value).unwrap_or(<$t>::MAX)
            }
        }
        impl Unit<$t> for MiB {
            fn to_key(value: $t) -> u64 {
                <Count as Unit<$t>>::to_key(value) >> 20
            }
            fn from_key(value: u64) -> $t {
                <Count as Unit<$t>>::from_key(value.saturating_mul(1 << 20))
            }
        }
    )*};
}
integer_units!(u32, u64, usize);

/// Declares each limit key as a constant and [`LIMIT_KEYS`], one line a key: its name, the
/// field of [`Limits`] it sets and in which unit, its range and what it bounds.
macro_rules! limit_keys {
    ($($name:ident = $key:literal: $field:ident in $unit:ident, $min:literal ..= $max:expr, $about:literal;)*) => {
        $(
            #[doc = concat!("`", $key, "`: ", $about, ".")]
            pub const $name: LimitKey = LimitKey {
                key: $key,
                about: $about,
                min: $min,
                max: $max,
                get: |l| <$unit as Unit<_>>::to_key(l.$field),
                set: |l, v| l.$field = <$unit as Unit<_>>::from_key(v),
            };
        )*

        /// Every limit an operator may set, in the order `config show` and the README list them.
        pub const LIMIT_KEYS: &[&LimitKey] = &[$(&$name),*];
    };
}

limit_keys! {
    MEMORY_MIB = "memoryMiB": memory_bytes in MiB, 1..=(MAX_MEMORY_BYTES >> 20) as u64,
        "linear memory per instance";
    CALL_TIMEOUT_MS = "callTimeoutMs": call_timeout in Ms, 10..=600_000,
        "deadline of info, ingest, assemble, after-turn and the subagent hooks";
    LONG_CALL_TIMEOUT_MS = "longCallTimeoutMs": long_call_timeout in Ms, 10..=3_600_000,
        "deadline of bootstrap, compact and dispose";
    IMPORT_TIMEOUT_MS = "importTimeoutMs": import_timeout in Ms, 10..=3_600_000,
        "how long one slow import (delegate-compaction, complete) may take";
    LOG_BYTES_PER_CALL = "logBytesPerCall": log_bytes_per_call in Count, 0..=64 << 20,
        "log and stdout/stderr bytes kept per call";
    HOST_BYTES_PER_CALL = "hostBytesPerCall": host_bytes_per_call in Count, 1024..=1 << 30,
        "bytes one call's result may hand the host";
    FAULTS_BEFORE_CIRCUIT_OPENS = "faultsBeforeCircuitOpens": faults_before_circuit_opens in Count,
        1..=1_000_000, "consecutive faults before the engine is refused";
    IMPORT_BYTES_PER_CALL = "importBytesPerCall": import_bytes_per_call in Count, 1024..=1 << 30,
        "bytes the host builds for one call's imports";
    IMPORT_CALLS_PER_CALL = "importCallsPerCall": import_calls_per_call in Count,
        1..=1_000_000_000, "host imports one call may make";
    SLOW_IMPORTS_PER_CALL = "slowImportsPerCall": slow_imports_per_call in Count, 1..=10_000,
        "delegate-compaction / complete / search calls one call may make";
    WALL_TIMEOUT_MS = "wallTimeoutMs": wall_timeout in Ms, 10..=24 * 3_600_000,
        "wall time of one call, imports included";
    STATE_DIR_QUOTA_MIB = "stateDirQuotaMiB": state_dir_quota_bytes in MiB, 1..=1 << 20,
        "disk the engine's state dir may use";
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
