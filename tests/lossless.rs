//! The bundled lossless engine in the real host over a long generated session: assembled
//! context within budget, every user request reachable by descending from the inserted
//! summaries with the engine's own tools after many compactions, and its tree surviving a
//! fresh instance and rebuilt when the state dir is wiped.

use std::collections::BTreeSet;
use std::path::PathBuf;

use ctxhost::runtime::contract::CompactionTrigger;
use ctxhost::{
    AssembleOptions, AssembledItem, Assembly, CompactOptions, Session, SessionOptions,
    SessionTarget, TurnRequest,
};
use ctxhost_tests::{Scratch, block_on, open_session, recorded_messages};
use serde_json::{Value, json};

const BUDGET: u32 = 8_000;
/// The host's context is compacted past this (estimates only), as a runtime would.
const COMPACT_AT: u32 = 12_000;

fn config() -> String {
    "{ plugins: { slots: { contextEngine: 'lossless' } }, agents: { defaults: { contextWindow: 32000 } } }"
        .to_string()
}

/// All text of an AgentMessage: string content, or its text blocks joined as the host joins
/// them for engines.
fn text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn assemble_options() -> AssembleOptions {
    AssembleOptions {
        token_budget: Some(BUDGET),
        available_tools: Vec::new(),
    }
}

/// The tokens of an assembly counted independently of the engine: kept entries by the host's
/// count, inserted messages by their text (chars / 4).
fn counted_tokens(session: &Session, assembly: &Assembly) -> u64 {
    let transcript = session.transcript();
    assembly
        .items()
        .map(|item| match item {
            AssembledItem::Entry(index) => u64::from(transcript.entries()[index].tokens()),
            AssembledItem::Inserted(json) => {
                let message: Value = serde_json::from_str(&json).unwrap();
                text_of(&message).chars().count().div_ceil(4) as u64
            }
        })
        .sum()
}

/// Appends the recorded messages, assembling before each assistant turn (within budget) and
/// compacting when the host's context passes [`COMPACT_AT`]; returns the compactions.
async fn replay(session: &mut Session, messages: &[Value]) -> usize {
    session.set_estimates_only(true);
    let mut compactions = 0;
    for message in messages {
        if message["role"] == "assistant" {
            let assembly = session.assemble(&assemble_options()).await.unwrap();
            assert!(
                assembly.estimated_tokens <= BUDGET,
                "{}",
                assembly.estimated_tokens
            );
            let counted = counted_tokens(session, &assembly);
            assert!(counted <= u64::from(BUDGET), "counted {counted}");
        }
        session.append(message).await.unwrap();
        if session.context_tokens() > u64::from(COMPACT_AT) {
            let outcome = session
                .compact(&CompactOptions {
                    trigger: CompactionTrigger::Auto,
                    token_budget: Some(BUDGET),
                    ..CompactOptions::default()
                })
                .await
                .unwrap();
            // A huge newest message can leave nothing to cut until the next turn starts.
            if outcome.compacted {
                compactions += 1;
            } else {
                let reason = outcome.reason.as_deref().unwrap_or_default();
                assert!(reason.starts_with("nothing to compact"), "{outcome:?}");
            }
        }
    }
    compactions
}

/// Node ids named by the inserted summaries of an assembly.
fn inserted_nodes(assembly: &Assembly) -> Vec<String> {
    let mut ids = Vec::new();
    for item in assembly.items() {
        if let AssembledItem::Inserted(json) = item {
            let text = text_of(&serde_json::from_str(&json).unwrap());
            ids.extend(
                text.match_indices("lossless summary s")
                    .filter_map(|(at, _)| {
                        text[at + "lossless summary ".len()..]
                            .split(' ')
                            .next()
                            .map(str::to_string)
                    }),
            );
        }
    }
    ids
}

/// What the model can reach from an assembly: the kept messages' text, and everything the
/// tools return when it descends from every inserted summary to the original messages.
async fn reachable(session: &mut Session, assembly: &Assembly) -> (String, usize) {
    let mut found: String = session
        .render(assembly)
        .iter()
        .fold(String::new(), |mut all, json| {
            all.push_str(&text_of(&serde_json::from_str(json).unwrap()));
            all.push('\n');
            all
        });
    let mut pending = inserted_nodes(assembly);
    assert!(!pending.is_empty(), "the assembly names no summary node");
    let mut calls = 0;
    while let Some(node) = pending.pop() {
        let mut arguments = json!({"node": node});
        loop {
            calls += 1;
            let out = session
                .call_tool("lossless_expand", &arguments)
                .await
                .unwrap();
            assert!(!out.is_error, "{node}: {}", out.content);
            if !node.starts_with("s0-") {
                pending.extend(out.content.lines().filter_map(|line| {
                    line.strip_prefix("## ")?
                        .split(' ')
                        .next()
                        .map(str::to_string)
                }));
                break;
            }
            found.push_str(&out.content);
            match continuation(&out.content) {
                Some(offset) => arguments = json!({"node": node, "offset": offset}),
                None => break,
            }
        }
    }
    (found, calls)
}

/// The offset a paged leaf continues at: its last line is
/// `[continued: … lossless_expand {"node":"s0-3","offset":16000} for the rest]`.
fn continuation(content: &str) -> Option<u64> {
    let last = content.lines().last()?.strip_prefix("[continued: ")?;
    let (_, after) = last.rsplit_once("\"offset\":")?;
    after.split('}').next()?.parse().ok()
}

fn user_requests(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["role"] == "user")
        .map(text_of)
        .filter(|t| !t.trim().is_empty())
        .collect()
}

fn assert_every_request_is_in(found: &str, requests: &[String]) {
    let missing: Vec<&String> = requests
        .iter()
        .filter(|r| !found.contains(r.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "{} of {} requests unreachable, e.g. {:?}",
        missing.len(),
        requests.len(),
        missing.first()
    );
}

fn log_of(scratch: &Scratch, session: &Session) -> PathBuf {
    let id = session.transcript().header().id().to_string();
    scratch
        .home()
        .state_dir("lossless")
        .join("sessions")
        .join(id)
        .join("nodes.jsonl")
}

#[test]
fn a_long_session_stays_within_budget_and_every_request_is_reachable_after_many_compactions() {
    let scratch = Scratch::new();
    let host = scratch.host(&config());
    let source = scratch.generated_transcript(23, 1_200);
    let messages = recorded_messages(&source);
    block_on(async {
        let engine = host.active_engine().await.unwrap();
        assert_eq!(engine.info().id, "lossless");
        assert!(engine.info().owns_compaction);
        let mut session =
            open_session(&host, SessionTarget::Path(scratch.path("long.jsonl"))).await;
        let compactions = replay(&mut session, &messages).await;
        assert!(compactions >= 5, "{compactions} compactions");

        let assembly = session.assemble(&assemble_options()).await.unwrap();
        assert!(assembly.estimated_tokens <= BUDGET);
        let (found, calls) = reachable(&mut session, &assembly).await;
        assert_every_request_is_in(&found, &user_requests(&messages));
        eprintln!(
            "{} messages, {compactions} compactions, {} inserted summaries, {calls} tool calls to reach every message",
            messages.len(),
            assembly.inserted()
        );
        session.close().await.unwrap();
    });
}

/// Through the host's turn driver at a 16,000-token window, as `replay` runs it: the host's
/// own exact-prefix flag says each request extends the previous one except at the engine's
/// rare re-cuts, the host never has to compact, and every turn fits its budget.
#[test]
fn between_recuts_each_turn_keeps_the_previous_request_and_recuts_are_rare() {
    const WINDOW: u64 = 16_000;
    let scratch = Scratch::new();
    let host = scratch.host(&config());
    let source = scratch.generated_transcript(31, 1_200);
    let messages = recorded_messages(&source);
    block_on(async {
        let engine = host.active_engine().await.unwrap();
        let settings = host.compaction_settings().for_window(WINDOW);
        let budget = settings.threshold();
        let mut session = host
            .open_session(
                &SessionTarget::Path(scratch.path("cache.jsonl")),
                &SessionOptions::on(engine).with_settings(settings),
            )
            .await
            .unwrap();
        session.set_estimates_only(true);
        let (mut turns, mut broken) = (0, 0);
        for message in &messages {
            if message["role"] == "assistant" {
                let turn = session
                    .assemble_turn(&TurnRequest::default(), &mut |_| {})
                    .await
                    .unwrap();
                assert!(
                    turn.compaction.is_none(),
                    "turn {turns}: the host compacted"
                );
                assert!(u64::from(turn.assembly.estimated_tokens) <= budget);
                assert!(counted_tokens(&session, &turn.assembly) <= budget);
                if turns > 0 && !turn.prefix.kept_previous {
                    broken += 1;
                }
                turns += 1;
            }
            session.append(message).await.unwrap();
        }
        eprintln!("{broken} of {turns} turns did not keep the previous request");
        // The generated session adds about 500 tokens a turn, and a re-cut leaves 40% of the
        // budget to grow into: 26 re-cuts in 436 turns here (cutting afresh each turn broke
        // the prefix whenever a leaf closed or the room moved, about one turn in six).
        assert!(turns >= 400, "{turns} turns");
        assert!(broken * 14 <= turns, "{broken} of {turns} turns re-cut");
        session.close().await.unwrap();
    });
}

#[test]
fn the_tree_survives_a_fresh_instance_and_is_rebuilt_when_the_state_dir_is_wiped() {
    let scratch = Scratch::new();
    let host = scratch.host(&config());
    let source = scratch.generated_transcript(5, 500);
    let messages = recorded_messages(&source);
    let path = scratch.path("resumed.jsonl");
    block_on(async {
        let mut session = open_session(&host, SessionTarget::Path(path.clone())).await;
        assert!(replay(&mut session, &messages).await >= 1);
        let before = session.assemble(&assemble_options()).await.unwrap();
        let rendered = session.render(&before);
        let log = log_of(&scratch, &session);
        let log_bytes = std::fs::read(&log).unwrap();
        session.close().await.unwrap();

        // A fresh instance over the same state dir reads its log: the same plan, nothing
        // rewritten.
        let mut resumed = open_session(&host, SessionTarget::Path(path.clone())).await;
        resumed.set_estimates_only(true);
        let again = resumed.assemble(&assemble_options()).await.unwrap();
        assert_eq!(resumed.render(&again), rendered);
        assert_eq!(std::fs::read(&log).unwrap(), log_bytes);
        resumed.close().await.unwrap();

        // Wiped: rebuilt from the transcript, within budget, every request reachable again.
        let state_dir = scratch.home().state_dir("lossless");
        for entry in std::fs::read_dir(&state_dir).unwrap() {
            std::fs::remove_dir_all(entry.unwrap().path()).unwrap();
        }
        let mut rebuilt = open_session(&host, SessionTarget::Path(path)).await;
        rebuilt.set_estimates_only(true);
        let assembly = rebuilt.assemble(&assemble_options()).await.unwrap();
        assert!(assembly.estimated_tokens <= BUDGET);
        assert!(log.is_file(), "the log is written again");
        let (found, _) = reachable(&mut rebuilt, &assembly).await;
        assert_every_request_is_in(&found, &user_requests(&messages));
        rebuilt.close().await.unwrap();
    });
}

#[test]
fn its_tools_sit_beside_the_hosts_and_bad_input_is_named() {
    let scratch = Scratch::new();
    let host = scratch.host(&config());
    let source = scratch.generated_transcript(9, 200);
    let messages = recorded_messages(&source);
    block_on(async {
        let mut session = open_session(&host, SessionTarget::Key("tools".into())).await;
        replay(&mut session, &messages).await;
        let names: BTreeSet<String> = session
            .tools()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert_eq!(
            names.into_iter().collect::<Vec<_>>(),
            [
                "ctx_expand",
                "ctx_search",
                "lossless_describe",
                "lossless_expand",
                "lossless_grep"
            ]
        );
        let described = session
            .call_tool("lossless_describe", &json!({"node": "s0-0"}))
            .await
            .unwrap();
        assert!(
            !described.is_error && described.content.starts_with("s0-0 · entries 0–"),
            "{}",
            described.content
        );
        let request = user_requests(&messages).remove(0);
        let word = request
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.len() > 4)
            .max_by_key(|w| w.len())
            .unwrap()
            .to_string();
        let grep = session
            .call_tool("lossless_grep", &json!({"query": word}))
            .await
            .unwrap();
        assert!(
            !grep.is_error && grep.content.contains("in s0-"),
            "{}",
            grep.content
        );

        let unknown = session
            .call_tool("lossless_expand", &json!({"node": "s7-3"}))
            .await
            .unwrap();
        assert!(
            unknown.is_error && unknown.content.contains("no node s7-3"),
            "{}",
            unknown.content
        );
        let refused = session
            .call_tool("lossless_expand", &json!({"node": 3}))
            .await
            .unwrap_err()
            .to_string();
        assert!(refused.contains("arguments.node"), "{refused}");
        session.close().await.unwrap();
    });

    // The engine's schema is the host's: a bad knob fails naming it.
    let bad = Scratch::new();
    let host = bad.host(
        "{ plugins: { slots: { contextEngine: 'lossless' }, entries: { lossless: { config: { fanIn: 1 } } } } }",
    );
    let Err(error) = block_on(host.active_engine()) else {
        panic!("fanIn 1 was accepted");
    };
    let error = error.to_string();
    assert!(
        error.contains("plugins.entries.lossless.config/fanIn"),
        "{error}"
    );
}
