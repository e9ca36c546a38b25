//! Contract versions side by side: a 0.2 guest built against `wit/0.2.0` directly runs every
//! export through the host and sees the 0.2 fields; a 0.1 guest (the bundled legacy engine,
//! built with the SDK at 0.1) still gives the results it gave before 0.2 existed.

use std::path::Path;

use ctxhost::runtime::contract::{CompactionTrigger, ContextMode, SubagentEndReason};
use ctxhost::session::PendingCall;
use ctxhost::{AssembleOptions, AssembledItem, CompactOptions, SessionTarget};
use ctxhost_tests::{CONTRACT_V0_2_WASM, Scratch, block_on, recorded_messages};

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

        let mut session = host
            .open_session(
                &SessionTarget::Key("agent:main:probe".into()),
                &ctxhost::SessionOptions::default(),
            )
            .await
            .unwrap();
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
        let report = report(&assembly.items);
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
        let context = session.transcript().context();
        let kept: Vec<usize> = assembly.items[1..]
            .iter()
            .map(|item| match item {
                AssembledItem::Entry(i) => *i,
                other => panic!("only kept entries follow the report: {other:?}"),
            })
            .collect();
        assert_eq!(kept, context);

        // The probe claims it sends 100 tokens: with a window its full context overflows, the
        // runtime compaction believes the engine and finds nothing to do.
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

/// The legacy engine's results over a generated session, as they were under 0.1 alone:
/// pass-through (every context entry kept in order, nothing inserted, the sum of the entries'
/// tokens), and the runtime compaction it delegates to.
#[test]
fn a_0_1_guest_gives_the_results_it_gave_before() {
    let scratch = Scratch::new();
    let host = scratch.host("{}");
    let source = scratch.generated_transcript(4, 200);
    let messages = recorded_messages(&source);
    block_on(async {
        let engine = host.active_engine().await.unwrap();
        assert_eq!(engine.id(), "legacy");
        assert_eq!(engine.contract_version(), "0.1.0");
        let mut session = host
            .open_session(
                &SessionTarget::Key("agent:main:legacy".into()),
                &ctxhost::SessionOptions::default(),
            )
            .await
            .unwrap();
        for message in &messages {
            session.append(message).await.unwrap();
        }
        // A pending call is not part of 0.1: the legacy engine answers as it always did.
        let pending = PendingCall {
            model: Some("test/model-1".into()),
            prompt: Some("trim".into()),
        };
        let assembly = session
            .assemble_for(&AssembleOptions::default(), &pending)
            .await
            .unwrap();
        let context = session.transcript().context();
        let kept: Vec<usize> = assembly
            .items
            .iter()
            .map(|item| match item {
                AssembledItem::Entry(i) => *i,
                other => panic!("legacy inserts nothing: {other:?}"),
            })
            .collect();
        assert_eq!(kept, context);
        let tokens: u32 = context
            .iter()
            .map(|&i| session.transcript().entries()[i].tokens())
            .sum();
        assert_eq!(assembly.estimated_tokens, tokens);
        assert_eq!(assembly.system_prompt_addition, None);

        // Delegated compaction writes what the runtime plans over this transcript.
        let settings = session.settings();
        let before = ctxhost::transcript::Transcript::load(session.path());
        let outcome = session
            .compact(&CompactOptions {
                force: true,
                trigger: CompactionTrigger::Manual,
                ..CompactOptions::default()
            })
            .await
            .unwrap();
        assert!(outcome.compacted, "{outcome:?}");
        let plan = before
            .map(|t| {
                ctxhost::transcript::compaction::prepare(
                    &t,
                    &settings,
                    &ctxhost::transcript::compaction::Request {
                        trigger: ctxhost::transcript::compaction::Trigger::Manual,
                        ..Default::default()
                    },
                )
            })
            .unwrap();
        let job = plan.unwrap_or_else(|skip| panic!("{}", skip.reason));
        let expected = job.run(&ctxhost::transcript::compaction::Extractive);
        assert_eq!(
            outcome.first_kept_entry_id.as_deref(),
            Some(expected.first_kept_entry_id.as_str())
        );
        session.close().await.unwrap();
    });
}
