//! The wasm runtime of ctxhost: one wasmtime `Engine` per process, components compiled once (or
//! loaded precompiled from the cache), one `InstancePre` per engine and one `Store` per session.
//!
//! It owns the contract versions (one module per WIT version, each converting into the types of
//! [`contract`]), the sandbox (WASI with a quota'd state dir, no network) and its limits (memory,
//! fuel, epochs, per-import bounds), and the component cache. It uses wasmtime and of the
//! transcript crate only the `Role` its contract shares and the token estimate; it knows nothing
//! of sessions, transcripts on disk, config files or the CLI: the embedding library (`ctxhost`)
//! reaches it through [`SessionServices`].

#![warn(missing_docs)]

mod cache;
mod clock;
pub mod contract;
mod disk;
mod epoch;
mod error;
mod guest_log;
mod health;
mod instance;
mod lifecycle;
pub mod limits;
mod plan;
mod prepared;
mod quota;
mod services;
mod spec;
mod state;
mod text;
mod v0_1;
mod v0_2;
mod v0_3;
mod v0_4;
mod versions;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

pub use cache::{CacheUsage, LoadSource, usage as cache_usage};
pub use epoch::DeadlineExceeded;
pub use error::{EngineError, FaultKind, LimitExceeded, RuntimeError};
pub use health::HealthStatus;
pub use instance::EngineInstance;
pub use limits::{Function, LIMIT_KEYS, LimitKey, Limits, MAX_MEMORY_BYTES};
pub use prepared::PreparedEngine;
pub use services::{BoxFuture, Detached, SessionServices};
pub use spec::EngineSpec;
pub use state::Grants;

use contract::SessionIdentity;
use epoch::EpochTicker;
use prepared::Linked;
use state::StoreState;

/// Contract versions this host runs, newest first.
pub const SUPPORTED_CONTRACTS: &[&str] = versions::SUPPORTED;

/// How the shared runtime is built.
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    /// Where precompiled components are kept; `None` compiles every time.
    pub cache_dir: Option<PathBuf>,
    /// Upper bound on concurrently live instances (sizes the pooling allocator).
    pub max_instances: u32,
    /// Use the pooling allocator when the platform allows it.
    pub pooling: bool,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        Self {
            cache_dir: None,
            max_instances: 1000,
            pooling: true,
        }
    }
}

/// The wasm runtime every engine of a `Host` shares: one wasmtime `Engine` (pooled
/// instances when the system allows), the linker with the host's imports, the compiled-component
/// cache and the epoch ticker that enforces call deadlines. It knows nothing of transcripts:
/// [`Runtime::prepare`] turns a component into a [`PreparedEngine`], whose instances a session
/// drives. An embedder normally reaches it only through `Host`.
pub struct Runtime {
    engine: Engine,
    linker: Arc<Linker<StoreState>>,
    cache: Option<cache::CompileCache>,
    /// The instance pool's size; None when instances are allocated on demand.
    pool_instances: Option<u32>,
    _ticker: EpochTicker,
}

impl Runtime {
    /// The wasmtime engine, linker, compile cache and epoch ticker for `options`; falls back to
    /// on-demand allocation when pooling is not available.
    pub fn new(options: &RuntimeOptions) -> Result<Self, RuntimeError> {
        let (engine, pooling) = if options.pooling {
            match Engine::new(&config(Some(options.max_instances))) {
                Ok(engine) => (engine, true),
                Err(e) => {
                    tracing::info!(error = %e, "pooling allocator unavailable; allocating on demand");
                    (Self::on_demand_engine()?, false)
                }
            }
        } else {
            (Self::on_demand_engine()?, false)
        };
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)
            .map_err(|cause| RuntimeError::WasmEngine { cause })?;
        disk::add_to_linker(&mut linker).map_err(|cause| RuntimeError::WasmEngine { cause })?;
        versions::add_to_linker(&mut linker).map_err(|cause| RuntimeError::WasmEngine { cause })?;
        let cache = options
            .cache_dir
            .as_ref()
            .map(|dir| cache::CompileCache::new(dir, &engine));
        let ticker = EpochTicker::start(engine.clone());
        Ok(Self {
            engine,
            linker: Arc::new(linker),
            cache,
            pool_instances: pooling.then_some(options.max_instances),
            _ticker: ticker,
        })
    }

    fn on_demand_engine() -> Result<Engine, RuntimeError> {
        Engine::new(&config(None)).map_err(|cause| RuntimeError::WasmEngine { cause })
    }

    /// True when instances come from the pooling allocator.
    pub fn uses_pooling(&self) -> bool {
        self.pool_instances.is_some()
    }

    /// How many instances can be live at once (every engine's together): the pool's size, or
    /// None when instances are allocated on demand (bounded by memory only).
    pub fn instance_capacity(&self) -> Option<u32> {
        self.pool_instances
    }

    /// Compiles (or loads from the cache) a component, after checking that it is one.
    pub fn compile(
        &self,
        origin: &str,
        bytes: &[u8],
    ) -> Result<(Component, LoadSource), RuntimeError> {
        check_component_header(origin, bytes)?;
        let compiled = match &self.cache {
            Some(cache) => cache.load(&self.engine, bytes),
            None => Component::new(&self.engine, bytes).map(|c| (c, LoadSource::Compiled)),
        };
        compiled.map_err(|cause| RuntimeError::Compile {
            origin: origin.to_string(),
            cause,
        })
    }

    /// The contract version a component was built against (compiling it, or loading it from
    /// the cache), refusing what is not a supported engine.
    pub fn contract_of(&self, origin: &str, bytes: &[u8]) -> Result<String, RuntimeError> {
        let (component, _) = self.compile(origin, bytes)?;
        versions::contract_version(&self.engine, &component, origin)
    }

    /// Loads an engine: compile, check its contract version, link, and ask it for `info` in
    /// a detached instance (which also proves it instantiates within its limits).
    pub async fn prepare(
        &self,
        spec: EngineSpec,
        bytes: &[u8],
    ) -> Result<Arc<PreparedEngine>, RuntimeError> {
        let started = Instant::now();
        // Created once here rather than on every instantiation (that is on the per-session path).
        std::fs::create_dir_all(&spec.state_dir).map_err(|source| RuntimeError::StateDir {
            engine: spec.id.clone(),
            path: spec.state_dir.clone(),
            source,
        })?;
        let (component, load_source) = self.compile(&spec.origin, bytes)?;
        let compiled_in = started.elapsed();
        let contract = versions::contract_version(&self.engine, &component, &spec.origin)?;
        let pre = versions::Pre::new(&self.linker, &component, &contract).map_err(|cause| {
            RuntimeError::Link {
                origin: spec.origin.clone(),
                cause,
            }
        })?;
        // Shared by every instance of the engine: one count of one dir.
        let disk =
            quota::DiskQuota::new(&spec.id, &spec.state_dir, spec.limits.state_dir_quota_bytes);
        let linked = Linked {
            engine: self.engine.clone(),
            pre,
            disk,
            health: Arc::new(health::Health::new(spec.limits.faults_before_circuit_opens)),
            spec: Arc::new(spec),
        };
        let detached = SessionIdentity {
            id: String::new(),
            key: "(load)".into(),
        };
        let info = linked
            .instantiate(detached, Arc::new(Detached))
            .await?
            .info()
            .await?;
        Ok(Arc::new(PreparedEngine {
            linked,
            contract,
            load_source,
            compiled_in,
            info,
        }))
    }
}

/// Bytes of each pooled memory and table kept resident when their slot is given back.
const KEEP_RESIDENT: usize = 64 << 10;

fn config(pooled_instances: Option<u32>) -> Config {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    // Deep guest recursion must trap as a stack overflow well before the host's stack suffers.
    config.max_wasm_stack(1 << 20);
    if let Some(instances) = pooled_instances {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(instances)
            .total_core_instances(instances.saturating_mul(4))
            .total_memories(instances.saturating_mul(2))
            .total_tables(instances.saturating_mul(4))
            .total_stacks(instances)
            .max_memory_size(MAX_MEMORY_BYTES)
            // A slot given back is reset by rewriting the pages the instance touched (found
            // with `PAGEMAP_SCAN` where the kernel has it) rather than dropping them, so the
            // next instance in that slot starts without page faults: a third of a new
            // session's instance. Kept small: every slot used so far keeps up to this much, and
            // the pool uses the most instances alive at once plus at most 100 idle slots.
            .linear_memory_keep_resident(KEEP_RESIDENT)
            .table_keep_resident(KEEP_RESIDENT)
            .pagemap_scan(Enabled::Auto);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    config
}

/// A component starts with `\0asm`, then a version/layer word that tells it from a core module.
fn check_component_header(origin: &str, bytes: &[u8]) -> Result<(), RuntimeError> {
    const MAGIC: &[u8] = b"\0asm";
    const CORE_MODULE: &[u8] = &[1, 0, 0, 0];
    if !bytes.starts_with(MAGIC) {
        return Err(RuntimeError::NotWasm {
            origin: origin.to_string(),
        });
    }
    if bytes.get(4..8) == Some(CORE_MODULE) {
        return Err(RuntimeError::CoreModule {
            origin: origin.to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_tell_components_from_modules_and_junk() {
        assert!(matches!(
            check_component_header("x", b"hello"),
            Err(RuntimeError::NotWasm { .. })
        ));
        assert!(matches!(
            check_component_header("x", b"\0asm\x01\0\0\0"),
            Err(RuntimeError::CoreModule { .. })
        ));
        assert!(check_component_header("x", b"\0asm\x0d\0\x01\0").is_ok());
    }
}
