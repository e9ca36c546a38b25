//! An engine between loading and sessions: the compiled and linked component
//! ([`PreparedEngine`]) and how one instance of it is made: its sandbox, store limits and
//! deadline checks.

use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::ResourceTable;
use wasmtime::{Engine, Store, UpdateDeadline};
use wasmtime_wasi::{FsPerms, WasiCtx};

use super::cache::LoadSource;
use super::clock::CallClock;
use super::contract::{EngineInfo, SessionIdentity};
use super::epoch::{CHECK_EVERY, DeadlineExceeded, ticks_for};
use super::error::{EngineError, FaultKind};
use super::guest_log::{GuestOutput, LogSink};
use super::health::{Health, HealthStatus};
use super::instance::{self, EngineInstance};
use super::limits::Function;
use super::plan::Positions;
use super::services::SessionServices;
use super::spec::EngineSpec;
use super::state::{ImportBudget, Limiter, StoreState};
use super::{quota, versions};

/// A compiled, linked engine that answered `info`, ready to instantiate per session.
pub struct PreparedEngine {
    pub(super) linked: Linked,
    pub(super) contract: String,
    pub(super) load_source: LoadSource,
    pub(super) compiled_in: Duration,
    pub(super) info: EngineInfo,
}

impl PreparedEngine {
    /// The engine's id.
    pub fn id(&self) -> &str {
        &self.linked.spec.id
    }
    /// What it was loaded from.
    pub fn spec(&self) -> &EngineSpec {
        &self.linked.spec
    }
    /// The contract version the component was built against.
    pub fn contract_version(&self) -> &str {
        &self.contract
    }
    /// Whether it was compiled or loaded from the compile cache.
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
        session: SessionIdentity,
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
pub(super) struct Linked {
    pub(super) engine: Engine,
    pub(super) pre: versions::Pre,
    pub(super) spec: Arc<EngineSpec>,
    pub(super) health: Arc<Health>,
    pub(super) disk: Arc<quota::DiskQuota>,
}

impl Linked {
    pub(super) async fn instantiate(
        &self,
        session: SessionIdentity,
        services: Arc<dyn SessionServices>,
    ) -> Result<EngineInstance, EngineError> {
        let spec = &self.spec;
        let log = LogSink::new(
            spec.id.as_str().into(),
            session.key.clone(),
            spec.limits.log_bytes_per_call,
        );
        // Opening the state dir fails when the process is out of descriptors: the host's
        // shortage, not the engine's fault.
        let wasi = self.wasi_ctx(&log).map_err(|detail| EngineError::Fault {
            engine: spec.id.clone(),
            function: Function::Instantiate,
            session: session.key.clone(),
            kind: FaultKind::HostResources,
            detail,
        })?;
        let mut store = self.new_store(wasi, log, services);
        // Bounded from outside too: a constructor blocked in WASI is never interrupted.
        let watch = store.data().clock.watchdog();
        let bindings = match watch.bound(self.pre.instantiate(&mut store)).await {
            Ok(bindings) => bindings,
            Err(e) => return Err(instantiate_fault(spec, &session, &store, &e)),
        };
        Ok(EngineInstance {
            store,
            bindings,
            spec: spec.clone(),
            health: self.health.clone(),
            session,
            positions: Positions::default(),
        })
    }

    /// A session's store: its state, the memory limiter, and the deadline of `instantiate`
    /// armed.
    fn new_store(
        &self,
        wasi: WasiCtx,
        log: Arc<LogSink>,
        services: Arc<dyn SessionServices>,
    ) -> Store<StoreState> {
        let spec = &self.spec;
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
        let deadline = spec.limits.deadline(Function::Instantiate);
        store
            .data_mut()
            .clock
            .start(deadline, spec.limits.wall_timeout);
        store.set_epoch_deadline(ticks_for(deadline.min(CHECK_EVERY)));
        store
    }

    /// The sandbox: the state dir as `/`, guest output into the logs, nothing else — no env,
    /// no args, no network, no other files. The guest's file operations run on the calling
    /// thread, as the host's own transcript writes do: handing each one to tokio's blocking
    /// pool cost three thread switches per operation (checkpoint-manager replaying the pi
    /// session: 3,125 switches and 0.40 s, against 366 and 0.23 s on the thread).
    fn wasi_ctx(&self, log: &Arc<LogSink>) -> Result<WasiCtx, String> {
        let dir = &self.spec.state_dir;
        let mut builder = WasiCtx::builder();
        builder
            .stdout(GuestOutput::stdout(log.clone()))
            .stderr(GuestOutput::stderr(log.clone()))
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .allow_blocking_current_thread(true);
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

/// Why instantiating failed, in the host's terms: a full pool is the host's shortage.
fn instantiate_fault(
    spec: &EngineSpec,
    session: &SessionIdentity,
    store: &Store<StoreState>,
    error: &wasmtime::Error,
) -> EngineError {
    let kind = if error
        .downcast_ref::<wasmtime::PoolConcurrencyLimitError>()
        .is_some()
    {
        FaultKind::HostResources
    } else {
        instance::classify(error, store.data().limiter.memory_refused)
    };
    EngineError::Fault {
        engine: spec.id.clone(),
        function: Function::Instantiate,
        session: session.key.clone(),
        kind,
        detail: format!("{error:#}"),
    }
}
