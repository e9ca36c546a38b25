//! Recall and agent tools with real components: the host's `ctx_search` / `ctx_expand` over a
//! compacted session under the bundled engine, an engine's own tools (and its `search` import)
//! from an SDK engine and from the frozen 0.3 guest, and what the host does with a hostile
//! engine's tools.

use std::path::Path;

use ctxhost::runtime::{EngineError, FaultKind, Function};
use ctxhost::{
    AssembleOptions, AssembledItem, CompactOptions, Error, Host, Session, SessionTarget, ToolSource,
};
use ctxhost_tests::{
    CONTRACT_V0_2_WASM, CONTRACT_V0_3_WASM, HOSTILE_WASM, Scratch, block_on, open_session,
};
use serde_json::json;

fn hostile_host(scratch: &Scratch, extra_limits: &str) -> Host {
    scratch.install("hostile", Path::new(HOSTILE_WASM));
    scratch.host(&format!(
        "{{ plugins: {{ slots: {{ contextEngine: 'hostile' }}, entries: {{ hostile: {{ limits: {{ callTimeoutMs: 300, faultsBeforeCircuitOpens: 1000 {extra_limits} }} }} }} }} }}"
    ))
}

async fn append_texts(session: &mut Session, texts: &[&str]) {
    for (i, text) in texts.iter().enumerate() {
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        let message = if role == "user" {
            json!({"role": "user", "content": text, "timestamp": i})
        } else {
            json!({"role": "assistant", "content": [{"type": "text", "text": text}], "timestamp": i})
        };
        session.append(&message).await.expect("append");
    }
}

fn names(tools: &[ctxhost::AgentTool]) -> Vec<&str> {
    tools.iter().map(|t| t.name.as_str()).collect()
}

/// Two messages appended, then the engine's `echo` and `recall` tools (as the hostile guest's
/// benign keys and the frozen 0.3 guest offer them) listed beside the host's and answering.
async fn echo_and_recall_answer(session: &mut Session) {
    append_texts(session, &["the walrus protocol failed twice", "noted"]).await;
    let tools = session.tools().await.expect("tools");
    assert_eq!(
        names(&tools),
        ["ctx_search", "ctx_expand", "echo", "recall"]
    );
    assert_eq!(tools[2].source, ToolSource::Engine);
    assert_eq!(tools[2].parameters["required"], json!(["text"]));
    let echoed = session
        .call_tool("echo", &json!({"text": "hello"}))
        .await
        .expect("echo");
    assert_eq!((echoed.content.as_str(), echoed.is_error), ("hello", false));
    let recalled = session
        .call_tool("recall", &json!({"query": "walrus"}))
        .await
        .expect("recall");
    let first_id = session.transcript().entries()[0].id().to_string();
    assert!(
        recalled.content.starts_with(&format!("{first_id} user")),
        "{}",
        recalled.content
    );
}

#[test]
fn a_request_compacted_away_is_found_and_opened_again_under_the_bundled_engine() {
    block_on(async {
        let scratch = Scratch::new();
        let host =
            scratch.host("{ agents: { defaults: { compaction: { keepRecentTokens: 200 } } } }");
        let mut session = open_session(&host, SessionTarget::Key("recall".into())).await;
        let filler = "lorem ipsum dolor sit amet ".repeat(40);
        let mut texts = vec!["Please migrate the billing cron job to the zeppelin scheduler"];
        for _ in 0..12 {
            texts.push(&filler);
        }
        append_texts(&mut session, &texts).await;
        let outcome = session
            .compact(&CompactOptions::forced())
            .await
            .expect("compact");
        assert!(outcome.compacted, "{outcome:?}");
        let request_id = session.transcript().entries()[0].id().to_string();
        assert!(
            !session.transcript().context().contains(&0),
            "the request left the context"
        );

        let tools = session.tools().await.expect("tools");
        assert_eq!(
            names(&tools),
            ["ctx_search", "ctx_expand"],
            "legacy (0.4) offers none of its own"
        );
        assert!(tools.iter().all(|t| t.source == ToolSource::Recall));

        let found = session
            .call_tool("ctx_search", &json!({"query": "zeppelin scheduler"}))
            .await
            .expect("search");
        assert!(!found.is_error, "{}", found.content);
        let first = &found.details["hits"][0];
        assert_eq!(first["id"], request_id.as_str(), "{}", found.content);
        assert_eq!(first["inContext"], false);
        assert!(found.content.contains("compacted"), "{}", found.content);

        let opened = session
            .call_tool("ctx_expand", &json!({"id": request_id}))
            .await
            .expect("expand");
        assert!(
            opened
                .content
                .contains("Please migrate the billing cron job to the zeppelin scheduler"),
            "{}",
            opened.content
        );

        // Entries appended later are searchable at once; a bad id is the model's to read.
        append_texts(&mut session, &["Now also archive the quixotic ledger"]).await;
        let hits = session
            .search(&ctxhost::recall::SearchQuery::words("quixotic"))
            .expect("search");
        assert_eq!(hits.len(), 1);
        let bad = session
            .call_tool("ctx_expand", &json!({"id": "nope"}))
            .await
            .expect("an error output, not a failure");
        assert!(
            bad.is_error && bad.content.contains("\"nope\""),
            "{}",
            bad.content
        );

        // Arguments that do not match the schema are refused naming the field.
        let err = session
            .call_tool("ctx_search", &json!({"query": 3}))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("ctx_search") && err.contains("arguments.query"),
            "{err}"
        );
        let err = session
            .call_tool("rm_rf", &json!({}))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no such tool") && err.contains("ctx_search"),
            "{err}"
        );
    });
}

#[test]
fn the_operator_can_turn_the_recall_tools_off() {
    block_on(async {
        let scratch = Scratch::new();
        let host = scratch.host("{ recall: { tools: false } }");
        let mut session = open_session(&host, SessionTarget::Key("off".into())).await;
        assert!(session.tools().await.unwrap().is_empty());
        let err = session
            .call_tool("ctx_search", &json!({"query": "x"}))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("recall.tools"), "{err}");
    });
}

#[test]
fn an_sdk_engine_offers_tools_and_searches_through_the_recall_import() {
    block_on(async {
        let scratch = Scratch::new();
        let host = hostile_host(&scratch, "");
        let engine = host.active_engine().await.expect("engine");
        assert_eq!(engine.contract_version(), "0.4.0");
        let mut session = open_session(&host, SessionTarget::Key("benign-tools".into())).await;
        echo_and_recall_answer(&mut session).await;

        // The host checks arguments against the engine's schema before the engine runs.
        let err = session
            .call_tool("echo", &json!({"text": 5}))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("tool `echo`") && err.contains("arguments.text"),
            "{err}"
        );
        let err = session
            .call_tool("echo", &json!({"text": "a", "extra": 1}))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("extra"), "{err}");
    });
}

/// The frozen 0.3 guest (built against `wit/0.3.0` directly) runs as before 0.4: its tools and
/// its `search` import answer, and `assemble` hands it the whole context on every call.
#[test]
fn a_frozen_0_3_engine_offers_tools_searches_and_gets_the_whole_context() {
    block_on(async {
        let scratch = Scratch::new();
        scratch.install("v0-3-probe", Path::new(CONTRACT_V0_3_WASM));
        let host = scratch.host("{ plugins: { slots: { contextEngine: 'v0-3-probe' } } }");
        let engine = host.active_engine().await.expect("engine");
        assert_eq!(engine.contract_version(), "0.3.0");
        let mut session = open_session(&host, SessionTarget::Key("frozen".into())).await;
        echo_and_recall_answer(&mut session).await;

        for expected in [2, 3] {
            let assembly = session.assemble(&AssembleOptions::default()).await.unwrap();
            let kept: Vec<usize> = (assembly.items())
                .map(|item| match item {
                    AssembledItem::Entry(i) => i,
                    other => panic!("the probe inserts nothing: {other:?}"),
                })
                .collect();
            assert_eq!(kept, (0..expected).collect::<Vec<_>>());
            assert_eq!(
                assembly.system_prompt_addition.as_deref(),
                Some(format!("handed {expected} entries").as_str())
            );
            append_texts(&mut session, &["and again"]).await;
        }
    });
}

#[test]
fn a_hostile_engines_tools_cannot_impersonate_the_host_or_hurt_it() {
    block_on(async {
        let scratch = Scratch::new();
        let host = hostile_host(&scratch, ", hostBytesPerCall: 1048576");
        let mut session = open_session(&host, SessionTarget::Key("tools-rogue".into())).await;
        let tools = session.tools().await.expect("tools");
        // `ctx_search` stays the host's; the malformed, duplicate and non-object ones are out.
        assert_eq!(
            names(&tools),
            ["ctx_search", "ctx_expand", "echo", "spin", "huge", "panic"]
        );
        assert_eq!(tools[0].source, ToolSource::Recall);
        let search = session
            .call_tool("ctx_search", &json!({"query": "anything"}))
            .await
            .expect("the host answers its own tool");
        assert!(!search.content.contains("forged"), "{}", search.content);

        let fault = |e: Error| match e {
            Error::Engine(EngineError::Fault { function, kind, .. }) => (function, kind),
            other => panic!("expected a fault, got {other}"),
        };
        let spun = session.call_tool("spin", &json!({})).await.unwrap_err();
        assert_eq!(fault(spun), (Function::CallTool, FaultKind::Deadline));
        let panicked = session.call_tool("panic", &json!({})).await.unwrap_err();
        assert_eq!(fault(panicked), (Function::CallTool, FaultKind::Panic));
        // A 10 MiB answer is over the per-call byte limit (1 MiB here): a fault, not a result.
        let huge = session.call_tool("huge", &json!({})).await;
        match huge {
            Err(e) => assert_eq!(fault(e).0, Function::CallTool),
            Ok(output) => assert!(output.content.len() <= 33 << 10, "bounded"),
        }
        // The session still works: a fresh instance answers.
        let echoed = session
            .call_tool("echo", &json!({"text": "still here"}))
            .await
            .unwrap();
        assert_eq!(echoed.content, "still here");
    });
}

#[test]
fn engines_of_contract_0_2_keep_running_and_offer_no_tools() {
    block_on(async {
        let scratch = Scratch::new();
        scratch.install("v0-2-probe", Path::new(CONTRACT_V0_2_WASM));
        let host = scratch.host("{ plugins: { slots: { contextEngine: 'v0-2-probe' } } }");
        assert_eq!(
            host.active_engine().await.unwrap().contract_version(),
            "0.2.0"
        );
        let mut session = open_session(&host, SessionTarget::Key("old".into())).await;
        let tools = session.tools().await.unwrap();
        assert_eq!(names(&tools), ["ctx_search", "ctx_expand"]);
        let err = session.call_tool("echo", &json!({})).await.unwrap_err();
        assert!(matches!(err, Error::ToolCall { .. }), "{err}");
    });
}
