//! Contract 0.4 sends an engine only the rows appended since its last `assemble`. Whatever
//! happens between two calls (messages appended, a compaction, the instance restarted), the
//! engine must see exactly the whole current context, never a stale or half-applied one: a
//! property test drives random sequences through a real session and compares the SDK-built
//! context-view engine's view with a fresh full context of the transcript after each step.
//!
//! The host's side is incremental too: an assembly is runs over the shared context, checked by
//! their ends. After each step the host's `Assembly` must equal the one a fresh session (a
//! fresh context, a fresh instance, the full path) assembles over the same transcript, for the
//! context-view engine (a new plan every call) and the pass-through legacy engine (one run).

use std::path::Path;

use ctxhost::session::context_of;
use ctxhost::{
    AssembleOptions, AssembledItem, Assembly, CompactOptions, Session, SessionOptions,
    SessionTarget,
};
use ctxhost_tests::{CONTEXT_VIEW_WASM, Scratch, block_on, open_session, recorded_messages};
use proptest::prelude::*;

/// A small window, so a forced compaction has something to summarize after a few messages.
const CONFIG: &str = "{ plugins: { slots: { contextEngine: 'context-view' } }, agents: { defaults: { contextWindow: 20000, compaction: { reserveTokens: 4000, reserveTokensFloor: 0, keepRecentTokens: 600 } } } }";

/// What happens before an `assemble`.
#[derive(Debug, Clone)]
enum Step {
    /// The next messages of the recorded session are appended (one `ingest-batch`).
    Append(usize),
    /// A forced compaction through the engine (the built-in compaction it delegates to).
    Compact,
    /// The instance is released: the next call starts a fresh one, holding nothing.
    Restart,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        5 => (1usize..12).prop_map(Step::Append),
        1 => Just(Step::Compact),
        1 => Just(Step::Restart),
    ]
}

/// The engine's view, as the context-view engine writes it.
fn engine_view(assembly: &Assembly) -> String {
    let items: Vec<AssembledItem> = assembly.items().collect();
    let [AssembledItem::Inserted(json)] = &items[..] else {
        panic!("the context-view engine inserts one message and keeps nothing: {items:?}");
    };
    let message: serde_json::Value = serde_json::from_str(json).expect("message JSON");
    message["content"]
        .as_str()
        .expect("a custom message's text")
        .to_string()
}

/// The same view of a fresh full context of the session's transcript.
fn fresh_view(session: &Session) -> String {
    let context = context_of(&session.transcript());
    let total = (context.entries.iter()).fold(0u32, |sum, e| sum.saturating_add(e.tokens));
    let mut view = format!("total {total}");
    for e in &context.entries {
        view.push_str(&format!(
            "\n{} {} {} {} {} {}",
            e.entry,
            e.role.as_str(),
            e.tokens,
            context.tool_name(e).unwrap_or("-"),
            u8::from(e.is_error),
            u8::from(e.pruned)
        ));
    }
    view
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn the_engine_sees_the_whole_context_after_appends_compactions_and_restarts(
        steps in proptest::collection::vec(step(), 1..16),
    ) {
        let scratch = Scratch::new();
        scratch.install("context-view", Path::new(CONTEXT_VIEW_WASM));
        let host = scratch.host(CONFIG);
        let messages = recorded_messages(&scratch.generated_transcript(5, 200));
        block_on(async {
            let mut session =
                open_session(&host, SessionTarget::Key("agent:main:view".into())).await;
            assert_eq!(session.engine().contract_version(), "0.4.0");
            let legacy = host.engine("legacy").await.unwrap();
            let mut passing = host
                .open_session(
                    &SessionTarget::Key("agent:main:legacy".into()),
                    &SessionOptions::on(legacy),
                )
                .await
                .unwrap();
            let mut next = 0;
            let mut compacted = 0;
            for (n, step) in steps.iter().enumerate() {
                for session in [&mut session, &mut passing] {
                    match step {
                        Step::Append(count) => {
                            let end = (next + count).min(messages.len());
                            session.append_batch(&messages[next..end]).await.unwrap();
                        }
                        Step::Compact => {
                            let outcome = session.compact(&CompactOptions::forced()).await.unwrap();
                            compacted += usize::from(outcome.compacted);
                        }
                        Step::Restart => session.release_instance().await.unwrap(),
                    }
                }
                if let Step::Append(count) = step {
                    next = (next + count).min(messages.len());
                }
                let context = format!("after step {n} ({step:?}) of {steps:?} ({compacted} compactions written)");
                let assembly = session.assemble(&AssembleOptions::default()).await.unwrap();
                assert_eq!(engine_view(&assembly), fresh_view(&session), "{context}");
                assert_eq!(assembly, fresh_assembly(&host, &session).await, "{context}");
                let kept = passing.assemble(&AssembleOptions::default()).await.unwrap();
                assert_eq!(kept, fresh_assembly(&host, &passing).await, "{context}");
                assert_eq!(kept.inserted(), 0, "{context}");
                assert_eq!(
                    kept.items().collect::<Vec<_>>(),
                    (passing.transcript().context().iter())
                        .map(|&i| AssembledItem::Entry(i))
                        .collect::<Vec<_>>(),
                    "{context}"
                );
            }
        });
    }
}

/// What a fresh session (its own context, a fresh instance) of the same transcript and engine
/// assembles: the full path, nothing carried over from earlier calls.
async fn fresh_assembly(host: &ctxhost::Host, session: &Session) -> Assembly {
    let target = SessionTarget::Path(session.path().to_path_buf());
    let mut fresh = host
        .open_session(&target, &SessionOptions::on(session.engine().clone()))
        .await
        .unwrap();
    let assembly = fresh.assemble(&AssembleOptions::default()).await.unwrap();
    assert_eq!(fresh.render(&assembly), session.render(&assembly));
    fresh.close().await.unwrap();
    assembly
}

/// The sequences above include compactions that were written, not only ones that were
/// declined: one fixed sequence shows the window and messages make them happen, and the view
/// after each is the new context.
#[test]
fn a_written_compaction_is_followed_by_the_whole_new_context() {
    let scratch = Scratch::new();
    scratch.install("context-view", Path::new(CONTEXT_VIEW_WASM));
    let host = scratch.host(CONFIG);
    let messages = recorded_messages(&scratch.generated_transcript(5, 200));
    block_on(async {
        let mut session = open_session(&host, SessionTarget::Key("agent:main:view".into())).await;
        session.append_batch(&messages[..20]).await.unwrap();
        let before = session.assemble(&AssembleOptions::default()).await.unwrap();
        assert_eq!(engine_view(&before), fresh_view(&session));
        let outcome = session.compact(&CompactOptions::forced()).await.unwrap();
        assert!(outcome.compacted, "{outcome:?}");
        session.append_batch(&messages[20..23]).await.unwrap();
        let after = session.assemble(&AssembleOptions::default()).await.unwrap();
        let view = engine_view(&after);
        assert_eq!(view, fresh_view(&session));
        assert!(view.contains("compactionSummary"), "{view}");
        assert!(
            view.lines().count() < 20,
            "the compaction shortened it: {view}"
        );
    });
}
