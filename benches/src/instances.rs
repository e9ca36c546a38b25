//! Instances of engines written in other languages: the Python and JavaScript examples
//! (`examples/python-tool-trim`, `examples/javascript-turn-budget`), whose components carry an
//! interpreter (12-18 MB) and a snapshot of its heap. Their build scripts put them where
//! `foreign_component` looks; the rows are skipped, with the command to run, when absent.

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use ctxhost::runtime::{
    Detached, EngineSpec, Grants, Limits, PreparedEngine, Runtime, RuntimeOptions, SessionServices,
};

use crate::{Budget, Sampler, Samples, bench_session};

/// An example engine in another language: its id, component file name and build command.
pub struct ForeignEngine {
    pub language: &'static str,
    pub id: &'static str,
    pub file: &'static str,
    pub build: &'static str,
}

pub const FOREIGN_ENGINES: &[ForeignEngine] = &[
    ForeignEngine {
        language: "Python",
        id: "tool-trim",
        file: "tool_trim.wasm",
        build: "bash examples/python-tool-trim/build.sh target/foreign-engines/out/tool_trim.wasm",
    },
    ForeignEngine {
        language: "JavaScript",
        id: "turn-budget",
        file: "turn_budget.wasm",
        build: "bash examples/javascript-turn-budget/build.sh target/foreign-engines/out/turn_budget.wasm",
    },
];

/// Where the examples' components are built to (the integration tests build them there too).
pub fn foreign_out_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::workspace().join("target"));
    target.join("foreign-engines/out")
}

/// The built component of `engine`, when it was built.
pub fn foreign_component(engine: &ForeignEngine) -> Option<PathBuf> {
    let path = foreign_out_dir().join(engine.file);
    path.is_file().then_some(path)
}

/// A runtime with a compile cache in `dir`, and `bytes` loaded in it as engine `id` (compiled
/// once into the cache, then loaded from it as every later process would).
pub async fn prepared(
    dir: &std::path::Path,
    id: &str,
    bytes: &[u8],
) -> Result<(Runtime, Arc<PreparedEngine>)> {
    let runtime = Runtime::new(&RuntimeOptions {
        cache_dir: Some(dir.join("cache")),
        ..RuntimeOptions::default()
    })?;
    runtime.compile(id, bytes)?;
    let spec = EngineSpec {
        id: id.to_string(),
        origin: id.to_string(),
        state_dir: dir.join("state").join(id),
        config_json: "{}".into(),
        limits: Limits::default(),
        grants: Grants::default(),
    };
    let engine = runtime
        .prepare(spec, bytes)
        .await
        .with_context(|| format!("loading {id}"))?;
    Ok((runtime, engine))
}

/// New instance of a warm engine loaded from `path`, as `instantiate` measures legacy's:
/// `PreparedEngine::instantiate`, the drop after the clock.
pub async fn instantiate_component(
    id: &str,
    path: &std::path::Path,
    budget: Budget,
) -> Result<Samples> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let dir = tempfile::tempdir()?;
    let (_runtime, engine) = prepared(dir.path(), id, &bytes).await?;
    let services: Arc<dyn SessionServices> = Arc::new(Detached);
    let mut s = Sampler::new(budget);
    while s.more() {
        let services = services.clone();
        let t = Instant::now();
        let instance = engine.instantiate(bench_session(), services).await?;
        s.push(t.elapsed());
        drop(black_box(instance));
    }
    Ok(s.done())
}
