//! The request the host builds around the engine: budget arithmetic, overflow recovery and the
//! memory-flush signal, through real sessions on the bundled legacy engine.

use std::path::Path;

use ctxhost::prompt::{PromptMode, PromptSettings, ToolSpec};
use ctxhost::session::TurnOptions;
use ctxhost::{Error, SessionTarget};
use ctxhost_tests::{Scratch, block_on, open_session, recorded_messages};

fn workspace(dir: &Path, agents_md: &str) {
    std::fs::create_dir_all(dir.join("skills/pdf")).unwrap();
    std::fs::write(dir.join("AGENTS.md"), agents_md).unwrap();
    std::fs::write(
        dir.join("skills/pdf/SKILL.md"),
        "---\nname: pdf\ndescription: Read PDF files\n---\n",
    )
    .unwrap();
}

const SMALL_WINDOW: &str = "{ agents: { defaults: { contextWindow: 20000, compaction: { reserveTokens: 4000, reserveTokensFloor: 0, keepRecentTokens: 6000 } } } }";

fn settings(host: &ctxhost::Host, workspace: &Path) -> PromptSettings {
    let mut settings = PromptSettings::from_config(&host.config().settings.agents.defaults);
    settings.workspace = Some(workspace.to_path_buf());
    settings
}

fn turn() -> TurnOptions {
    TurnOptions {
        mode: PromptMode::Full,
        tools: vec![ToolSpec {
            name: "read".into(),
            description: "Read a file".into(),
        }],
        current_message: Some(
            serde_json::json!({"role": "user", "content": "Next step?", "timestamp": 1}),
        ),
    }
}

#[test]
fn the_parts_add_up_and_history_gets_what_the_window_leaves() {
    let scratch = Scratch::new();
    let host = scratch.host("{ agents: { defaults: { contextWindow: 200000 } } }");
    let ws = scratch.path("ws");
    workspace(&ws, "Always run the tests.");
    let source = scratch.generated_transcript(21, 60);
    block_on(async {
        let mut session = open_session(&host, SessionTarget::Key("budget".into())).await;
        session.set_estimates_only(true);
        for m in recorded_messages(&source) {
            session.append(&m).await.unwrap();
        }
        let request = session
            .prepare_request(&settings(&host, &ws), &turn())
            .await
            .unwrap();
        let b = &request.breakdown;
        assert_eq!(
            b.total,
            b.system
                + b.bootstrap
                + b.skills
                + b.tools
                + b.history
                + b.engine_additions
                + b.current_message
        );
        assert!(
            b.bootstrap > 0 && b.skills > 0 && b.tools > 0 && b.current_message > 0,
            "{b:?}"
        );
        let fixed = b.system + b.bootstrap + b.skills + b.tools;
        // The response reserve is the compaction reserve: max(reserveTokens 16,384, floor 20,000).
        assert_eq!(b.response_reserve, 20_000);
        assert_eq!(
            b.history_budget,
            200_000 - 20_000 - fixed - b.current_message
        );
        assert_eq!(
            b.history,
            request
                .message_tokens
                .iter()
                .map(|&t| u64::from(t))
                .sum::<u64>()
        );
        assert_eq!(request.messages.len(), 60);
        assert!(request.system_prompt.contains("Always run the tests."));
        assert!(request.system_prompt.contains("- pdf: Read PDF files"));
        assert!(request.overflow_compaction.is_none());
    });
}

#[test]
fn overflow_compacts_then_fits_or_fails_with_the_numbers() {
    let scratch = Scratch::new();
    let host = scratch.host(SMALL_WINDOW);
    let ws = scratch.path("ws");
    workspace(&ws, "Be careful.");
    let source = scratch.generated_transcript(22, 160);
    block_on(async {
        let mut session = open_session(&host, SessionTarget::Key("overflow".into())).await;
        session.set_estimates_only(true);
        for m in recorded_messages(&source) {
            session.append(&m).await.unwrap();
        }
        assert!(
            session.context_tokens() > 20_000,
            "the history alone must overflow"
        );
        let request = session
            .prepare_request(&settings(&host, &ws), &turn())
            .await
            .unwrap();
        let outcome = request.overflow_compaction.expect("a compaction ran");
        assert!(outcome.compacted, "{outcome:?}");
        assert!(
            request.breakdown.total <= 20_000 - 4_000,
            "{:?}",
            request.breakdown
        );

        // Bootstrap files alone larger than the window: compaction cannot help.
        std::fs::write(ws.join("AGENTS.md"), "rule ".repeat(20_000)).unwrap();
        let mut huge = settings(&host, &ws);
        huge.bootstrap_max_chars = 200_000;
        let err = session.prepare_request(&huge, &turn()).await.unwrap_err();
        match &err {
            Error::Overflow(overflow) => {
                assert!(overflow.bootstrap > 20_000, "{overflow:?}");
                assert_eq!(overflow.window, 20_000);
            }
            other => panic!("expected a context overflow, got {other}"),
        }
        assert!(err.to_string().contains("context overflow"), "{err}");
    });
}

#[test]
fn the_flush_signal_fires_once_per_cycle_and_never_for_a_read_only_workspace() {
    let scratch = Scratch::new();
    let host = scratch.host(SMALL_WINDOW);
    let ws = scratch.path("ws");
    workspace(&ws, "Notes go in MEMORY.md.");
    let source = scratch.generated_transcript(23, 200);
    let all = recorded_messages(&source);
    block_on(async {
        let mut session = open_session(&host, SessionTarget::Key("flush".into())).await;
        session.set_estimates_only(true);
        let settings = settings(&host, &ws);
        // threshold 16,000, soft threshold 4,000: the signal is due above 12,000 tokens.
        let mut fired_at = Vec::new();
        for (n, m) in all.iter().enumerate() {
            session.append(m).await.unwrap();
            if session.context_tokens() > 15_000 {
                session.compact(&Default::default()).await.unwrap();
            }
            let mut quiet = turn();
            quiet.current_message = None;
            let request = session.prepare_request(&settings, &quiet).await.unwrap();
            if let Some(flush) = request.flush {
                assert!(flush.context_tokens > 12_000, "{flush:?}");
                fired_at.push((n, session.transcript().compaction_count()));
            }
        }
        assert!(fired_at.len() >= 2, "{fired_at:?}");
        let mut cycles: Vec<usize> = fired_at.iter().map(|(_, cycle)| *cycle).collect();
        let before = cycles.len();
        cycles.dedup();
        assert_eq!(
            cycles.len(),
            before,
            "more than one signal in a cycle: {fired_at:?}"
        );
    });

    // The same session shape with a read-only workspace never signals.
    let ro = scratch.path("ro");
    workspace(&ro, "x");
    let mut perms = std::fs::metadata(&ro).unwrap().permissions();
    perms.set_readonly(true);
    std::fs::set_permissions(&ro, perms).unwrap();
    block_on(async {
        let mut session = open_session(&host, SessionTarget::Key("flush-ro".into())).await;
        session.set_estimates_only(true);
        let settings = settings(&host, &ro);
        for m in all.iter().take(120) {
            session.append(m).await.unwrap();
            if session.context_tokens() > 15_000 {
                session.compact(&Default::default()).await.unwrap();
            }
            let request = session
                .prepare_request(&settings, &TurnOptions::default())
                .await
                .unwrap();
            assert!(request.flush.is_none());
        }
    });
    let mut perms = std::fs::metadata(&ro).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&ro, perms).unwrap();
}
