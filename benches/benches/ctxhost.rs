//! Criterion benches of the BENCHMARKS.md rows that criterion can time: `cargo bench -p
//! ctxhost-benches` (filter with `cargo bench -p ctxhost-benches -- assemble`). The table,
//! the RSS row and the pi comparison come from `bench-table` (see the README).
//!
//! The engine-call benches here pay a tokio `block_on` per iteration (a few hundred ns to a
//! few µs); `bench-table` times the same calls inside one async loop, so its figures are the
//! ones BENCHMARKS.md quotes.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use ctxhost::runtime::contract::SessionIdentity;
use ctxhost::runtime::{Detached, RuntimeOptions, SessionServices};
use ctxhost_benches::{self as b, Fixture};
use ctxhost_sdk::ContextEngine;
use ctxhost_transcript::Transcript;
use ctxhost_transcript::compaction::{self, Extractive, Settings};

fn session() -> SessionIdentity {
    SessionIdentity {
        id: "00000000-0000-4000-8000-000000000000".into(),
        key: "agent:main:bench".into(),
    }
}

fn load(c: &mut Criterion) {
    let mut g = c.benchmark_group("load");
    g.sample_size(10);
    let runtime = ctxhost::runtime::Runtime::new(&RuntimeOptions::default()).unwrap();
    g.bench_function("compile_cold_legacy", |b| {
        b.iter(|| {
            runtime
                .compile("bundled:legacy", ctxhost::plugins::LEGACY_WASM)
                .unwrap()
        })
    });
    g.finish();

    let dir = tempfile::tempdir().unwrap();
    let cached = ctxhost::runtime::Runtime::new(&RuntimeOptions {
        cache_dir: Some(dir.path().to_path_buf()),
        ..RuntimeOptions::default()
    })
    .unwrap();
    cached
        .compile("bundled:legacy", ctxhost::plugins::LEGACY_WASM)
        .unwrap();
    c.bench_function("load/cached_legacy", |b| {
        b.iter(|| {
            cached
                .compile("bundled:legacy", ctxhost::plugins::LEGACY_WASM)
                .unwrap()
        })
    });
}

fn engine_calls(c: &mut Criterion) {
    let rt = b::tokio_runtime();
    let fx = Fixture::new().unwrap();
    let engine = rt.block_on(fx.engine("legacy")).unwrap();
    let services: Arc<dyn SessionServices> = Arc::new(Detached);

    c.bench_function("instance/new_legacy", |b| {
        b.to_async(&rt).iter_batched(
            || (session(), services.clone()),
            |(session, services)| {
                let engine = engine.clone();
                async move { engine.instantiate(session, services).await.unwrap() }
            },
            BatchSize::SmallInput,
        )
    });

    let mut instance = rt.block_on(b::detached_instance(&engine)).unwrap();
    let message = b::message_2kb();
    c.bench_function("ingest/2kb_legacy", |b| {
        b.iter(|| {
            rt.block_on(instance.ingest(black_box(&message), false))
                .unwrap()
        })
    });

    let t = Transcript::load(&fx.generated).unwrap();
    let request = b::assemble_request(&t, 200_000);
    c.bench_function("assemble/2000_entries_legacy_wasm", |b| {
        b.iter(|| rt.block_on(instance.assemble(black_box(&request))).unwrap())
    });
    let native = b::sdk_assemble_request(&request);
    c.bench_function("assemble/2000_entries_legacy_native", |b| {
        b.iter_batched(
            || native.clone(),
            |request| ctxhost_legacy::Legacy.assemble(request).unwrap(),
            BatchSize::SmallInput,
        )
    });
    let mut session = rt
        .block_on(fx.generated_session("legacy", "criterion-assemble"))
        .unwrap();
    c.bench_function("assemble/2000_entries_session", |b| {
        b.iter(|| rt.block_on(session.assemble(&Default::default())).unwrap())
    });
}

fn compaction_and_checkpoints(c: &mut Criterion) {
    let fx = Fixture::new().unwrap();
    let t = Transcript::load(&fx.generated_200k).unwrap();
    let settings = Settings::default();
    c.bench_function("compaction/runtime_extractive_200k", |b| {
        b.iter(|| {
            compaction::prepare(&t, &settings, &compaction::Request::default())
                .unwrap()
                .run(&Extractive)
        })
    });
    c.bench_function("compaction/prepare_200k", |b| {
        b.iter(|| compaction::prepare(&t, &settings, &compaction::Request::default()).unwrap())
    });
    let mut g = c.benchmark_group("checkpoint");
    g.sample_size(20).measurement_time(Duration::from_secs(5));
    g.bench_function("write_native", |b| {
        b.iter_custom(|iters| {
            let budget = b::Budget::exactly(iters);
            let (samples, _) = b::checkpoint_write(&fx, budget).unwrap();
            samples.0.iter().sum()
        })
    });
    g.finish();
}

fn transcripts(c: &mut Criterion) {
    let mut g = c.benchmark_group("transcript");
    g.sample_size(10);
    let status = b::status_file().unwrap();
    g.bench_function("status_1gb", |b| {
        b.iter(|| ctxhost_transcript::status::scan(&status).unwrap())
    });
    match b::shared_transcript() {
        Some(path) => {
            g.bench_function("full_load_shared", |b| {
                b.iter(|| {
                    let t = Transcript::load(&path).unwrap();
                    black_box(t.active_branch());
                    t
                })
            });
            let rt = b::tokio_runtime();
            let fx = Fixture::new().unwrap();
            for engine in ["legacy", "checkpoint-manager"] {
                g.bench_function(format!("replay_shared_32k_{engine}"), |b| {
                    b.iter_custom(|iters| {
                        let budget = b::Budget::exactly(iters);
                        let run = rt
                            .block_on(b::replay(&fx, &path, engine, b::REPLAY_WINDOW, budget))
                            .unwrap();
                        run.samples.0.iter().sum()
                    })
                });
            }
        }
        None => eprintln!(
            "skipped: full load and replay need ../shared/data/pi-large-session.jsonl, absent in this checkout"
        ),
    }
    g.finish();
}

/// The lossless engine's `assemble` on the same 2,000 entries: natively (its logic alone) and
/// through `Session::assemble` (the bundled guest, the host's side included).
fn lossless(c: &mut Criterion) {
    let fx = Fixture::new().unwrap();
    let mut built = b::lossless::Built::new(&fx).unwrap();
    c.bench_function("assemble/2000_entries_lossless_native", |b| {
        b.iter(|| black_box(built.assemble()))
    });
    let rt = b::tokio_runtime();
    let mut session = rt
        .block_on(fx.generated_session("lossless", "criterion-lossless"))
        .unwrap();
    c.bench_function("assemble/2000_entries_lossless_session", |b| {
        b.iter(|| rt.block_on(session.assemble(&Default::default())).unwrap())
    });
}

criterion_group!(
    benches,
    load,
    engine_calls,
    lossless,
    compaction_and_checkpoints,
    transcripts
);
criterion_main!(benches);
