//! Contract versions side by side: a 0.2 guest built against `wit/0.2.0` directly runs every
//! export through the host and sees the 0.2 fields; a 0.1 guest built against the frozen
//! `wit/0.1.0` directly (the legacy engine as it was before 0.2) still gives the results it
//! gave, the same as the bundled legacy engine's now that it speaks 0.2.

use std::path::Path;

use ctxhost::runtime::contract::{CompactionTrigger, ContextMode, SubagentEndReason};
use ctxhost::session::PendingCall;
use ctxhost::{AssembleOptions, AssembledItem, CompactOptions, SessionTarget};
use ctxhost_tests::{
    CONTRACT_V0_1_WASM, CONTRACT_V0_2_WASM, Scratch, block_on, open_session, recorded_messages,
};

/// The probe's report: the text of the message it inserted first.
fn report(items: &[AssembledItem]) -> String {
    let AssembledItem::Inserted(json) = &items[0] else {
        panic!("the probe inserts its report first: {items:?}");
    };
    let value: serde_json::Value = serde_json::from_str(json).unwrap();
    value["content"][0]["text"].as_str().unwrap().to_string()
}

#[test]
fn a_0_2_guest_runs_every_export_and_sees_the_0_2_fields() {
    let scratch = Scratch::new();
    scratch.install("v0-2-probe", Path::new(CONTRACT_V0_2_WASM));
    let host = scratch.host("{ plugins: { slots: { contextEngine: 'v0-2-probe' } } }");
    let source = scratch.generated_transcript(3, 160);
    let messages = recorded_messages(&source);
    let tool_results: Vec<&serde_json::Value> = messages
        .iter()
        .filter(|m| m["role"] == "toolResult")
        .collect();
    assert!(!tool_results.is_empty(), "the generated session uses tools");
    let mut tool_names: Vec<&str> = tool_results
        .iter()
        .map(|m| m["toolName"].as_str().unwrap())
        .collect();
    tool_names.sort_unstable();
    tool_names.dedup();
    let errors = tool_results.iter().filter(|m| m["isError"] == true).count();

    block_on(async {
        let engine = host.active_engine().await.unwrap();
        assert_eq!(engine.contract_version(), "0.2.0");
        assert_eq!(engine.info().id, "v0-2-probe");

        let mut session = open_session(&host, SessionTarget::Key("agent:main:probe".into())).await;
        for message in &messages {
            session.append(message).await.unwrap();
        }
        session
            .after_turn(&ctxhost::AfterTurnOptions::default())
            .await
            .unwrap();
        let handle = session
            .prepare_subagent_spawn(
                "agent:main:child",
                &ctxhost::SpawnOptions {
                    context_mode: ContextMode::Fork,
                    ttl_ms: Some(1000),
                },
            )
            .await
            .unwrap()
            .expect("the probe hands out rollback handles");
        session.rollback_subagent_spawn(handle).await.unwrap();
        session
            .on_subagent_ended("agent:main:child", SubagentEndReason::Completed)
            .await
            .unwrap();

        let pending = PendingCall {
            model: Some("test/model-1".into()),
            prompt: Some("what next?".into()),
        };
        let assembly = session
            .assemble_for(&AssembleOptions::default(), &pending)
            .await
            .unwrap();
        let report = report(&assembly.items().collect::<Vec<_>>());
        // Tool facts came with the entries, and agree with the import and with read-entries.
        assert!(
            report.contains(&format!("tools={} ", tool_names.join(","))),
            "{report}"
        );
        assert!(
            report.contains(&format!("call_ids={} ", tool_results.len())),
            "{report}"
        );
        assert!(report.contains(&format!("errors={errors} ")), "{report}");
        assert!(report.contains("pruned=0 "), "{report}");
        assert!(report.contains("import_agrees=true"), "{report}");
        assert!(report.contains("read_matches=true"), "{report}");
        assert!(
            report.contains("model=test/model-1 prompt=what next?"),
            "{report}"
        );
        // Ingest delivered the call ids; the other hooks reached the same instance.
        assert!(report.contains("bootstrap=Some("), "{report}");
        assert!(
            report.contains(&format!("ingested_ids={} ", tool_results.len())),
            "{report}"
        );
        assert!(report.contains("after_turns=1 "), "{report}");
        assert!(report.contains("spawned=agent:main:child "), "{report}");
        assert!(
            report.contains(&format!("rolled_back=[{handle}]")),
            "{report}"
        );
        assert!(
            report.contains("ended=agent:main:child:SubagentEndReason::Completed"),
            "{report}"
        );
        assert_eq!(
            assembly.system_prompt_addition.as_deref(),
            Some("model test/model-1")
        );
        // One keep-range stood for every entry of the context, in order.
        let context = session.transcript().context().to_vec();
        let kept: Vec<usize> = (assembly.items().skip(1))
            .map(|item| match item {
                AssembledItem::Entry(i) => i,
                other => panic!("only kept entries follow the report: {other:?}"),
            })
            .collect();
        assert_eq!(kept, context);

        // The probe claims it sends 100 tokens: with a window its full context overflows, the
        // built-in compaction believes the engine and finds nothing to do.
        let sent = assembly.estimated_tokens;
        let mut settings = session.settings();
        settings.context_window = u64::from(sent / 2);
        let window = settings.context_window;
        session.set_settings(settings);
        let trimmed = PendingCall {
            prompt: Some("trim".into()),
            ..PendingCall::default()
        };
        let assembly = session
            .assemble_for(&AssembleOptions::default(), &trimmed)
            .await
            .unwrap();
        assert_eq!(assembly.estimated_tokens, 100);
        let auto = CompactOptions {
            trigger: CompactionTrigger::Auto,
            ..CompactOptions::default()
        };
        let outcome = session.compact(&auto).await.unwrap();
        assert!(!outcome.compacted, "{outcome:?}");
        let reason = outcome.reason.unwrap_or_default();
        assert!(
            reason.contains(&format!("window={window} assembled=Some(100)")),
            "{reason}"
        );

        // Assembling everything again, the same request compacts.
        let full = session.assemble(&AssembleOptions::default()).await.unwrap();
        assert_eq!(full.estimated_tokens, sent);
        let outcome = session.compact(&auto).await.unwrap();
        assert!(outcome.compacted, "{outcome:?}");
        let reason = outcome.reason.unwrap_or_default();
        assert!(
            reason.contains(&format!("assembled=Some({})", full.estimated_tokens)),
            "{reason}"
        );
        session.close().await.unwrap();
    });
}

/// What one engine answered to every export over the same session, for comparing engines.
#[derive(Debug, PartialEq)]
struct Answers {
    bootstrap: ctxhost::runtime::contract::BootstrapResult,
    ingest: ctxhost::runtime::contract::IngestResult,
    ingest_batch: u32,
    spawn: Option<u64>,
    items: Vec<AssembledItem>,
    estimated_tokens: u32,
    system_prompt_addition: Option<String>,
    /// Whether it compacted, its reason and token figures, and the index of the first kept
    /// entry (ids differ between sessions, positions do not).
    compaction: (bool, Option<String>, u64, u64, Option<usize>),
}

/// What a test compares an engine's answers with.
struct Expected {
    context: Vec<usize>,
    context_tokens: u32,
    /// The first kept entry's id of the built-in compaction planned over the session.
    first_kept_entry_id: String,
}

/// Runs every export of `engine` over a copy of `source`: the lifecycle hooks on a detached
/// instance (the same requests for every engine), then a session that ingests the messages
/// one by one and in a batch, ends a turn, spawns and ends a subagent, assembles with a
/// pending call, compacts (the delegated built-in compaction) and closes.
fn every_export(
    host: &ctxhost::Host,
    engine: &str,
    source: &Path,
    scratch: &Scratch,
) -> (Answers, Expected) {
    use ctxhost::runtime::contract as c;
    let messages = recorded_messages(source);
    let copy = scratch.path(&format!("{engine}.jsonl"));
    block_on(async {
        let prepared = host.engine(engine).await.unwrap();
        let session = c::SessionIdentity {
            id: "00000000-0000-4000-8000-000000000000".into(),
            key: format!("agent:main:{engine}"),
        };
        let services: std::sync::Arc<dyn ctxhost::runtime::SessionServices> =
            std::sync::Arc::new(ctxhost::runtime::Detached);
        let mut instance = prepared
            .instantiate(session.clone(), services)
            .await
            .unwrap();
        let bootstrap = instance
            .bootstrap(&c::BootstrapRequest {
                session: session.clone(),
                session_file: "detached.jsonl".into(),
                entry_count: 3,
            })
            .await
            .unwrap();
        let message = c::Message {
            entry: 0,
            entry_id: "0000abcd".into(),
            role: c::Role::ToolResult,
            timestamp: 1,
            text: "ok".into(),
            tool_calls: vec![],
            tool_name: Some("read".into()),
            tool_call_id: Some("call_1".into()),
            is_error: false,
            stop_reason: None,
            usage: None,
            tokens: 1,
            json: r#"{"role":"toolResult","toolCallId":"call_1","toolName":"read","content":[],"isError":false}"#.into(),
        };
        let ingest = instance.ingest(&message, false).await.unwrap();
        let ingest_batch = instance
            .ingest_batch(&[message.clone(), message], false)
            .await
            .unwrap();
        instance.rollback_subagent_spawn(7).await.unwrap();
        instance.dispose().await.unwrap();

        let mut session = host
            .open_session(
                &SessionTarget::Path(copy),
                &ctxhost::SessionOptions::on(prepared),
            )
            .await
            .unwrap();
        let (one_by_one, batch) = messages.split_at(messages.len() - 3);
        for message in one_by_one {
            session.append(message).await.unwrap();
        }
        session.append_batch(batch).await.unwrap();
        // The 0.1 guest checks every host import here and fails naming a wrong answer.
        session
            .after_turn(&ctxhost::AfterTurnOptions::default())
            .await
            .unwrap();
        let spawn = session
            .prepare_subagent_spawn(
                "agent:main:child",
                &ctxhost::SpawnOptions {
                    context_mode: ContextMode::Isolated,
                    ttl_ms: None,
                },
            )
            .await
            .unwrap();
        session
            .on_subagent_ended("agent:main:child", SubagentEndReason::Released)
            .await
            .unwrap();
        // A pending call is not part of 0.1: the engine answers as it always did.
        let pending = PendingCall {
            model: Some("test/model-1".into()),
            prompt: Some("trim".into()),
        };
        let assembly = session
            .assemble_for(&AssembleOptions::default(), &pending)
            .await
            .unwrap();
        let context = session.transcript().context().to_vec();
        let context_tokens: u32 = context
            .iter()
            .map(|&i| session.transcript().entries()[i].tokens())
            .sum();
        let plan = ctxhost::transcript::compaction::prepare(
            &session.transcript(),
            &session.settings(),
            &ctxhost::transcript::compaction::Request {
                trigger: ctxhost::transcript::compaction::Trigger::Manual,
                ..Default::default()
            },
        );
        let job = plan.unwrap_or_else(|skip| panic!("{}", skip.reason));
        let planned = job.run(&ctxhost::transcript::compaction::Extractive);
        let outcome = session.compact(&CompactOptions::forced()).await.unwrap();
        let first_kept = outcome.first_kept_entry_id.as_deref().map(|id| {
            let transcript = session.transcript();
            transcript
                .entries()
                .iter()
                .position(|e| e.id() == id)
                .expect("the first kept entry is in the transcript")
        });
        session.close().await.unwrap();
        let compaction = (
            outcome.compacted,
            outcome.reason,
            outcome.tokens_before,
            outcome.tokens_after,
            first_kept,
        );
        let expected = Expected {
            context,
            context_tokens,
            first_kept_entry_id: outcome
                .first_kept_entry_id
                .filter(|id| *id == planned.first_kept_entry_id)
                .unwrap_or_else(|| panic!("{engine} kept another entry than the runtime plans")),
        };
        let answers = Answers {
            bootstrap,
            ingest,
            ingest_batch,
            spawn,
            items: assembly.items().collect(),
            estimated_tokens: assembly.estimated_tokens,
            system_prompt_addition: assembly.system_prompt_addition,
            compaction,
        };
        (answers, expected)
    })
}

/// A 0.1 guest built against the frozen `wit/0.1.0` (the legacy engine as it was before 0.2)
/// runs every export through the host's conversion layer and gives the results the 0.1 legacy
/// engine gave: pass-through (every context entry kept in order, nothing inserted, the sum of
/// the entries' tokens) and the built-in compaction it delegates to. The bundled legacy engine,
/// now 0.2 (one keep-range), gives the same answers to every export.
#[test]
fn a_0_1_guest_gives_the_results_it_gave_before() {
    let scratch = Scratch::new();
    scratch.install("legacy-0-1", Path::new(CONTRACT_V0_1_WASM));
    let host = scratch.host("{ plugins: { slots: { contextEngine: 'legacy-0-1' } } }");
    let source = scratch.generated_transcript(4, 200);
    block_on(async {
        let engine = host.active_engine().await.unwrap();
        assert_eq!(engine.id(), "legacy-0-1");
        assert_eq!(engine.contract_version(), "0.1.0");
        assert_eq!(
            host.engine("legacy").await.unwrap().contract_version(),
            "0.4.0"
        );
    });
    let (old, expected) = every_export(&host, "legacy-0-1", &source, &scratch);
    let kept: Vec<usize> = old
        .items
        .iter()
        .map(|item| match item {
            AssembledItem::Entry(i) => *i,
            other => panic!("legacy inserts nothing: {other:?}"),
        })
        .collect();
    assert_eq!(kept, expected.context);
    assert_eq!(old.estimated_tokens, expected.context_tokens);
    assert_eq!(old.system_prompt_addition, None);
    assert!(!old.bootstrap.bootstrapped);
    assert_eq!(
        old.bootstrap.reason.as_deref(),
        Some("engine keeps no state")
    );
    assert!(!old.ingest.ingested);
    assert_eq!((old.ingest_batch, old.spawn), (0, None));
    // Delegated compaction wrote what the runtime plans over this transcript (`every_export`
    // compares the ids).
    assert!(old.compaction.0, "{:?}", old.compaction);
    assert!(!expected.first_kept_entry_id.is_empty());

    let (new, new_expected) = every_export(&host, "legacy", &source, &scratch);
    assert_eq!(new_expected.context, expected.context);
    assert_eq!(new, old);
}
