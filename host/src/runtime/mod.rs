//! The wasm runtime: one wasmtime `Engine` per process, components compiled once (or loaded
//! precompiled from the cache), one `InstancePre` per engine and one `Store` per session.
//! Knows nothing about transcripts or the CLI; sessions reach it through `SessionServices`.

/// Converts a WIT enum of a version's generated `types` (`g`) to and from ctxhost's own
/// (`d`, `super::contract`), variant by variant.
macro_rules! convert_enum {
    ($name:ident [$($variant:ident),* $(,)?]) => {
        impl From<d::$name> for g::$name {
            fn from(value: d::$name) -> Self {
                match value {
                    $(d::$name::$variant => Self::$variant,)*
                }
            }
        }
        impl From<g::$name> for d::$name {
            fn from(value: g::$name) -> Self {
                match value {
                    $(g::$name::$variant => Self::$variant,)*
                }
            }
        }
    };
}
use convert_enum;

mod cache;
pub mod contract;
mod disk;
mod error;
mod guest_log;
mod health;
mod instance;
mod limits;
mod services;
mod state;
mod text;
mod v0_1;
mod v0_2;
mod versions;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, UpdateDeadline,
};
use wasmtime_wasi::{FsPerms, WasiCtx};

pub use cache::{CacheUsage, LoadSource, usage as cache_usage};
pub use error::{EngineError, FaultKind, LimitExceeded, RuntimeError};
pub use health::HealthStatus;
pub use instance::EngineInstance;
pub use limits::{Function, Limits, MAX_MEMORY_BYTES};
pub use services::{BoxFuture, Detached, SessionServices};
pub use state::Grants;

use guest_log::{GuestOutput, LogSink};
use state::{CallClock, ImportBudget, Limiter, StoreState};

/// Contract versions this host runs, newest first.
pub const SUPPORTED_CONTRACTS: &[&str] = versions::SUPPORTED;

/// How often the epoch advances; deadlines are checked at this granularity.
const TICK: Duration = Duration::from_millis(10);

/// How much guest time passes between deadline checks (and yields to the executor).
const CHECK_EVERY: Duration = Duration::from_millis(50);

fn ticks_for(deadline: Duration) -> u64 {
    (deadline.as_millis() / TICK.as_millis()).max(1) as u64
}

/// The trap raised when a call runs out of guest time.
#[derive(Debug, thiserror::Error)]
#[error("deadline exceeded")]
pub struct DeadlineExceeded;

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

/// The wasm runtime every engine of a [`crate::Host`] shares: one wasmtime `Engine` (pooled
/// instances when the system allows), the linker with the host's imports, the compiled-component
/// cache and the epoch ticker that enforces call deadlines. It knows nothing of transcripts:
/// [`Runtime::prepare`] turns a component into a [`PreparedEngine`], whose instances a session
/// drives. An embedder normally reaches it only through `Host`.
pub struct Runtime {
    engine: Engine,
    linker: Arc<Linker<StoreState>>,
    cache: Option<cache::CompileCache>,
    pooling: bool,
    _ticker: EpochTicker,
}

impl Runtime {
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
            pooling,
            _ticker: ticker,
        })
    }

    fn on_demand_engine() -> Result<Engine, RuntimeError> {
        Engine::new(&config(None)).map_err(|cause| RuntimeError::WasmEngine { cause })
    }

    /// True when instances come from the pooling allocator.
    pub fn uses_pooling(&self) -> bool {
        self.pooling
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
        contract_version(&self.engine, &component, origin)
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
        let contract = contract_version(&self.engine, &component, &spec.origin)?;
        let pre = versions::Pre::new(&self.linker, &component, &contract).map_err(|cause| {
            RuntimeError::Link {
                origin: spec.origin.clone(),
                cause,
            }
        })?;
        // Shared by every instance of the engine: one count of one dir.
        let disk =
            disk::DiskQuota::new(&spec.id, &spec.state_dir, spec.limits.state_dir_quota_bytes);
        let linked = Linked {
            engine: self.engine.clone(),
            pre,
            disk,
            health: Arc::new(health::Health::new(spec.limits.faults_before_circuit_opens)),
            spec: Arc::new(spec),
        };
        let detached = Session {
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

/// What the host knows about an engine before loading it.
#[derive(Debug, Clone)]
pub struct EngineSpec {
    /// The id the operator selects it by.
    pub id: String,
    /// Where it came from, for messages (a path, or `bundled:legacy`).
    pub origin: String,
    /// Its private directory, preopened read-write as `/`.
    pub state_dir: PathBuf,
    /// Its configuration as a JSON object.
    pub config_json: String,
    pub limits: Limits,
    pub grants: Grants,
}

use contract::{EngineInfo, Session};

/// A compiled, linked engine that answered `info`, ready to instantiate per session.
pub struct PreparedEngine {
    linked: Linked,
    contract: String,
    load_source: LoadSource,
    compiled_in: Duration,
    info: EngineInfo,
}

impl PreparedEngine {
    pub fn id(&self) -> &str {
        &self.linked.spec.id
    }
    pub fn spec(&self) -> &EngineSpec {
        &self.linked.spec
    }
    /// The contract version the component was built against.
    pub fn contract_version(&self) -> &str {
        &self.contract
    }
    pub fn load_source(&self) -> LoadSource {
        self.load_source
    }
    /// Time spent compiling or loading from the cache.
    pub fn load_time(&self) -> Duration {
        self.compiled_in
    }

    /// What the engine said of itself when it was loaded.
    pub fn info(&self) -> &EngineInfo {
        &self.info
    }

    /// A fresh instance for one session (refused while the circuit is open).
    pub async fn instantiate(
        &self,
        session: Session,
        services: Arc<dyn SessionServices>,
    ) -> Result<EngineInstance, EngineError> {
        let health = &self.linked.health;
        health.check(self.id(), Function::Instantiate, &session.key)?;
        let result = self.linked.instantiate(session, services).await;
        health.record(Function::Instantiate, &result);
        result
    }

    /// Consecutive faults and whether the engine is refused.
    pub fn health(&self) -> HealthStatus {
        self.linked.health.status()
    }

    /// Closes the circuit: the operator vouches for the engine again.
    pub fn reset_health(&self) {
        self.linked.health.reset();
    }
}

/// A component linked against the host's imports.
struct Linked {
    engine: Engine,
    pre: versions::Pre,
    spec: Arc<EngineSpec>,
    health: Arc<health::Health>,
    disk: Arc<disk::DiskQuota>,
}

impl Linked {
    async fn instantiate(
        &self,
        session: Session,
        services: Arc<dyn SessionServices>,
    ) -> Result<EngineInstance, EngineError> {
        let spec = &self.spec;
        let log = LogSink::new(
            spec.id.as_str().into(),
            session.key.clone(),
            spec.limits.log_bytes_per_call,
        );
        let wasi = self.wasi_ctx(&log).map_err(|detail| EngineError::Fault {
            engine: spec.id.clone(),
            function: Function::Instantiate,
            session: session.key.clone(),
            kind: FaultKind::Trap,
            detail,
        })?;
        let state = StoreState {
            wasi,
            table: ResourceTable::new(),
            limiter: Limiter::new(spec.limits.clone()),
            services,
            config_json: spec.config_json.as_str().into(),
            grants: spec.grants.clone(),
            log,
            clock: CallClock::new(),
            import_timeout: spec.limits.import_timeout,
            budget: ImportBudget::new(&spec.limits),
            disk: self.disk.clone(),
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        // Checked every few ticks: a long-running guest yields its tokio worker between checks
        // (so spinning guests cannot starve other sessions) and traps once its time is up.
        // The wall-time cap is checked here too, so a call that spent its wall time in imports
        // ends at the guest's next check.
        store.epoch_deadline_callback(|ctx| {
            let clock = &ctx.data().clock;
            let wall_left = clock.wall_remaining();
            if wall_left.is_zero() {
                return Err(clock.wall_exceeded().into());
            }
            let remaining = clock.remaining();
            if remaining.is_zero() {
                Err(DeadlineExceeded.into())
            } else {
                Ok(UpdateDeadline::Yield(ticks_for(
                    remaining.min(wall_left).min(CHECK_EVERY),
                )))
            }
        });
        store.data_mut().clock.start(
            spec.limits.deadline(Function::Instantiate),
            spec.limits.wall_timeout,
        );
        store.set_epoch_deadline(ticks_for(
            spec.limits.deadline(Function::Instantiate).min(CHECK_EVERY),
        ));
        let bindings = match self.pre.instantiate(&mut store).await {
            Ok(bindings) => bindings,
            Err(e) => {
                let memory_refused = store.data().limiter.memory_refused;
                return Err(EngineError::Fault {
                    engine: spec.id.clone(),
                    function: Function::Instantiate,
                    session: session.key.clone(),
                    kind: instance::classify(&e, memory_refused),
                    detail: format!("{e:#}"),
                });
            }
        };
        Ok(EngineInstance {
            store,
            bindings,
            spec: spec.clone(),
            health: self.health.clone(),
            session,
        })
    }

    /// The sandbox: the state dir as `/`, guest output into the logs, nothing else — no env,
    /// no args, no network, no other files.
    fn wasi_ctx(&self, log: &Arc<LogSink>) -> Result<WasiCtx, String> {
        let dir = &self.spec.state_dir;
        let mut builder = WasiCtx::builder();
        builder
            .stdout(GuestOutput::stdout(log.clone()))
            .stderr(GuestOutput::stderr(log.clone()))
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        builder
            .preopened_dir(dir, "/", FsPerms::ReadWrite)
            .map_err(|e| format!("cannot open state dir {}: {e:#}", dir.display()))?;
        if let Some(workspace) = &self.spec.grants.workspace {
            builder
                .preopened_dir(workspace, "/workspace", FsPerms::ReadOnly)
                .map_err(|e| format!("cannot open workspace {}: {e:#}", workspace.display()))?;
        }
        Ok(builder.build())
    }
}

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
            .max_memory_size(MAX_MEMORY_BYTES);
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

/// Reads the `ctxhost:engine` version a component exports, and refuses unsupported ones.
fn contract_version(
    engine: &Engine,
    component: &Component,
    origin: &str,
) -> Result<String, RuntimeError> {
    let ty = component.component_type();
    let exports: Vec<String> = ty
        .exports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    let found = exports
        .iter()
        .find_map(|name| name.strip_prefix("ctxhost:engine/engine@"))
        .ok_or_else(|| RuntimeError::NotAnEngine {
            origin: origin.to_string(),
            exports: if exports.is_empty() {
                "none".into()
            } else {
                exports.join(", ")
            },
        })?;
    if SUPPORTED_CONTRACTS.iter().any(|v| same_minor(v, found)) {
        Ok(found.to_string())
    } else {
        Err(RuntimeError::UnsupportedContract {
            origin: origin.to_string(),
            found: found.to_string(),
            supported: SUPPORTED_CONTRACTS.join(", "),
        })
    }
}

/// Component-model semver: `0.1.x` versions are interchangeable, `0.2` is not (the host
/// matches on major and minor at every major). Not a full version (`0.1`) matches nothing.
fn same_minor(supported: &str, found: &str) -> bool {
    match (
        semver::Version::parse(supported),
        semver::Version::parse(found),
    ) {
        (Ok(supported), Ok(found)) => {
            (supported.major, supported.minor) == (found.major, found.minor)
        }
        _ => false,
    }
}

/// Advances the engine's epoch so deadlines fire; stops when dropped.
struct EpochTicker {
    stop: Arc<AtomicBool>,
}

impl EpochTicker {
    fn start(engine: Engine) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        std::thread::Builder::new()
            .name("ctxhost-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(TICK);
                    engine.increment_epoch();
                }
            })
            .expect("spawning the epoch thread");
        Self { stop }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
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

    #[test]
    fn contract_versions_match_on_minor() {
        assert!(same_minor("0.1.0", "0.1.0"));
        assert!(same_minor("0.1.0", "0.1.3"));
        assert!(!same_minor("0.1.0", "0.2.0"));
        assert!(!same_minor("0.1.0", "0.1"));
        assert!(!same_minor("0.1.0", "0.1.x"));
        assert!(same_minor("0.1.0", "0.1.1-rc.1"));
        assert!(!same_minor("1.1.0", "1.2.0"));
    }
}
