//! The data each engine instance's `Store` carries, and the host imports implemented on it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::clock::CallClock;
use super::contract::{
    CompactRequest, Compaction, CompletionRequest, Context, EntryRef, HostError, LogLevel, Message,
    SearchHit, SearchRequest,
};
use super::error::LimitExceeded;
use super::guest_log::{Level, LogSink};
use super::limits::Limits;
use super::services::SessionServices;

/// Powers the operator granted this engine.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    /// Completion / summarization through the operator's model.
    pub llm: bool,
    /// A host directory mounted read-only at `/workspace`.
    pub workspace: Option<std::path::PathBuf>,
}

pub(super) struct StoreState {
    pub(super) wasi: WasiCtx,
    pub(super) table: ResourceTable,
    pub(super) limiter: Limiter,
    pub(super) services: Arc<dyn SessionServices>,
    pub(super) config_json: Arc<str>,
    pub(super) grants: Grants,
    pub(super) log: Arc<LogSink>,
    pub(super) clock: CallClock,
    pub(super) import_timeout: Duration,
    pub(super) budget: ImportBudget,
    pub(super) disk: Arc<super::quota::DiskQuota>,
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
pub(super) struct Limiter {
    limits: Limits,
    pub(super) memory_refused: bool,
}

impl Limiter {
    pub(super) fn new(limits: Limits) -> Self {
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

/// What the current call has made the host do through its imports, checked against the
/// per-call limits before the host does the work.
#[derive(Debug)]
pub(super) struct ImportBudget {
    bytes_limit: usize,
    calls_limit: u64,
    slow_limit: u32,
    bytes: usize,
    calls: u64,
    slow: u32,
}

impl ImportBudget {
    pub(super) fn new(limits: &Limits) -> Self {
        Self {
            bytes_limit: limits.import_bytes_per_call,
            calls_limit: limits.import_calls_per_call,
            slow_limit: limits.slow_imports_per_call,
            bytes: 0,
            calls: 0,
            slow: 0,
        }
    }

    pub(super) fn reset(&mut self) {
        self.bytes = 0;
        self.calls = 0;
        self.slow = 0;
    }

    /// Counts one call of `import`.
    fn call(&mut self, import: &str) -> Result<(), LimitExceeded> {
        self.calls += 1;
        if self.calls > self.calls_limit {
            return Err(LimitExceeded::new(format!(
                "made more than {} host import calls (the last one `{import}`), over limits.{}",
                self.calls_limit,
                crate::limits::IMPORT_CALLS_PER_CALL.key
            )));
        }
        Ok(())
    }

    /// Counts one call of a slow import (delegate-compaction, complete, search).
    fn slow(&mut self, import: &str) -> Result<(), LimitExceeded> {
        self.call(import)?;
        self.slow += 1;
        if self.slow > self.slow_limit {
            return Err(LimitExceeded::new(format!(
                "called the slow imports (delegate-compaction, complete, search) more than {} times (the last one `{import}`), over limits.{}",
                self.slow_limit,
                crate::limits::SLOW_IMPORTS_PER_CALL.key
            )));
        }
        Ok(())
    }

    /// Charges `bytes` the host is about to build (or has built) for `import`.
    fn charge(&mut self, import: &str, bytes: usize) -> Result<(), LimitExceeded> {
        self.bytes = self.bytes.saturating_add(bytes);
        if self.bytes > self.bytes_limit {
            return Err(LimitExceeded::new(format!(
                "`{import}` would take the host past {} bytes built for this call's imports, over limits.{}",
                self.bytes_limit,
                crate::limits::IMPORT_BYTES_PER_CALL.key
            )));
        }
        Ok(())
    }
}

/// Host memory a message handed to the guest occupies (its record and its strings).
fn message_bytes(message: &Message) -> usize {
    let calls: usize = message
        .tool_calls
        .iter()
        .map(|c| std::mem::size_of_val(c) + c.id.len() + c.name.len() + c.arguments.len())
        .sum();
    std::mem::size_of::<Message>()
        + message.entry_id.len()
        + message.text.len()
        + message.json.len()
        + message.tool_name.as_ref().map_or(0, String::len)
        + message.stop_reason.as_ref().map_or(0, String::len)
        + calls
}

/// The host imports in ctxhost's terms; each contract version's `Host` impl converts its
/// arguments and results around these.
impl StoreState {
    pub(super) fn import_log(&mut self, level: LogLevel, message: &str) -> anyhow::Result<()> {
        self.budget.call("log")?;
        let level = match level {
            LogLevel::Trace => Level::Trace,
            LogLevel::Debug => Level::Debug,
            LogLevel::Info => Level::Info,
            LogLevel::Warn => Level::Warn,
            LogLevel::Error => Level::Error,
        };
        self.log.emit(level, "log", message);
        Ok(())
    }

    pub(super) fn import_estimate_tokens(&mut self, text: &str) -> anyhow::Result<u32> {
        self.budget.call("estimate-tokens")?;
        Ok(ctxhost_transcript::tokens::estimate_text(text))
    }

    // Cheap imports count against the guest's deadline, so a loop of millions of them still
    // stops; only the slow ones below are excluded, each bounded by its own timeout and by the
    // call's wall-time cap. Every import is counted (importCallsPerCall), and what the host
    // builds for the guest is charged to importBytesPerCall before it is handed over. Arguments
    // are already copied out of guest memory when an import starts (bounded by the guest's
    // memory limit); those dropped when it returns are not charged, those passed on (prompts,
    // instructions) are.
    /// `record_bytes`: the size of one entry in the guest's version of the record.
    pub(super) fn import_context_entries(
        &mut self,
        record_bytes: usize,
    ) -> anyhow::Result<Context> {
        const IMPORT: &str = "context-entries";
        self.budget.call(IMPORT)?;
        // The host's own view of the transcript, bounded by it; charged before the guest gets it.
        let context = self.services.context();
        let names: usize = context.tool_names.iter().map(String::len).sum();
        self.budget
            .charge(IMPORT, context.entries.len() * record_bytes + names)?;
        Ok(context)
    }

    /// Call ids of context entries (0.2 on): each answer is charged, and the request as a
    /// whole up front, so repeating references cannot make the host build more than the budget.
    pub(super) fn import_tool_call_ids(
        &mut self,
        entries: &[EntryRef],
    ) -> anyhow::Result<Result<Vec<Option<String>>, HostError>> {
        const IMPORT: &str = "tool-call-ids";
        self.budget.call(IMPORT)?;
        self.budget.charge(
            IMPORT,
            entries
                .len()
                .saturating_mul(std::mem::size_of::<Option<String>>()),
        )?;
        let ids = match self.services.tool_call_ids(entries) {
            Ok(ids) => ids,
            Err(e) => return Ok(Err(e)),
        };
        let bytes: usize = ids
            .iter()
            .map(|id| id.as_ref().map_or(0, String::len))
            .sum();
        self.budget.charge(IMPORT, bytes)?;
        Ok(Ok(ids))
    }

    pub(super) async fn import_read_entries(
        &mut self,
        entries: &[EntryRef],
    ) -> anyhow::Result<Result<Vec<Message>, HostError>> {
        const IMPORT: &str = "read-entries";
        self.budget.call(IMPORT)?;
        // Every message costs at least its record: a request that cannot fit is refused before
        // anything is built.
        self.budget.charge(
            IMPORT,
            entries.len().saturating_mul(std::mem::size_of::<Message>()),
        )?;
        let mut messages = Vec::with_capacity(entries.len());
        // One entry at a time, each charged as it is built: the host never holds more than the
        // budget plus one message, however many references (or repeats) the guest sends.
        for r in entries {
            let mut one = match self.services.read_entries(std::slice::from_ref(r)) {
                Ok(one) => one,
                Err(e) => return Ok(Err(e)),
            };
            let extra: usize = one
                .iter()
                .map(|m| message_bytes(m) - std::mem::size_of::<Message>())
                .sum();
            self.budget.charge(IMPORT, extra)?;
            messages.append(&mut one);
        }
        Ok(Ok(messages))
    }

    pub(super) async fn import_delegate_compaction(
        &mut self,
        mut request: CompactRequest,
    ) -> anyhow::Result<Result<Option<Compaction>, HostError>> {
        const IMPORT: &str = "delegate-compaction";
        let window = self.slow_import_window(IMPORT)?;
        // Passed on to the summarizer: charged like the host's own output.
        let instructions = request.custom_instructions.as_ref().map_or(0, String::len);
        self.budget.charge(IMPORT, instructions)?;
        // The layer is chosen from what the model receives: the engine's own assembled size
        // when it reported one, not the raw transcript (a trimming engine would otherwise be
        // compacted at a layer meant for a context it never sends).
        let transcript_tokens = request.current_tokens;
        let steered = request.assembled_tokens.is_some();
        if let Some(assembled) = request.assembled_tokens {
            request.current_tokens = Some(assembled);
        }
        let services = self.services.clone();
        // The built-in compaction is synchronous work; on a blocking thread it cannot hold up
        // this call past its timeout (an abandoned run finishes there and is discarded).
        let work = async move {
            let run = tokio::task::spawn_blocking(move || {
                tokio::runtime::Handle::current().block_on(services.delegate_compaction(&request))
            });
            run.await.unwrap_or_else(|e| {
                Err(HostError::Failed(format!(
                    "the built-in compaction did not finish: {e}"
                )))
            })
        };
        let mut result = self.run_slow(IMPORT, window, work).await?;
        if let Ok(Some(c)) = &mut result {
            let bytes = c.summary.len() + c.details.as_ref().map_or(0, String::len);
            self.budget.charge(IMPORT, bytes)?;
            // What the compaction replaces is the transcript's context, and its tokens-after
            // counts the transcript's kept entries: the record's tokens-before is that
            // context's size, not the (smaller) assembled size that chose the layer, or a
            // trimming engine's delegated compaction would look like it grew the context.
            if let (true, Some(before)) = (steered, transcript_tokens) {
                c.tokens_before = c.tokens_before.max(before);
            }
        }
        Ok(result)
    }

    /// A recall search (0.3 on). Host time, like the slow imports: a first search may build the
    /// session's index; what it returns is charged before the guest gets it.
    pub(super) async fn import_search(
        &mut self,
        request: SearchRequest,
    ) -> anyhow::Result<Result<Vec<SearchHit>, HostError>> {
        const IMPORT: &str = "search";
        let window = self.slow_import_window(IMPORT)?;
        self.budget.charge(IMPORT, request.query.len())?;
        let services = self.services.clone();
        let result = self
            .run_slow(IMPORT, window, async move { services.search(&request) })
            .await?;
        if let Ok(hits) = &result {
            let bytes: usize = hits
                .iter()
                .map(|h| {
                    std::mem::size_of::<SearchHit>()
                        + h.entry_id.len()
                        + h.role.len()
                        + h.snippet.len()
                })
                .sum();
            self.budget.charge(IMPORT, bytes)?;
        }
        Ok(result)
    }

    pub(super) fn import_config(&mut self) -> anyhow::Result<String> {
        const IMPORT: &str = "config";
        self.budget.call(IMPORT)?;
        self.budget.charge(IMPORT, self.config_json.len())?;
        Ok(self.config_json.to_string())
    }

    pub(super) async fn import_complete(
        &mut self,
        request: CompletionRequest,
    ) -> anyhow::Result<Result<String, HostError>> {
        const IMPORT: &str = "complete";
        if !self.grants.llm {
            self.budget.call(IMPORT)?;
            self.log.denied(
                IMPORT,
                "denied `complete`: the engine was not granted the `llm` capability",
            );
            return Ok(Err(HostError::PermissionDenied(
                "`complete` needs the `llm` capability; the operator grants it in plugins.entries.<id>.grants".into(),
            )));
        }
        let window = self.slow_import_window(IMPORT)?;
        // The prompt goes on to the operator's model: charged before it is sent.
        let sent = request.prompt.len() + request.system.as_ref().map_or(0, String::len);
        self.budget.charge(IMPORT, sent)?;
        let services = self.services.clone();
        let work = async move {
            services
                .complete(
                    request.system.as_deref(),
                    &request.prompt,
                    request.max_tokens,
                )
                .await
        };
        let result = self.run_slow(IMPORT, window, work).await?;
        if let Ok(text) = &result {
            self.budget.charge(IMPORT, text.len())?;
        }
        Ok(result)
    }
}

/// How long a slow import may run: its own timeout, or less when the call's wall-time cap
/// comes first (`true`: the cap decides, and running out of it ends the call).
struct SlowWindow {
    limit: Duration,
    wall_bound: bool,
}

impl StoreState {
    fn slow_import_window(&mut self, import: &str) -> Result<SlowWindow, LimitExceeded> {
        self.budget.slow(import)?;
        let wall_left = self.clock.wall_remaining();
        if wall_left.is_zero() {
            return Err(self.clock.wall_exceeded());
        }
        Ok(SlowWindow {
            limit: self.import_timeout.min(wall_left),
            wall_bound: wall_left < self.import_timeout,
        })
    }

    /// Runs a slow import's work within its window; its time is host time, not guest time.
    async fn run_slow<T>(
        &mut self,
        import: &str,
        window: SlowWindow,
        work: impl Future<Output = Result<T, HostError>>,
    ) -> Result<Result<T, HostError>, LimitExceeded> {
        let since = self.clock.enter_host();
        let outcome = tokio::time::timeout(window.limit, work).await;
        self.clock.add_host_time(since);
        match outcome {
            Ok(result) => Ok(result),
            Err(_) if window.wall_bound => Err(self.clock.wall_exceeded()),
            Err(_) => Ok(Err(timed_out(import, self.import_timeout))),
        }
    }
}

fn timed_out(import: &str, after: Duration) -> HostError {
    HostError::Unavailable(format!("`{import}` timed out after {after:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_stop_at_their_limit_name_it_and_reset_per_call() {
        let limits = Limits {
            import_bytes_per_call: 100,
            import_calls_per_call: 3,
            slow_imports_per_call: 1,
            ..Limits::default()
        };
        let mut budget = ImportBudget::new(&limits);
        budget.charge("config", 100).unwrap();
        let err = budget.charge("read-entries", 1).unwrap_err().message;
        assert!(err.contains("`read-entries`"), "{err}");
        assert!(err.contains("importBytesPerCall"), "{err}");
        budget.reset();
        budget.slow("complete").unwrap();
        let err = budget.slow("delegate-compaction").unwrap_err().message;
        assert!(err.contains("slowImportsPerCall"), "{err}");
        budget.reset();
        for _ in 0..3 {
            budget.call("log").unwrap();
        }
        let err = budget.call("log").unwrap_err().message;
        assert!(err.contains("importCallsPerCall"), "{err}");
    }
}
