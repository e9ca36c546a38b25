//! Fixtures and measurements shared by the criterion benches (`cargo bench -p ctxhost-benches`)
//! and the table command (`cargo run --release -p ctxhost-benches --bin bench-table`).
//!
//! Every measurement here is one named operation with a documented clock: what runs between
//! `Instant::now()` and `elapsed()`, and what was prepared before. BENCHMARKS.md quotes them.

pub mod compacting;
pub mod continuity;
pub mod instances;
pub mod lossless;
pub mod probes;
pub mod recall;
pub mod scale;
pub mod serve;

use std::hint::black_box;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use ctxhost::config::{Config, Home};
use ctxhost::runtime::contract as c;
use ctxhost::runtime::{
    Detached, EngineInstance, LoadSource, PreparedEngine, Runtime, RuntimeOptions, SessionServices,
};
use ctxhost::{AssembleOptions, Host, Session, SessionOptions, SessionTarget};
use ctxhost_transcript::compaction::{self, Extractive, Settings};
use ctxhost_transcript::{Entry, Role, Transcript};

/// The generated session of the assemble rows: 2,000 messages (`generate::coding_session`; it
/// carries ~488k tokens: `assemble` sees only entry triples, so its cost follows the entries).
pub const SESSION_MESSAGES: usize = 2000;
/// The generated ~200k-token session of the compaction, checkpoint and peer rows: 850
/// messages, 200,381 tokens by the transcript's rule, 1.13 MB.
pub const SESSION_200K_MESSAGES: usize = 850;
pub const SESSION_SEED: u64 = 7;
/// The context window of the replay rows.
pub const REPLAY_WINDOW: u64 = 32_000;

/// The generated 2,000-message session as JSONL.
pub fn generated_session() -> String {
    ctxhost_transcript::generate::coding_session(SESSION_SEED, SESSION_MESSAGES)
}

/// The generated ~200k-token session as JSONL.
pub fn generated_200k() -> String {
    ctxhost_transcript::generate::coding_session(SESSION_SEED, SESSION_200K_MESSAGES)
}

/// The generated 2,000-message session's messages, as a runtime would hold them.
pub fn generated_messages() -> Vec<serde_json::Value> {
    generated_messages_of(SESSION_MESSAGES)
}

/// The messages of a generated session of `count` messages (the same generator and seed).
pub fn generated_messages_of(count: usize) -> Vec<serde_json::Value> {
    let text = ctxhost_transcript::generate::coding_session(SESSION_SEED, count);
    let transcript = Transcript::parse(&text, "generated").expect("generated session");
    transcript
        .entries()
        .iter()
        .filter(|e| e.entry_type() == "message")
        .map(|e| serde_json::from_str(&e.message_json()).expect("message JSON"))
        .collect()
}

/// `../shared/data/pi-large-session.jsonl` beside the workspace, when present.
pub fn shared_transcript() -> Option<PathBuf> {
    let path = workspace()
        .parent()?
        .join("shared/data/pi-large-session.jsonl");
    path.is_file().then_some(path)
}

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("benches/ sits in the workspace")
        .to_path_buf()
}

/// Where generated inputs that are expensive to make (the 1 GB transcript) are kept between
/// runs: `target/ctxhost-bench/`, never inside the sources.
pub fn data_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"));
    target.join("ctxhost-bench")
}

// ---------------------------------------------------------------------------------------------
// Sampling

/// Per-iteration durations of one measurement.
#[derive(Debug, Clone, Default)]
pub struct Samples(pub Vec<Duration>);

impl Samples {
    fn sorted(&self) -> Vec<Duration> {
        let mut v = self.0.clone();
        v.sort_unstable();
        v
    }
    pub fn median(&self) -> Duration {
        self.percentile(50.0)
    }
    pub fn percentile(&self, p: f64) -> Duration {
        let v = self.sorted();
        if v.is_empty() {
            return Duration::ZERO;
        }
        let i = ((p / 100.0) * (v.len() - 1) as f64).round() as usize;
        v[i.min(v.len() - 1)]
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// How long to sample: at least `min` iterations, then until `budget` has passed or `max`
/// iterations were taken; the first `warmup` iterations are discarded.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub warmup: usize,
    pub min: usize,
    pub max: usize,
    pub time: Duration,
}

impl Budget {
    /// Exactly `samples` samples and no warm-up: what criterion's `iter_custom` asks for.
    pub fn exactly(samples: u64) -> Budget {
        let samples = usize::try_from(samples).unwrap_or(usize::MAX);
        Budget {
            warmup: 0,
            min: samples,
            max: samples,
            time: Duration::ZERO,
        }
    }

    /// At most 200 samples (20 warm-up): for a measurement whose session grows by one message
    /// per sample, so it stays within 10% of its starting size.
    pub fn growing(self) -> Budget {
        Budget {
            warmup: self.warmup.min(20),
            min: self.min.min(200),
            max: self.max.min(200),
            ..self
        }
    }

    /// Microsecond operations: thousands of samples.
    pub const FAST: Budget = Budget {
        warmup: 200,
        min: 2000,
        max: 20_000,
        time: Duration::from_secs(2),
    };
    /// Millisecond operations.
    pub const MEDIUM: Budget = Budget {
        warmup: 3,
        min: 30,
        max: 2000,
        time: Duration::from_secs(3),
    };
    /// Operations of a second or so.
    pub const SLOW: Budget = Budget {
        warmup: 1,
        min: 5,
        max: 20,
        time: Duration::from_secs(15),
    };

    /// A budget shrunk for a smoke run (`BENCH_QUICK=1`): every code path, few samples.
    pub fn quick(self) -> Budget {
        Budget {
            warmup: self.warmup.min(1),
            min: (self.min / 20).max(2),
            max: (self.max / 20).max(2),
            time: self.time / 10,
        }
    }

    pub fn from_env(self) -> Budget {
        if std::env::var_os("BENCH_QUICK").is_some_and(|v| v != "0") {
            self.quick()
        } else {
            self
        }
    }
}

/// A sampling loop: `while s.more() { let t = Instant::now(); op; s.push(t.elapsed()); }`, for
/// measurements that set up or check something around the clock; [`Sampler::time`] is the
/// loop for the ones that time one call.
pub struct Sampler {
    budget: Budget,
    started: Instant,
    seen: usize,
    samples: Vec<Duration>,
}

impl Sampler {
    pub fn new(budget: Budget) -> Self {
        Self {
            budget,
            started: Instant::now(),
            seen: 0,
            samples: Vec::new(),
        }
    }
    pub fn more(&self) -> bool {
        let taken = self.samples.len();
        if self.seen < self.budget.warmup || taken < self.budget.min {
            return true;
        }
        taken < self.budget.max && self.started.elapsed() < self.budget.time
    }
    pub fn push(&mut self, d: Duration) {
        self.seen += 1;
        if self.seen > self.budget.warmup {
            self.samples.push(d);
        }
    }
    pub fn done(self) -> Samples {
        Samples(self.samples)
    }

    /// Times `op` alone under `budget`; its result is kept from the optimiser and dropped after
    /// the clock. The first error ends the measurement.
    pub fn time<T, E>(budget: Budget, mut op: impl FnMut() -> Result<T, E>) -> Result<Samples>
    where
        anyhow::Error: From<E>,
    {
        let mut s = Sampler::new(budget);
        while s.more() {
            let t = Instant::now();
            let result = op()?;
            s.push(t.elapsed());
            black_box(result);
        }
        Ok(s.done())
    }

    /// [`Sampler::time`] of an async call.
    pub async fn time_async<T, E>(
        budget: Budget,
        mut op: impl AsyncFnMut() -> Result<T, E>,
    ) -> Result<Samples>
    where
        anyhow::Error: From<E>,
    {
        let mut s = Sampler::new(budget);
        while s.more() {
            let t = Instant::now();
            let result = op().await?;
            s.push(t.elapsed());
            black_box(result);
        }
        Ok(s.done())
    }
}

// ---------------------------------------------------------------------------------------------
// Fixture

/// A scratch `CTXHOST_HOME` with default config, a host over it (pooling, component cache in
/// the home), and the generated sessions written into it.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub host: Host,
    /// The generated 2,000-message session (sessions get a copy of it).
    pub generated: PathBuf,
    /// The generated ~200k-token session.
    pub generated_200k: PathBuf,
}

impl Fixture {
    pub fn new() -> Result<Self> {
        let dir = tempfile::tempdir()?;
        let home = Home::new(dir.path().join("home"));
        std::fs::create_dir_all(home.root())?;
        install(
            &home,
            LEGACY_0_1,
            Path::new(ctxhost_tests::CONTRACT_V0_1_WASM),
        )?;
        install(
            &home,
            FROZEN_0_3,
            Path::new(ctxhost_tests::CONTRACT_V0_3_WASM),
        )?;
        let config = Config::defaults(&home);
        let host = Host::new(home, config)?;
        let generated = dir.path().join("generated-2000.jsonl");
        std::fs::write(&generated, generated_session())?;
        let generated_200k = dir.path().join("generated-200k.jsonl");
        std::fs::write(&generated_200k, self::generated_200k())?;
        Ok(Self {
            dir,
            host,
            generated,
            generated_200k,
        })
    }

    pub async fn engine(&self, id: &str) -> Result<Arc<PreparedEngine>> {
        Ok(self.host.engine(id).await?)
    }

    /// A copy of the generated session under a fresh name.
    pub fn generated_copy(&self, name: &str) -> Result<PathBuf> {
        let path = self.dir.path().join(format!("{name}.jsonl"));
        std::fs::copy(&self.generated, &path)?;
        Ok(path)
    }

    /// A session on `engine` over a copy of the generated 2,000-message transcript.
    pub async fn generated_session(&self, engine: &str, name: &str) -> Result<Session> {
        let path = self.generated_copy(name)?;
        let engine = self.engine(engine).await?;
        Ok(self
            .host
            .open_session(&SessionTarget::Path(path), &SessionOptions::on(engine))
            .await?)
    }
}

/// Installs a component as plugin `id` under `home` (manifest and component, no capabilities).
pub(crate) fn install(home: &Home, id: &str, wasm: &Path) -> Result<()> {
    let dir = home.plugins_dir().join(id);
    std::fs::create_dir_all(&dir)?;
    let file = format!("{}.wasm", id.replace('-', "_"));
    std::fs::copy(wasm, dir.join(&file)).with_context(|| format!("copy {}", wasm.display()))?;
    let manifest = serde_json::json!({
        "id": id, "name": id, "version": "0.1.0", "kind": "context-engine",
        "component": file, "capabilities": [], "configSchema": {}
    });
    std::fs::write(dir.join("ctxhost.plugin.json"), manifest.to_string())?;
    Ok(())
}

/// A tokio runtime like an embedding agent runtime's (multi-threaded, 2 workers).
pub fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn bench_session() -> c::SessionIdentity {
    c::SessionIdentity {
        id: "00000000-0000-4000-8000-000000000000".into(),
        key: "agent:main:bench".into(),
    }
}

/// A detached instance (no transcript behind it) of a loaded engine.
pub async fn detached_instance(engine: &PreparedEngine) -> Result<EngineInstance> {
    let services: Arc<dyn SessionServices> = Arc::new(Detached);
    Ok(engine.instantiate(bench_session(), services).await?)
}

// ---------------------------------------------------------------------------------------------
// Contract values built from a transcript (the host's own conversion is private to it)

pub fn sdk_role(role: Role) -> ctxhost_sdk::Role {
    match role {
        Role::User => ctxhost_sdk::Role::User,
        Role::Assistant => ctxhost_sdk::Role::Assistant,
        Role::ToolResult => ctxhost_sdk::Role::ToolResult,
        Role::BashExecution => ctxhost_sdk::Role::BashExecution,
        Role::Custom => ctxhost_sdk::Role::Custom,
        Role::BranchSummary => ctxhost_sdk::Role::BranchSummary,
        Role::CompactionSummary => ctxhost_sdk::Role::CompactionSummary,
    }
}

/// The `assemble` request the host builds for this transcript (same entries, roles, tokens,
/// and the tool facts of tool results, which a 0.1 engine's conversion drops).
pub fn assemble_request(t: &Transcript, context_window: u32) -> c::AssembleRequest {
    c::AssembleRequest {
        session: bench_session(),
        token_budget: None,
        context_window,
        context_tokens: u32::try_from(t.context_tokens()).unwrap_or(u32::MAX),
        available_tools: Vec::new(),
        context: std::sync::Arc::new(ctxhost::session::context_of(t)),
        // Unknown: a 0.4 engine is sent the whole context on every call.
        context_revision: 0,
        model: None,
        prompt: None,
    }
}

/// The same request in the SDK's types (what a natively compiled engine receives).
pub fn sdk_assemble_request(request: &c::AssembleRequest) -> ctxhost_sdk::AssembleRequest {
    ctxhost_sdk::AssembleRequest {
        session: ctxhost_sdk::Session {
            id: request.session.id.clone(),
            key: request.session.key.clone(),
        },
        token_budget: request.token_budget,
        context_window: request.context_window,
        context_tokens: request.context_tokens,
        available_tools: request.available_tools.clone(),
        entries: request
            .context
            .entries
            .iter()
            .map(|e| ctxhost_sdk::ContextEntry {
                entry: e.entry,
                role: match e.role {
                    c::Role::User => ctxhost_sdk::Role::User,
                    c::Role::Assistant => ctxhost_sdk::Role::Assistant,
                    c::Role::ToolResult => ctxhost_sdk::Role::ToolResult,
                    c::Role::BashExecution => ctxhost_sdk::Role::BashExecution,
                    c::Role::Custom => ctxhost_sdk::Role::Custom,
                    c::Role::BranchSummary => ctxhost_sdk::Role::BranchSummary,
                    c::Role::CompactionSummary => ctxhost_sdk::Role::CompactionSummary,
                },
                tokens: e.tokens,
                tool_name: request.context.tool_name(e).map(Into::into),
                is_error: e.is_error,
                pruned: e.pruned,
            })
            .collect(),
        model: request.model.clone(),
        prompt: request.prompt.clone(),
    }
}

/// An entry as the SDK's `Message` (what `ingest` hands an engine).
pub fn sdk_message(index: usize, entry: &Entry) -> Option<ctxhost_sdk::Message> {
    let view = entry.view()?;
    Some(ctxhost_sdk::Message {
        entry: index as u32,
        entry_id: entry.id().to_string(),
        role: sdk_role(view.role),
        timestamp: view.timestamp,
        text: view.text,
        tool_calls: view
            .tool_calls
            .into_iter()
            .map(|call| ctxhost_sdk::ToolCall {
                id: call.id,
                name: call.name,
                arguments: call.arguments,
            })
            .collect(),
        tool_call_id: (view.role == Role::ToolResult)
            .then(|| {
                let message: serde_json::Value =
                    serde_json::from_str(&entry.message_json()).unwrap_or_default();
                message["toolCallId"].as_str().map(str::to_string)
            })
            .flatten(),
        tool_name: view.tool_name,
        is_error: view.is_error,
        stop_reason: view.stop_reason,
        usage: view.usage.map(|u| ctxhost_sdk::Usage {
            input: u.input,
            output: u.output,
            cache_read: u.cache_read,
            cache_write: u.cache_write,
            total_tokens: u.total_tokens,
        }),
        tokens: view.tokens,
        json: entry.message_json().into_owned(),
    })
}

/// A typical 2 KB user message as AgentMessage JSON (its text is ~2,000 bytes).
pub fn message_2kb_json() -> serde_json::Value {
    let sentence = "Please refactor the request handler in src/server/routes.rs so that errors carry the request id, then run the tests. ";
    let mut text = String::new();
    while text.len() < 2000 {
        text.push_str(sentence);
    }
    text.truncate(2000);
    serde_json::json!({
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "timestamp": 1_763_681_581_544u64,
    })
}

/// The same message as the contract's `Message`, as the host hands it to `ingest`.
pub fn message_2kb() -> c::Message {
    let json = message_2kb_json();
    let text = json["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_string();
    c::Message {
        entry: 2,
        entry_id: "a1b2c3d4".into(),
        role: c::Role::User,
        timestamp: 1_763_681_581_544,
        tokens: (json.to_string().len() / 4) as u32,
        text,
        tool_calls: Vec::new(),
        tool_name: None,
        tool_call_id: None,
        is_error: false,
        stop_reason: None,
        usage: None,
        json: json.to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// Measurements

/// Cold compile of the legacy component: `Runtime::compile` with no cache (header check +
/// cranelift compilation of the whole component). The runtime is created before the clock.
pub fn compile_cold(budget: Budget) -> Result<Samples> {
    let runtime = Runtime::new(&RuntimeOptions::default())?;
    time_compile(&runtime, budget, LoadSource::Compiled)
}

/// `Runtime::compile` of the legacy component, timed; every load must have come from
/// `expected` (a cold runtime compiles, a warm one reads its cache).
fn time_compile(runtime: &Runtime, budget: Budget, expected: LoadSource) -> Result<Samples> {
    let mut s = Sampler::new(budget);
    while s.more() {
        let t = Instant::now();
        let (component, source) =
            runtime.compile("bundled:legacy", ctxhost::plugins::LEGACY_WASM)?;
        s.push(t.elapsed());
        if source != expected {
            bail!("expected a load from {expected:?}, got {source:?}");
        }
        black_box(component);
    }
    Ok(s.done())
}

/// Cached load: `Runtime::compile` with the cache warm: hash the component for its cache key,
/// check the cache file's identity against its `.check`, `Component::deserialize_file` (mapped).
pub fn load_cached(budget: Budget) -> Result<Samples> {
    let (_dir, runtime) = warm_cache()?;
    time_compile(&runtime, budget, LoadSource::Cache)
}

/// A runtime whose cache, in the scratch folder returned with it, holds the legacy component.
fn warm_cache() -> Result<(tempfile::TempDir, Runtime)> {
    let dir = tempfile::tempdir()?;
    let runtime = Runtime::new(&RuntimeOptions {
        cache_dir: Some(dir.path().to_path_buf()),
        ..RuntimeOptions::default()
    })?;
    runtime.compile("bundled:legacy", ctxhost::plugins::LEGACY_WASM)?;
    Ok((dir, runtime))
}

/// The part of a cached load that is the cache's own work, not wasmtime's: hashing the
/// component for its cache key (blake3), then the file's metadata and its `.check` file (the
/// payload is trusted by identity, not re-hashed). Returns the cache file's size too.
pub fn cache_key_and_check(budget: Budget) -> Result<(Samples, u64)> {
    let (dir, _runtime) = warm_cache()?;
    let file = std::fs::read_dir(dir.path())?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .context("no cache file written")?;
    let check = file.with_extension("check");
    let size = std::fs::metadata(&file)?.len();
    let samples = Sampler::time(budget, || -> Result<_> {
        let key = blake3::hash(ctxhost::plugins::LEGACY_WASM);
        Ok((key, std::fs::metadata(&file)?, std::fs::read(&check)?))
    })?;
    Ok((samples, size))
}

/// New instance on a warm engine: `PreparedEngine::instantiate` (health check, WASI context
/// with the state dir preopened, `Store`, pooled instantiation). Dropping the instance (the
/// slot goes back to the pool) happens after the clock.
pub async fn instantiate(fx: &Fixture, budget: Budget) -> Result<Samples> {
    let engine = fx.engine("legacy").await?;
    let services: Arc<dyn SessionServices> = Arc::new(Detached);
    let mut s = Sampler::new(budget);
    while s.more() {
        let session = bench_session();
        let services = services.clone();
        let t = Instant::now();
        let instance = engine.instantiate(session, services).await?;
        s.push(t.elapsed());
        drop(instance);
    }
    Ok(s.done())
}

/// The filesystem part of an instantiation, approximated: `create_dir_all` of the engine's
/// state dir (it exists) and opening it (the WASI preopen), as `instantiate` does each time.
pub fn state_dir_syscalls(fx: &Fixture, budget: Budget) -> Result<Samples> {
    let dir = fx.dir.path().join("home/state/legacy");
    std::fs::create_dir_all(&dir)?;
    Sampler::time(budget, || {
        std::fs::create_dir_all(&dir)?;
        std::fs::File::open(&dir)
    })
}

/// `EngineInstance::ingest` of one 2 KB user message (text + JSON ≈ 4.3 KB lowered into the
/// guest) into a live legacy instance: deadline arming, the call, lifting the result.
pub async fn ingest(fx: &Fixture, budget: Budget) -> Result<Samples> {
    let engine = fx.engine("legacy").await?;
    let mut instance = detached_instance(&engine).await?;
    let message = message_2kb();
    Sampler::time_async(budget, async || instance.ingest(&message, false).await).await
}

/// `Session::append` of the same 2 KB message: transcript append, one write of the line and its
/// fsync (a session's default; `sync: false` only flushes), conversion, then `ingest`.
pub async fn session_append(fx: &Fixture, budget: Budget, sync: bool) -> Result<Samples> {
    let engine = fx.engine("legacy").await?;
    let path = fx.dir.path().join(format!("append-{sync}.jsonl"));
    let mut session = fx
        .host
        .open_session(&SessionTarget::Path(path), &SessionOptions::on(engine))
        .await?;
    session.set_sync(sync);
    let message = message_2kb_json();
    let samples = Sampler::time_async(budget, async || session.append(&message).await).await?;
    session.close().await?;
    Ok(samples)
}

/// The id the fixture installs the frozen 0.3 guest under (`tests/guests/contract-v0-3`: a
/// pass-through built against `wit/0.3.0`, sent the whole context on every call).
pub const FROZEN_0_3: &str = "v0-3-probe";

/// The id the fixture installs the 0.1 guest under (`tests/guests/contract-v0-1`: the legacy
/// engine as it was before 0.2, built against the frozen `wit/0.1.0`).
pub const LEGACY_0_1: &str = "legacy-0-1";

/// A guest's `assemble` on the generated session (2,000 entries): the engine call alone
/// (`EngineInstance::assemble` with a prebuilt request: converting it to the engine's contract
/// version, lowering it, the guest's plan, lifting the plan and expanding ranges). `legacy`
/// (0.2) gets the context as columns with the tool facts and answers with one `keep-range`;
/// [`LEGACY_0_1`] gets 2,000 entry records and answers with 2,000 `keep`s.
pub async fn assemble_call(fx: &Fixture, budget: Budget, engine: &str) -> Result<(Samples, usize)> {
    let t = Transcript::load(&fx.generated)?;
    let request = assemble_request(&t, 200_000);
    let engine = fx.engine(engine).await?;
    let mut instance = detached_instance(&engine).await?;
    let samples = Sampler::time_async(budget, async || instance.assemble(&request).await).await?;
    Ok((samples, request.context.entries.len()))
}

/// The engine call alone, as a turn makes it: one row appended to the context before each
/// call (untimed), under one context revision, so a 0.4 engine (`legacy`) is sent that row
/// and plans over the whole context its SDK keeps; an engine before 0.4 is sent the whole
/// context every time. Starts at the generated 2,000 entries; capped at 200 samples like
/// [`session_turn_assemble`].
pub async fn assemble_call_appending(
    fx: &Fixture,
    budget: Budget,
    engine: &str,
) -> Result<Samples> {
    let budget = budget.growing();
    let t = Transcript::load(&fx.generated)?;
    let mut request = assemble_request(&t, 200_000);
    request.context_revision = 1;
    let engine = fx.engine(engine).await?;
    let mut instance = detached_instance(&engine).await?;
    // The first call sends the whole context; the engine holds it from then on.
    instance.assemble(&request).await?;
    let mut next = t.entries().len() as u32;
    let mut s = Sampler::new(budget);
    while s.more() {
        // The request's context is not shared (the call only borrowed it): no copy here.
        std::sync::Arc::make_mut(&mut request.context)
            .entries
            .push(c::ContextEntry {
                entry: next,
                role: Role::User,
                tokens: 500,
                tool: 0,
                is_error: false,
                pruned: false,
            });
        next += 1;
        let t = Instant::now();
        let result = instance.assemble(&request).await;
        s.push(t.elapsed());
        black_box(result?);
    }
    Ok(s.done())
}

/// `Session::assemble` on a session over the generated transcript: the host's side too
/// (context walk, entries with their tool facts when the engine's contract carries them,
/// context size, the engine call, plan validation).
pub async fn session_assemble(fx: &Fixture, budget: Budget, engine: &str) -> Result<Samples> {
    let mut session = fx
        .generated_session(engine, &format!("assemble-{engine}"))
        .await?;
    let options = AssembleOptions::default();
    let samples = Sampler::time_async(budget, async || session.assemble(&options).await).await?;
    session.close().await?;
    Ok(samples)
}

/// `Session::assemble` as a turn calls it: one 2 KB message appended (untimed, without fsync)
/// before each assemble, so the host looks at what was appended since the last call (and a
/// 0.4 engine is sent that one row). The session starts at `messages` generated messages
/// (2,000: the fixture's; any other count is generated here) and grows by one per sample, so
/// the samples are capped at 200 (the context stays within 10% of its starting size).
pub async fn session_turn_assemble(
    fx: &Fixture,
    budget: Budget,
    engine: &str,
    messages: usize,
) -> Result<Samples> {
    let budget = budget.growing();
    let name = format!("assemble-turns-{engine}-{messages}");
    let mut session = if messages == SESSION_MESSAGES {
        fx.generated_session(engine, &name).await?
    } else {
        let path = fx.dir.path().join(format!("{name}.jsonl"));
        std::fs::write(
            &path,
            ctxhost_transcript::generate::coding_session(SESSION_SEED, messages),
        )?;
        let engine = fx.engine(engine).await?;
        fx.host
            .open_session(&SessionTarget::Path(path), &SessionOptions::on(engine))
            .await?
    };
    session.set_sync(false);
    let message = message_2kb_json();
    let options = AssembleOptions::default();
    let mut s = Sampler::new(budget);
    while s.more() {
        session.append(&message).await?;
        let t = Instant::now();
        let assembly = session.assemble(&options).await?;
        s.push(t.elapsed());
        black_box(assembly);
    }
    session.close().await?;
    Ok(s.done())
}

/// The legacy engine's `assemble`, compiled natively and called in-process on the same
/// request. The request is cloned before the clock (the engine takes it by value).
pub fn assemble_native(fx: &Fixture, budget: Budget) -> Result<Samples> {
    use ctxhost_sdk::ContextEngine;
    let t = Transcript::load(&fx.generated)?;
    let request = sdk_assemble_request(&assemble_request(&t, 200_000));
    let mut engine = ctxhost_legacy::Legacy;
    let mut s = Sampler::new(budget);
    while s.more() {
        let input = request.clone();
        let t = Instant::now();
        let result = engine.assemble(black_box(input));
        s.push(t.elapsed());
        black_box(result.map_err(|e| anyhow::anyhow!(e.into_message()))?);
    }
    Ok(s.done())
}

/// What a compaction measurement ran on.
#[derive(Debug, Clone)]
pub struct CompactionInfo {
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub layer: String,
    pub messages_compacted: usize,
}

/// Built-in compaction as `delegate-compaction` runs it: `compaction::prepare` (layer choice,
/// prune candidates, the cut) + `Job::run` with the extractive summarizer, on the loaded
/// generated ~200k-token session (loading is before the clock). Returns the whole and, from the
/// same runs, `prepare` alone.
pub fn builtin_compaction(
    fx: &Fixture,
    budget: Budget,
) -> Result<(Samples, Samples, CompactionInfo)> {
    let t = Transcript::load(&fx.generated_200k)?;
    let settings = Settings::default();
    let request = compaction::Request::default();
    let mut info = None;
    let mut s = Sampler::new(budget);
    let mut prepared = Sampler::new(budget);
    while s.more() {
        let start = Instant::now();
        let job = compaction::prepare(&t, &settings, &request)
            .map_err(|skip| anyhow::anyhow!("no compaction: {}", skip.reason))?;
        prepared.push(start.elapsed());
        let plan = job.run(&Extractive);
        s.push(start.elapsed());
        info.get_or_insert_with(|| CompactionInfo {
            tokens_before: plan.tokens_before,
            tokens_after: plan.tokens_after,
            layer: plan.layer.to_string(),
            messages_compacted: plan.messages_compacted,
        });
        black_box(plan);
    }
    Ok((s.done(), prepared.done(), info.context("no sample")?))
}

/// What a checkpoint measurement wrote.
#[derive(Debug, Clone)]
pub struct CheckpointInfo {
    pub yaml_bytes: usize,
    pub messages_ingested: usize,
}

/// The checkpoint-manager's state after ingesting the whole ~200k-token session natively.
fn checkpoint_state(
    fx: &Fixture,
    root: &Path,
) -> Result<(ctxhost_checkpoint_manager::session::SessionState, usize)> {
    use ctxhost_checkpoint_manager::config::Config as CmConfig;
    use ctxhost_checkpoint_manager::session::{SessionState, Start};
    let t = Transcript::load(&fx.generated_200k)?;
    let mut state = SessionState::open(
        root,
        Start {
            key: "agent:main:bench",
            session_file: &fx.generated_200k.display().to_string(),
            entry_count: Some(t.entries().len() as u32),
            leading_summary: None,
            config: CmConfig::default(),
        },
    );
    let mut ingested = 0;
    for (i, entry) in t.entries().iter().enumerate() {
        if let Some(message) = sdk_message(i, entry) {
            state.ingest(&message, 1_763_681_581_544 + i as u64);
            ingested += 1;
        }
    }
    let warnings = state.take_warnings();
    if !warnings.is_empty() {
        bail!("checkpoint-manager warnings: {warnings:?}");
    }
    Ok((state, ingested))
}

/// checkpoint-manager's checkpoint write, natively (`SessionState::write_checkpoint`, the
/// function `compact` runs before delegating): build the checkpoint from what was captured of
/// the ~200k-token session, serialize it as YAML, write it atomically (temp file, fsync,
/// rename), write `_latest.json` the same way, apply retention (5).
pub fn checkpoint_write(fx: &Fixture, budget: Budget) -> Result<(Samples, CheckpointInfo)> {
    use ctxhost_checkpoint_manager::checkpoint::Trigger;
    let root = tempfile::tempdir_in(fx.dir.path())?;
    let (mut state, ingested) = checkpoint_state(fx, root.path())?;
    let mut s = Sampler::new(budget);
    let mut now = 1_763_700_000_000u64;
    while s.more() {
        now += 1000;
        let t = Instant::now();
        let written = state.write_checkpoint(Trigger::Compaction, 150_000, false, now);
        s.push(t.elapsed());
        if !written {
            bail!("checkpoint not written: {:?}", state.take_warnings());
        }
    }
    let yaml = state
        .latest()
        .context("no checkpoint")?
        .to_yaml()
        .map_err(anyhow::Error::msg)?;
    Ok((
        s.done(),
        CheckpointInfo {
            yaml_bytes: yaml.len(),
            messages_ingested: ingested,
        },
    ))
}

/// The same checkpoint built and serialized, without touching the disk.
pub fn checkpoint_build_yaml(fx: &Fixture, budget: Budget) -> Result<Samples> {
    use ctxhost_checkpoint_manager::checkpoint::Trigger;
    let root = tempfile::tempdir_in(fx.dir.path())?;
    let (state, _) = checkpoint_state(fx, root.path())?;
    Sampler::time(budget, || {
        let checkpoint = state.build_checkpoint(Trigger::Compaction, 150_000, false, 1);
        checkpoint.to_yaml().map_err(anyhow::Error::msg)
    })
}

/// Full load of a transcript file: `Transcript::load` (read, parse, migrate v1/v2 to v3,
/// index) + `active_branch`.
pub fn full_load(path: &Path, budget: Budget) -> Result<Samples> {
    Sampler::time(budget, || {
        let transcript = Transcript::load(path)?;
        let branch = transcript.active_branch();
        anyhow::Ok((transcript, branch))
    })
}

/// One replay end to end.
#[derive(Debug, Clone)]
pub struct ReplayRun {
    pub samples: Samples,
    pub messages: usize,
    pub turns: usize,
    pub compactions: usize,
}

/// `ctxhost::replay::replay` of `source` at `window` on `engine`, wall clock of the whole call
/// (load the recording, open a new session, assemble before every assistant message, compact
/// when over the threshold, append + fsync every message, close). A fresh output file per run.
pub async fn replay(
    fx: &Fixture,
    source: &Path,
    engine: &str,
    window: u64,
    budget: Budget,
) -> Result<ReplayRun> {
    let engine = fx.engine(engine).await?;
    let mut s = Sampler::new(budget);
    let mut report = None;
    let mut run = 0;
    while s.more() {
        run += 1;
        let output = fx
            .dir
            .path()
            .join(format!("replay-{}-{run}.jsonl", engine.id()));
        let t = Instant::now();
        let r = ctxhost::replay::replay(&fx.host, source, engine.clone(), window, &output, &mut ())
            .await?;
        s.push(t.elapsed());
        let _ = std::fs::remove_file(&output);
        report = Some(r);
    }
    let report = report.context("no replay ran")?;
    Ok(ReplayRun {
        samples: s.done(),
        messages: report.messages,
        turns: report.turns,
        compactions: report.compactions.len(),
    })
}

// ---------------------------------------------------------------------------------------------
// `context status` on a 1 GB transcript

/// What the status file holds.
pub const STATUS_FILE_BYTES: u64 = 1 << 30;
/// The latest compaction sits this far from the end (well inside the final 10 MB).
pub const STATUS_TAIL_BYTES: u64 = 4 << 20;

/// The 1 GB transcript for the status row, made once and kept in `target/ctxhost-bench/`: the
/// generated session's entries repeated as one long chain (ids made unique per copy), with a
/// ctxhost compaction (details carrying its running count) ~4 MB before the end whose first
/// kept entry is ~1 MB before it.
pub fn status_file() -> Result<PathBuf> {
    let dir = data_dir();
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("status-1g-v1.jsonl");
    if path.metadata().is_ok_and(|m| m.len() >= STATUS_FILE_BYTES) {
        return Ok(path);
    }
    let tmp = dir.join("status-1g-v1.jsonl.tmp");
    write_status_file(&tmp)?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

fn write_status_file(path: &Path) -> Result<()> {
    let text = generated_session();
    let mut lines = text.lines();
    let header = lines.next().context("no header")?.to_string();
    // Each template line with its id and parent id.
    let mut template = Vec::new();
    for line in lines {
        let v: serde_json::Value = serde_json::from_str(line)?;
        let id = v["id"].as_str().context("entry without id")?.to_string();
        let parent = v["parentId"].as_str().map(str::to_string);
        template.push((line.to_string(), id, parent));
    }
    let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    out.write_all(header.as_bytes())?;
    out.write_all(b"\n")?;
    let mut written = header.len() as u64 + 1;
    let mut last_id: Option<String> = None;
    let compaction_at = STATUS_FILE_BYTES - STATUS_TAIL_BYTES;
    let mut kept_candidate: Option<(u64, String)> = None;
    let mut compaction_written = false;
    // The entry after the compaction hangs off it, so the compaction is on the active branch.
    let mut pending_parent: Option<String> = None;
    let mut copy = 0u32;
    while written < STATUS_FILE_BYTES {
        for (line, id, parent) in &template {
            let new_id = format!("{copy:05x}{id}");
            let new_parent = match (pending_parent.take(), parent) {
                (Some(compaction), _) => format!("\"parentId\":\"{compaction}\""),
                (None, Some(p)) => format!("\"parentId\":\"{copy:05x}{p}\""),
                (None, None) => match &last_id {
                    Some(last) => format!("\"parentId\":\"{last}\""),
                    None => "\"parentId\":null".to_string(),
                },
            };
            let old_parent = match parent {
                Some(p) => format!("\"parentId\":\"{p}\""),
                None => "\"parentId\":null".to_string(),
            };
            let mut line = line.replacen(
                &format!("\"id\":\"{id}\""),
                &format!("\"id\":\"{new_id}\""),
                1,
            );
            line = line.replacen(&old_parent, &new_parent, 1);
            out.write_all(line.as_bytes())?;
            out.write_all(b"\n")?;
            written += line.len() as u64 + 1;
            last_id = Some(new_id.clone());
            // A user message ~1 MB before the compaction is its first kept entry.
            if written + (1 << 20) >= compaction_at
                && kept_candidate.is_none()
                && line.contains("\"role\":\"user\"")
            {
                kept_candidate = Some((written, new_id.clone()));
            }
            if !compaction_written && written >= compaction_at {
                let first_kept = kept_candidate
                    .as_ref()
                    .map(|(_, id)| id.clone())
                    .context("no first kept entry")?;
                let compaction_id = format!("c{copy:04x}fff");
                let entry = serde_json::json!({
                    "type": "compaction",
                    "id": compaction_id,
                    "parentId": last_id,
                    "timestamp": "2025-06-01T12:00:00.000Z",
                    "summary": "## Goal\nKeep the handlers consistent.\n\n## Progress\n- [x] Refactored the routes\n",
                    "firstKeptEntryId": first_kept,
                    "tokensBefore": 180_000,
                    "details": {
                        "layer": "summarize", "trigger": "auto", "summarizer": "extractive",
                        "compactionCount": 412, "summaryCount": 412, "tokensAfter": 24_000,
                        "readFiles": [], "modifiedFiles": [],
                    },
                })
                .to_string();
                out.write_all(entry.as_bytes())?;
                out.write_all(b"\n")?;
                written += entry.len() as u64 + 1;
                last_id = Some(compaction_id.clone());
                pending_parent = Some(compaction_id);
                compaction_written = true;
            }
            if written >= STATUS_FILE_BYTES {
                break;
            }
        }
        copy += 1;
    }
    out.flush()?;
    Ok(())
}

/// `context status` as the CLI computes it: `status::scan` (backward scan from the end to the
/// latest compaction's first kept entry, parse of that tail, context size, count from the
/// compaction's details). The file is in the page cache (just written or read).
pub fn status_scan(
    path: &Path,
    budget: Budget,
) -> Result<(Samples, ctxhost_transcript::status::Status)> {
    let mut s = Sampler::new(budget);
    let mut last = None;
    while s.more() {
        // One status at a time, as the CLI holds it: the last one's warnings are not kept
        // through the next scan.
        drop(last.take());
        let t = Instant::now();
        let status = ctxhost_transcript::status::scan(path)?;
        s.push(t.elapsed());
        last = Some(status);
    }
    Ok((s.done(), last.context("no sample")?))
}

/// `context status` as the CLI runs it, keeping what it checked: one untimed status records
/// the file's verdict, and every timed one finds the file checked before (nothing appended).
pub fn status_scan_remembering(path: &Path, budget: Budget) -> Result<Samples> {
    const WINDOW: u64 = 200_000;
    let checked = tempfile::tempdir()?;
    let scan = || ctxhost_transcript::status::scan_remembering(path, WINDOW, checked.path());
    scan()?;
    Sampler::time(budget, scan)
}

/// Messages of the generated ~210 MB and ~1 GB sessions (never compacted, one linear branch).
pub const SESSION_210M_MESSAGES: usize = 160_000;
pub const SESSION_1G_MESSAGES: usize = 760_000;

/// A big generated session (`generate::coding_session`), written once to
/// `target/ctxhost-bench/` and kept: never inside the sources.
pub fn generated_file(name: &str, messages: usize) -> Result<PathBuf> {
    kept_file(name, || {
        ctxhost_transcript::generate::coding_session(SESSION_SEED, messages)
    })
}

// ---------------------------------------------------------------------------------------------
// Linear paths (issue 26): compaction of many short messages, status on every 1 GB shape

/// The sizes of the short-message sessions compacted: a path linear in the session takes
/// 8× as long at the last as at the first.
pub const SHORT_SESSION_MESSAGES: [usize; 4] = [25_000, 50_000, 100_000, 200_000];

/// A session of `messages` short messages (`generate::short_message_session`), written once to
/// `target/ctxhost-bench/` and kept.
pub fn short_session_file(messages: usize) -> Result<PathBuf> {
    kept_file(&format!("short-{}k.jsonl", messages / 1000), || {
        ctxhost_transcript::generate::short_message_session(SESSION_SEED, messages)
    })
}

/// The generated 1 GB session in another shape (`reshape` of its text), written once to
/// `target/ctxhost-bench/` under `name` and kept.
pub fn reshaped_1g_file(name: &str, reshape: impl FnOnce(&str) -> String) -> Result<PathBuf> {
    kept_file(name, || {
        let text = ctxhost_transcript::generate::coding_session(SESSION_SEED, SESSION_1G_MESSAGES);
        reshape(&text)
    })
}

/// `target/ctxhost-bench/NAME`, written with `text()` unless it is there already.
fn kept_file(name: &str, text: impl FnOnce() -> String) -> Result<PathBuf> {
    let dir = data_dir();
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(name);
    if path.is_file() {
        return Ok(path);
    }
    let tmp = dir.join(format!("{name}.tmp"));
    std::fs::write(&tmp, text())?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// A manual compaction as `ctxhost compact --dry-run` computes it with the extractive
/// summarizer: `compaction::prepare` + `Job::run` on the session at `path` (loaded before the
/// clock), default settings.
pub fn manual_compaction(path: &Path, budget: Budget) -> Result<(Samples, CompactionInfo)> {
    let t = Transcript::load(path)?;
    let settings = Settings::default();
    let request = compaction::Request::default();
    let mut info = None;
    let samples = Sampler::time(budget, || {
        let job = compaction::prepare(&t, &settings, &request)
            .map_err(|skip| anyhow::anyhow!("no compaction: {}", skip.reason))?;
        let plan = job.run(&Extractive);
        info.get_or_insert_with(|| CompactionInfo {
            tokens_before: plan.tokens_before,
            tokens_after: plan.tokens_after,
            layer: plan.layer.to_string(),
            messages_compacted: plan.messages_compacted,
        });
        anyhow::Ok(plan)
    })?;
    Ok((samples, info.context("no sample")?))
}

/// Peak resident set size of this process, in KiB (`VmHWM` of /proc/self/status).
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Full load throughput: MB/s of the median `full_load` of `path`.
pub fn load_throughput(path: &Path, budget: Budget) -> Result<(Samples, f64)> {
    let load = full_load(path, budget)?;
    let bytes = std::fs::metadata(path)?.len();
    let mb_s = bytes as f64 / 1e6 / load.median().as_secs_f64();
    Ok((load, mb_s))
}

// ---------------------------------------------------------------------------------------------
// The peer's steps, on the ctxhost side

/// ctxhost's figures for the steps the pi harness times, on one file.
#[derive(Debug, Clone)]
pub struct PeerSteps {
    /// `Transcript::load` + `active_branch`.
    pub load: Samples,
    /// `Transcript::context_tokens` (boundary loading + usage/estimate rule) on the loaded file.
    pub estimate: Samples,
    /// `compaction::prepare`: the context size, layer choice, prune candidates and the cut,
    /// with the messages to summarize gathered (no summarizing).
    pub prepare: Samples,
    /// load + prepare in one clock.
    pub total: Samples,
    /// `Entry::view` of every context entry: the message views prepare gathers for the
    /// summarizer (it gathers those before the cut), alone.
    pub views: Samples,
    pub context_tokens: u64,
    pub layer: String,
}

pub fn peer_steps(path: &Path, budget: Budget) -> Result<PeerSteps> {
    let settings = Settings::default();
    let request = compaction::Request::default();
    let load = full_load(path, budget)?;
    let t = Transcript::load(path)?;
    let estimate = Sampler::time(budget, || anyhow::Ok(t.context_tokens()))?;
    let mut layer = String::new();
    let mut s = Sampler::new(budget);
    while s.more() {
        let start = Instant::now();
        let job = compaction::prepare(&t, &settings, &request);
        s.push(start.elapsed());
        layer = match &job {
            Ok(job) => job.layer().to_string(),
            Err(skip) => format!("skipped: {}", skip.reason),
        };
        black_box(job.ok());
    }
    let prepare = s.done();
    let views = Sampler::time(budget, || {
        let views: Vec<_> = t
            .context()
            .iter()
            .filter_map(|&i| t.entries()[i].view())
            .collect();
        anyhow::Ok(views)
    })?;
    let total = Sampler::time(budget, || {
        let t = Transcript::load(path)?;
        let job = compaction::prepare(&t, &settings, &request).ok();
        anyhow::Ok((t, job))
    })?;
    Ok(PeerSteps {
        load,
        estimate,
        prepare,
        total,
        views,
        context_tokens: t.context_tokens(),
        layer,
    })
}

// ---------------------------------------------------------------------------------------------
// Idle sessions (run in a process of their own: RSS is per process)

/// Resident set size of this process, in KiB (`VmRSS` of /proc/self/status).
pub fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// RSS before and after opening `n` sessions on the legacy engine.
#[derive(Debug, Clone, Copy)]
pub struct IdleRss {
    pub sessions: usize,
    /// After the host started and legacy was loaded, before any session.
    pub before_kib: u64,
    pub after_kib: u64,
    pub open_time: Duration,
}

/// Opens `n` sessions (new transcripts, one legacy instance each, bootstrapped) and keeps them
/// open while RSS is read. The host uses its defaults (pooling allocator, 1,000 instances).
pub async fn idle_sessions(n: usize) -> Result<IdleRss> {
    let fx = Fixture::new()?;
    let engine = fx.engine("legacy").await?;
    // One session opened and closed first, so lazily initialised host state is not counted
    // as per-session cost.
    let warm = fx
        .host
        .open_session(
            &SessionTarget::Key("agent:main:warmup".into()),
            &SessionOptions::on(engine.clone()),
        )
        .await?;
    warm.close().await?;
    let before_kib = rss_kib().context("no /proc/self/status")?;
    let started = Instant::now();
    let mut sessions = Vec::with_capacity(n);
    for i in 0..n {
        let key = format!("agent:main:idle-{i}");
        sessions.push(
            fx.host
                .open_session(
                    &SessionTarget::Key(key),
                    &SessionOptions::on(engine.clone()),
                )
                .await?,
        );
    }
    let open_time = started.elapsed();
    let after_kib = rss_kib().context("no /proc/self/status")?;
    black_box(&sessions);
    drop(sessions);
    Ok(IdleRss {
        sessions: n,
        before_kib,
        after_kib,
        open_time,
    })
}

/// Formats a duration with a unit that fits it.
pub fn fmt_duration(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.1} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}
