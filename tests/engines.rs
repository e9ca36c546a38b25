//! Real guest components (the bundled legacy engine and the sliding-window example) loaded in
//! the embedded wasmtime, driven through the session API.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use ctxhost::runtime::LoadSource;
use ctxhost::runtime::contract::SessionIdentity;
use ctxhost::runtime::{
    Detached, EngineError, EngineSpec, FaultKind, Grants, Limits, Runtime, RuntimeOptions,
};
use ctxhost::transcript::Transcript;
use ctxhost::{AssembleOptions, AssembledItem, CompactOptions, SessionTarget};
use ctxhost_tests::{
    SLIDING_WINDOW_WASM, Scratch, block_on, last_compaction, open_session, recorded_messages,
    shared_transcript, transcript_tokens,
};
use serde_json::value::RawValue;

/// The `message` field of every message line, as the bytes in the file (extracted here
/// independently of the transcript crate).
fn raw_messages(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|line| {
            let fields: HashMap<String, Box<RawValue>> = serde_json::from_str(line).unwrap();
            let is_message = fields.get("type").map(|t| t.get()) == Some("\"message\"");
            is_message.then(|| fields["message"].get().to_string())
        })
        .collect()
}

#[test]
fn legacy_answers_info_ingest_assemble_and_compact() {
    let scratch = Scratch::new();
    let host = scratch.host("{}");
    let source = scratch.generated_transcript(1, 240);
    block_on(async {
        let engine = host.active_engine().await.unwrap();
        assert_eq!(engine.info().id, "legacy");
        assert!(!engine.info().owns_compaction);
        assert_eq!(engine.contract_version(), "0.4.0");

        let mut session = open_session(&host, SessionTarget::Key("agent:main:test".into())).await;
        let messages = recorded_messages(&source);
        for message in &messages {
            session.append(message).await.unwrap();
        }
        let assembly = session.assemble(&AssembleOptions::default()).await.unwrap();
        assert_eq!(assembly.kept(), messages.len());
        assert_eq!(assembly.inserted(), 0);
        let expected: u32 = transcript_tokens(&session);
        assert_eq!(assembly.estimated_tokens, expected);

        let outcome = session.compact(&CompactOptions::forced()).await.unwrap();
        assert!(outcome.compacted, "{outcome:?}");
        assert!(outcome.tokens_after < outcome.tokens_before, "{outcome:?}");

        let after = session.assemble(&AssembleOptions::default()).await.unwrap();
        let compaction_index = last_compaction(&session).expect("a compaction entry was written");
        assert_eq!(
            after.items().next(),
            Some(AssembledItem::Entry(compaction_index))
        );
        assert!(after.kept() < assembly.kept());
        assert!(after.estimated_tokens < assembly.estimated_tokens);
        let path = session.path().to_path_buf();
        session.close().await.unwrap();

        // The file on disk is a v3 transcript that loads back with the same boundary.
        let reloaded = Transcript::load(&path).unwrap();
        assert_eq!(reloaded.header().version(), 3);
        assert_eq!(reloaded.context()[0], compaction_index);
    });
}

fn assert_pass_through_is_byte_identical(scratch: &Scratch, source: &Path) {
    let host = scratch.host("{}");
    let expected = raw_messages(source);
    let copy = scratch.path("session.jsonl");
    std::fs::copy(source, &copy).unwrap();
    block_on(async {
        let mut session = open_session(&host, SessionTarget::Path(copy.clone())).await;
        let assembly = session.assemble(&AssembleOptions::default()).await.unwrap();
        let rendered = session.render(&assembly);
        assert_eq!(rendered.len(), expected.len());
        for (i, (got, want)) in rendered.iter().zip(&expected).enumerate() {
            assert_eq!(got, want, "message {i} differs");
        }
        session.close().await.unwrap();
    });
}

#[test]
fn pass_through_returns_byte_identical_messages_of_a_generated_transcript() {
    let scratch = Scratch::new();
    let source = scratch.generated_transcript(2, 300);
    assert_pass_through_is_byte_identical(&scratch, &source);
}

#[test]
fn pass_through_returns_byte_identical_messages_of_the_shared_transcript() {
    let Some(source) = shared_transcript("pass-through on the shared transcript") else {
        return;
    };
    let scratch = Scratch::new();
    assert_pass_through_is_byte_identical(&scratch, &source);
}

/// A batch with a message the transcript refuses (not JSON, not an object, no role) is refused
/// whole, naming that message's position, and writes nothing.
#[test]
fn a_batch_with_one_bad_message_names_it_and_writes_nothing() {
    let scratch = Scratch::new();
    let host = scratch.host("{}");
    block_on(async {
        let mut session = open_session(&host, SessionTarget::Key("batch".into())).await;
        session
            .append(&serde_json::json!({"role": "user", "content": "first"}))
            .await
            .unwrap();
        let before = std::fs::read(session.path()).unwrap();
        let entries = session.transcript().entries().len();
        let good = r#"{"role":"user","content":"fine"}"#;
        for (bad, problem) in [
            ("{not json", "not JSON"),
            ("[1, 2]", "must be a JSON object"),
            (r#"{"content":"x"}"#, "no \"role\""),
        ] {
            let err = session
                .append_texts_with(&[good, bad, good], None)
                .await
                .expect_err(bad);
            match &err {
                ctxhost::Error::InvalidMessage {
                    index,
                    problem: said,
                } => {
                    assert_eq!(*index, 1, "{err}");
                    assert!(said.contains(problem), "{bad}: {said}");
                }
                other => panic!("{bad}: {other:#}"),
            }
            assert_eq!(std::fs::read(session.path()).unwrap(), before, "{bad}");
            assert_eq!(session.transcript().entries().len(), entries, "{bad}");
        }
    });
}

#[test]
fn slot_defaults_to_legacy_and_names_unknown_engines() {
    let scratch = Scratch::new();
    scratch.install("sliding-window", Path::new(SLIDING_WINDOW_WASM));
    let host = scratch.host("{}");
    block_on(async {
        assert_eq!(host.active_engine().await.unwrap().id(), "legacy");
    });
    let host = scratch.host("{ plugins: { slots: { contextEngine: 'no-such-engine' } } }");
    let err = block_on(host.active_engine()).err().unwrap().to_string();
    assert!(err.contains("`no-such-engine`"), "{err}");
    assert!(
        err.contains("available: checkpoint-manager, legacy, lossless, sliding-window"),
        "{err}"
    );
    assert!(err.contains("plugins.slots.contextEngine"), "{err}");
}

#[test]
fn a_configured_example_engine_serves_the_session() {
    let scratch = Scratch::new();
    scratch.install("sliding-window", Path::new(SLIDING_WINDOW_WASM));
    let host = scratch.host(
        "{ plugins: { slots: { contextEngine: 'sliding-window' }, entries: { 'sliding-window': { config: { maxTokens: 3000 } } } } }",
    );
    let source = scratch.generated_transcript(3, 200);
    block_on(async {
        let engine = host.active_engine().await.unwrap();
        assert_eq!(engine.info().id, "sliding-window");
        let mut session = open_session(&host, SessionTarget::Key("window".into())).await;
        for message in recorded_messages(&source) {
            session.append(&message).await.unwrap();
        }
        let total: u32 = transcript_tokens(&session);
        assert!(total > 3000, "the generated session must exceed the window");
        let assembly = session.assemble(&AssembleOptions::default()).await.unwrap();
        let transcript = session.transcript();
        let kept_tokens: u32 = assembly
            .items()
            .filter_map(|item| match item {
                AssembledItem::Entry(i) => Some(transcript.entries()[i].tokens()),
                AssembledItem::Inserted(_) => None,
            })
            .sum();
        assert!(kept_tokens <= 3000, "kept {kept_tokens} tokens");
        assert!(assembly.kept() > 0);
        let note = assembly.items().find_map(|item| match item {
            AssembledItem::Inserted(json) => Some(json.to_string()),
            AssembledItem::Entry(_) => None,
        });
        let note = note.expect("a note about omitted messages");
        assert!(note.contains("omitted"), "{note}");
        drop(transcript);
        session.close().await.unwrap();
    });
}

#[test]
fn second_start_loads_the_precompiled_component_and_a_corrupt_cache_is_recompiled() {
    let scratch = Scratch::new();
    let load = || {
        let host = scratch.host("{}");
        block_on(async {
            let engine = host.engine("legacy").await.unwrap();
            assert_eq!(engine.info().id, "legacy");
            engine.load_source()
        })
    };
    assert_eq!(load(), LoadSource::Compiled);
    assert_eq!(load(), LoadSource::Cache);

    let cache_dir = scratch.home().cache_dir();
    let files: Vec<_> = std::fs::read_dir(&cache_dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let mut bytes = std::fs::read(&files[0]).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&files[0], &bytes).unwrap();

    assert_eq!(load(), LoadSource::Recompiled);
    assert_eq!(load(), LoadSource::Cache);
}

#[test]
fn a_component_of_another_contract_version_is_refused_by_name() {
    let scratch = Scratch::new();
    scratch.install("future", Path::new(ctxhost_tests::FUTURE_CONTRACT_WASM));
    let host = scratch.host("{ plugins: { slots: { contextEngine: 'future' } } }");
    let err = block_on(host.active_engine()).err().unwrap().to_string();
    assert!(err.contains("ctxhost:engine@0.9.0"), "{err}");
    assert!(
        err.contains("supported: 0.4.0, 0.3.0, 0.2.0, 0.1.0"),
        "{err}"
    );
    assert!(
        err.contains("future_contract_engine") || err.contains("future.wasm"),
        "{err}"
    );
}

#[test]
fn a_broken_selected_engine_is_an_error_unless_fallback_opts_into_legacy() {
    let scratch = Scratch::new();
    scratch.install("sliding-window", Path::new(SLIDING_WINDOW_WASM));
    // The selected engine cannot serve: it is disabled.
    let strict = "{ plugins: { slots: { contextEngine: 'sliding-window' }, entries: { 'sliding-window': { enabled: false } } } }";
    let host = scratch.host(strict);
    let err = block_on(host.active_engine()).err().unwrap().to_string();
    assert!(err.contains("`sliding-window` is disabled"), "{err}");

    let lenient = "{ plugins: { slots: { contextEngine: 'sliding-window' }, contextEngineFallback: 'legacy', entries: { 'sliding-window': { enabled: false } } } }";
    let host = scratch.host(lenient);
    block_on(async {
        let engine = host.active_engine().await.unwrap();
        assert_eq!(engine.id(), "legacy");
        let quarantined = host.quarantined().await;
        assert_eq!(quarantined.len(), 1);
        assert_eq!(quarantined[0].0, "sliding-window");
        assert!(
            quarantined[0].1.contains("disabled"),
            "{}",
            quarantined[0].1
        );
        // Quarantined for the life of the process: asked again, legacy answers at once.
        assert_eq!(host.active_engine().await.unwrap().id(), "legacy");
    });
}

#[test]
fn batches_turn_hooks_and_subagent_hooks_reach_the_engine() {
    use ctxhost::runtime::contract::{ContextMode, SubagentEndReason};
    let scratch = Scratch::new();
    let host = scratch.host("{}");
    let source = scratch.generated_transcript(8, 40);
    block_on(async {
        let mut session = open_session(&host, SessionTarget::Key("hooks".into())).await;
        let messages = recorded_messages(&source);
        let indices = session.append_batch(&messages).await.unwrap();
        assert_eq!(indices.len(), 40);
        assert_eq!(session.transcript().entries().len(), 40);
        session
            .after_turn(&ctxhost::AfterTurnOptions::default())
            .await
            .unwrap();

        // Legacy issues no rollback handle, so none can be rolled back.
        let handle = session
            .prepare_subagent_spawn(
                "child",
                &ctxhost::SpawnOptions {
                    context_mode: ContextMode::Isolated,
                    ttl_ms: Some(60_000),
                },
            )
            .await
            .unwrap();
        assert_eq!(handle, None);
        let err = session
            .rollback_subagent_spawn(7)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("rollback handle 7 was never issued"), "{err}");
        session
            .on_subagent_ended("child", SubagentEndReason::Completed)
            .await
            .unwrap();
        let path = session.path().to_path_buf();
        session.close().await.unwrap();
        assert_eq!(raw_messages(&path).len(), 40);
    });
}

/// The runtime alone (no session): a full pooling allocator is the host's shortage, reported as
/// such, and never counted against the engine's circuit breaker.
#[tokio::test]
async fn a_full_instance_pool_is_the_hosts_shortage_not_the_engines_fault() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = Runtime::new(&RuntimeOptions {
        max_instances: 2,
        ..RuntimeOptions::default()
    })
    .unwrap();
    assert!(runtime.uses_pooling(), "this machine cannot reserve a pool");
    let spec = EngineSpec {
        id: "legacy".into(),
        origin: "bundled:legacy".into(),
        state_dir: dir.path().join("state"),
        config_json: "{}".into(),
        limits: Limits {
            faults_before_circuit_opens: 1,
            ..Limits::default()
        },
        grants: Grants::default(),
    };
    let engine = runtime
        .prepare(spec, ctxhost::plugins::LEGACY_WASM)
        .await
        .unwrap();
    let session = || SessionIdentity {
        id: "s".into(),
        key: "s".into(),
    };
    let first = engine.instantiate(session(), Arc::new(Detached)).await;
    let _second = engine.instantiate(session(), Arc::new(Detached)).await;
    let refused = engine
        .instantiate(session(), Arc::new(Detached))
        .await
        .err()
        .expect("the pool holds two");
    assert!(
        matches!(
            refused,
            EngineError::Fault {
                kind: FaultKind::HostResources,
                ..
            }
        ),
        "{refused}"
    );
    // A breaker that opens at one fault is still closed: the next slot serves.
    assert_eq!(engine.health().circuit_open, None);
    drop(first);
    assert!(
        engine
            .instantiate(session(), Arc::new(Detached))
            .await
            .is_ok()
    );
}
