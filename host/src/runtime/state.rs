//! The data each engine instance's `Store` carries, and the host imports implemented on it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::contract::{CompactRequest, Compaction, ContextEntry, EntryRef, HostError, Message};
use super::guest_log::{Level, LogSink};
use super::limits::Limits;
use super::services::SessionServices;
use super::v0_1::ctxhost::engine::host::{self, CompletionRequest, LogLevel};
use super::v0_1::ctxhost::engine::types;

/// Powers the operator granted this engine.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    /// Completion / summarization through the operator's model.
    pub llm: bool,
    /// A host directory mounted read-only at `/workspace`.
    pub workspace: Option<std::path::PathBuf>,
}

pub struct StoreState {
    pub(super) wasi: WasiCtx,
    pub(super) table: ResourceTable,
    pub(super) limiter: Limiter,
    pub(super) services: Arc<dyn SessionServices>,
    pub(super) config_json: Arc<str>,
    pub(super) grants: Grants,
    pub(super) log: Arc<LogSink>,
    pub(super) clock: CallClock,
    pub(super) import_timeout: Duration,
}

impl WasiView for StoreState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Enforces the memory, table and instance limits, and remembers a refused memory grow so a
/// following trap can be reported as out-of-memory rather than a bare panic.
pub struct Limiter {
    limits: Limits,
    pub(super) memory_refused: bool,
}

impl Limiter {
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            memory_refused: false,
        }
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = desired <= self.limits.memory_bytes;
        self.memory_refused |= !allowed;
        Ok(allowed)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= self.limits.table_elements)
    }

    fn instances(&self) -> usize {
        self.limits.instances
    }
    fn tables(&self) -> usize {
        self.limits.instances
    }
    fn memories(&self) -> usize {
        self.limits.instances
    }
}

/// Guest time of the current call: wall time since it started minus time spent in host
/// imports, which have their own bounds and must not count against the engine.
#[derive(Debug)]
pub struct CallClock {
    started: Instant,
    in_host: Duration,
    pub(super) deadline: Duration,
}

impl CallClock {
    pub fn new() -> Self {
        Self {
            started: Instant::now(),
            in_host: Duration::ZERO,
            deadline: Duration::MAX,
        }
    }
    pub fn start(&mut self, deadline: Duration) {
        self.started = Instant::now();
        self.in_host = Duration::ZERO;
        self.deadline = deadline;
    }
    pub fn guest_time(&self) -> Duration {
        self.started.elapsed().saturating_sub(self.in_host)
    }
    /// Guest time left before the deadline.
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_sub(self.guest_time())
    }
    fn add_host_time(&mut self, since: Instant) {
        self.in_host += since.elapsed();
    }
}

impl types::Host for StoreState {}

impl host::Host for StoreState {
    async fn log(&mut self, level: LogLevel, message: String) -> anyhow::Result<()> {
        let level = match level {
            LogLevel::Trace => Level::Trace,
            LogLevel::Debug => Level::Debug,
            LogLevel::Info => Level::Info,
            LogLevel::Warn => Level::Warn,
            LogLevel::Error => Level::Error,
        };
        self.log.emit(level, "log", &message);
        Ok(())
    }

    async fn estimate_tokens(&mut self, text: String) -> anyhow::Result<u32> {
        Ok(ctxhost_transcript::tokens::estimate_text(&text))
    }

    // Cheap imports count against the guest's deadline, so a loop of millions of them still
    // stops; only the slow ones below are excluded, each bounded by its own timeout.
    async fn context_entries(&mut self) -> anyhow::Result<Vec<ContextEntry>> {
        Ok(self.services.context_entries())
    }

    async fn read_entries(
        &mut self,
        entries: Vec<EntryRef>,
    ) -> anyhow::Result<Result<Vec<Message>, HostError>> {
        Ok(self.services.read_entries(&entries))
    }

    async fn delegate_compaction(
        &mut self,
        request: CompactRequest,
    ) -> anyhow::Result<Result<Option<Compaction>, HostError>> {
        let since = Instant::now();
        let services = self.services.clone();
        let result =
            tokio::time::timeout(self.import_timeout, services.delegate_compaction(&request))
                .await
                .unwrap_or_else(|_| Err(timed_out("delegate-compaction", self.import_timeout)));
        self.clock.add_host_time(since);
        Ok(result)
    }

    async fn config(&mut self) -> anyhow::Result<String> {
        Ok(self.config_json.to_string())
    }

    async fn complete(
        &mut self,
        request: CompletionRequest,
    ) -> anyhow::Result<Result<String, HostError>> {
        if !self.grants.llm {
            self.log.emit(
                Level::Warn,
                "host",
                "denied `complete`: the engine was not granted the `llm` capability",
            );
            return Ok(Err(HostError::PermissionDenied(
                "`complete` needs the `llm` capability; the operator grants it in plugins.entries.<id>.grants".into(),
            )));
        }
        let since = Instant::now();
        let services = self.services.clone();
        let result = tokio::time::timeout(
            self.import_timeout,
            services.complete(
                request.system.as_deref(),
                &request.prompt,
                request.max_tokens,
            ),
        )
        .await
        .unwrap_or_else(|_| Err(timed_out("complete", self.import_timeout)));
        self.clock.add_host_time(since);
        Ok(result)
    }
}

fn timed_out(import: &str, after: Duration) -> HostError {
    HostError::Unavailable(format!("`{import}` timed out after {after:?}"))
}
