//! The engine's hooks and tools against the SDK's test host, over a generated session.

use std::collections::BTreeSet;
use std::path::Path;

use ctxhost_sdk::serde_json::{Value, json};
use ctxhost_sdk::testing::{self, TestHost, message, tool_call, tool_result};
use ctxhost_sdk::{ContextEngine, ContextItem, EntryRef, Message, Role};

use super::*;
use crate::config::Config;

/// A session of `turns` turns: a user request naming its number, an assistant tool call, its
/// result (every 7th a failure), an assistant answer. Entry `skip` carries no message (a
/// compaction entry in a real transcript), so positions have a gap there.
fn session(turns: u32, skip: Option<EntryRef>) -> Vec<Message> {
    let mut messages = Vec::new();
    let mut entry = 0;
    let mut next = || {
        entry += 1;
        if Some(entry - 1) == skip {
            entry += 1;
        }
        entry - 1
    };
    for turn in 0..turns {
        messages.push(message(
            next(),
            Role::User,
            &format!("Request {turn}: please refactor module_{turn} and keep the tests green."),
        ));
        let call = next();
        let mut calling = tool_call(
            call,
            "edit",
            json!({"path": format!("src/module_{turn}.rs")}),
        );
        calling.tool_calls[0].id = format!("call-{turn}");
        messages.push(calling);
        let mut result = tool_result(next(), "edit", &"patched line\n".repeat(30));
        result.tool_call_id = Some(format!("call-{turn}"));
        result.is_error = turn % 7 == 3;
        messages.push(result);
        messages.push(message(
            next(),
            Role::Assistant,
            &format!("Module {turn} is refactored."),
        ));
    }
    messages
}

fn config() -> Config {
    Config {
        leaf_messages: 8,
        leaf_tokens: 2_000,
        fan_in: 3,
        recent_share: 0.5,
    }
}

fn fresh(root: &Path, entry_count: u32) -> Lossless {
    Lossless {
        session: Some(SessionState::open(root, "sess-1", config(), entry_count)),
    }
}

/// A fresh engine that has ingested `history` one message at a time.
fn fed(root: &Path, history: &[Message]) -> Lossless {
    let mut engine = fresh(root, 0);
    for message in history {
        (engine.ingest(&testing::session(), message.clone(), false)).unwrap();
    }
    engine
}

fn assemble(engine: &mut Lossless, history: &[Message], budget: u32) -> AssembleResult {
    let mut request = testing::assemble_request(history);
    request.token_budget = Some(budget);
    engine.assemble(request).unwrap()
}

fn call(engine: &mut Lossless, tool: &str, args: Value) -> (String, bool) {
    let tools = engine.tools();
    let out = tools.call(engine, tool, &args.to_string());
    (out.content, out.is_error)
}

fn node_ids(text: &str) -> Vec<String> {
    text.match_indices("lossless summary s")
        .filter_map(|(at, _)| {
            let id = text[at + "lossless summary ".len()..].split(' ').next()?;
            Some(id.to_string())
        })
        .collect()
}

/// Every message reached by descending from the plan's summaries with `lossless_expand`,
/// plus the ones it keeps verbatim; the tool calls it took.
fn reachable(engine: &mut Lossless, plan: &AssembleResult, history: &[Message]) -> (String, usize) {
    let mut found = String::new();
    let mut pending = Vec::new();
    for item in &plan.items {
        match item {
            ContextItem::Insert(json) => pending.extend(node_ids(json)),
            ContextItem::KeepRange(range) => history
                .iter()
                .filter(|m| (range.first..=range.last).contains(&m.entry))
                .for_each(|m| found.push_str(&m.text)),
            ContextItem::Keep(entry) => history
                .iter()
                .filter(|m| m.entry == *entry)
                .for_each(|m| found.push_str(&m.text)),
        }
    }
    let mut calls = 0;
    while let Some(id) = pending.pop() {
        let mut offset = 0;
        loop {
            calls += 1;
            let (text, failed) = call(
                engine,
                "lossless_expand",
                json!({"node": id, "offset": offset}),
            );
            assert!(!failed, "{id}: {text}");
            if id.starts_with("s0-") {
                found.push_str(&text);
                match text.rsplit_once("\"offset\":") {
                    Some((_, rest)) if text.contains("[continued:") => {
                        offset = rest
                            .trim_end_matches(|c: char| !c.is_ascii_digit())
                            .parse()
                            .unwrap();
                    }
                    _ => break,
                }
            } else {
                pending.extend(
                    text.lines().filter_map(|l| {
                        l.strip_prefix("## ")?.split(' ').next().map(str::to_string)
                    }),
                );
                break;
            }
        }
    }
    (found, calls)
}

#[test]
fn a_long_session_stays_within_budget_and_every_request_is_reachable_with_the_tools() {
    let dir = tempfile::tempdir().unwrap();
    let history = session(120, Some(200));
    let host = TestHost::new().transcript(history.clone());
    host.run(|| {
        let mut engine = fresh(dir.path(), 0);
        for (n, message) in history.iter().enumerate() {
            engine
                .ingest(&testing::session(), message.clone(), false)
                .unwrap();
            if n % 40 == 39 {
                let plan = assemble(&mut engine, &history[..=n], 3_000);
                assert!(plan.estimated_tokens <= 3_000, "{}", plan.estimated_tokens);
            }
        }
        let plan = assemble(&mut engine, &history, 3_000);
        assert!(plan.estimated_tokens <= 3_000);
        assert!(
            matches!(plan.items.last(), Some(ContextItem::KeepRange(r)) if r.last == history.last().unwrap().entry)
        );
        let inserted = plan
            .items
            .iter()
            .filter(|i| matches!(i, ContextItem::Insert(_)))
            .count();
        assert!((1..=8).contains(&inserted), "{inserted} summaries");

        let (found, calls) = reachable(&mut engine, &plan, &history);
        for turn in 0..120 {
            let request = format!("Request {turn}: please refactor module_{turn}");
            assert!(found.contains(&request), "{request:?} is not reachable");
        }
        assert!(calls < 120, "{calls} tool calls to walk 480 messages");
    });
}

#[test]
fn a_budget_too_small_for_the_summaries_gets_stubs_and_still_fits() {
    let dir = tempfile::tempdir().unwrap();
    let history = session(60, None);
    let host = TestHost::new().transcript(history.clone());
    host.run(|| {
        let mut engine = fed(dir.path(), &history);
        for budget in [200, 400, 900] {
            let plan = assemble(&mut engine, &history, budget);
            assert!(
                plan.estimated_tokens <= budget,
                "{budget}: {}",
                plan.estimated_tokens
            );
        }
    });
}

#[test]
fn the_tree_survives_a_fresh_instance_and_is_rebuilt_when_lost_or_foreign() {
    let dir = tempfile::tempdir().unwrap();
    let history = session(40, Some(77));
    let count = history.last().unwrap().entry + 1;
    let host = TestHost::new().transcript(history.clone());
    host.run(|| {
        let mut first = fed(dir.path(), &history);
        let before = assemble(&mut first, &history, 2_000);
        let nodes = first.tree().unwrap().node_count();

        // A fresh instance reads the log (no read of the covered entries) and catches up.
        let calls_before = host.calls().len();
        let mut second = fresh(dir.path(), count);
        assert_eq!(second.tree().unwrap().node_count(), nodes);
        let reads = host.calls()[calls_before..]
            .iter()
            .filter(|c| **c == "read-entries")
            .count();
        assert!(
            reads <= 3,
            "{reads} reads: only the check and the open messages"
        );
        assert_eq!(assemble(&mut second, &history, 2_000), before);

        // Wiped: rebuilt from the transcript, the same tree (extractive both times).
        std::fs::remove_dir_all(dir.path().join("sessions")).unwrap();
        let mut rebuilt = fresh(dir.path(), count);
        assert_eq!(assemble(&mut rebuilt, &history, 2_000), before);
        assert_eq!(rebuilt.tree().unwrap().node_count(), nodes);

        // A log whose last leaf disagrees with the transcript is not trusted.
        let log = dir.path().join("sessions/sess-1/nodes.jsonl");
        let text = std::fs::read_to_string(&log).unwrap();
        let last_id = format!(
            "\"lastId\":\"{:08x}\"",
            rebuilt.tree().unwrap().leaves().last().unwrap().last
        );
        std::fs::write(&log, text.replace(&last_id, "\"lastId\":\"ffffffff\"")).unwrap();
        let state = SessionState::open(dir.path(), "sess-1", config(), count);
        let mut repaired = Lossless {
            session: Some(state),
        };
        let warnings = repaired.session.as_mut().unwrap().take_warnings();
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("in the transcript") && w.contains("rebuilding")),
            "{warnings:?}"
        );
        assert_eq!(assemble(&mut repaired, &history, 2_000), before);

        // A line that is not a node refuses the log; the rebuilt one reads cleanly next time.
        let text = std::fs::read_to_string(&log).unwrap();
        std::fs::write(&log, text.replacen("\"level\"", "\"depth\"", 1)).unwrap();
        let mut state = SessionState::open(dir.path(), "sess-1", config(), count);
        let warnings = state.take_warnings();
        assert!(
            warnings.iter().any(|w| w.contains("line 2")),
            "{warnings:?}"
        );
        let mut clean = SessionState::open(dir.path(), "sess-1", config(), count);
        assert_eq!(clean.take_warnings(), Vec::<String>::new());
        assert_eq!(clean.tree.node_count(), state.tree.node_count());
    });
}

#[test]
fn compaction_cuts_where_assemble_keeps_and_summarizes_the_rest_by_node() {
    let dir = tempfile::tempdir().unwrap();
    let history = session(30, None);
    let host = TestHost::new().transcript(history.clone());
    host.run(|| {
        let mut engine = fed(dir.path(), &history);
        let mut request = testing::compact_request();
        request.token_budget = Some(2_000);
        let result = engine.compact(request.clone()).unwrap();
        let compaction = result.compaction.expect("compacted");
        let plan = assemble(&mut engine, &history, 2_000);
        let Some(ContextItem::KeepRange(tail)) = plan.items.last() else {
            panic!("{plan:?}")
        };
        assert_eq!(compaction.first_kept_entry, tail.first);
        assert!(
            compaction.summary.contains("lossless summary s"),
            "{}",
            compaction.summary
        );
        assert!(compaction.tokens_after < compaction.tokens_before);
        assert_eq!(
            history[tail.first as usize].role,
            Role::User,
            "the cut starts a turn"
        );

        // After it, the context starts at the first kept entry: nothing more to compact.
        let kept: Vec<_> = history[tail.first as usize..]
            .iter()
            .map(testing::entry)
            .collect();
        let after = TestHost::new().transcript(history.clone()).context(kept);
        let again = after.run(|| engine.compact(request)).unwrap();
        assert!(!again.compacted, "{again:?}");
        assert!(again.reason.unwrap().starts_with("nothing to compact"));
    });
}

#[test]
fn tools_describe_expand_page_and_grep_and_say_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let mut history = session(12, None);
    history[1].text = "z".repeat(40_000);
    let host = TestHost::new().transcript(history.clone());
    host.run(|| {
        let mut engine = fed(dir.path(), &history);
        let (text, failed) = call(&mut engine, "lossless_describe", json!({"node": "s1-0"}));
        assert!(!failed, "{text}");
        assert!(text.starts_with("s1-0 · entries 0–"), "{text}");
        assert!(text.contains("children: s0-0, s0-1, s0-2"), "{text}");

        let (page, _) = call(&mut engine, "lossless_expand", json!({"node": "s0-0"}));
        assert!(
            page.contains("[entry 0 · 00000000 · user]\nRequest 0:"),
            "{page}"
        );
        assert!(page.contains("lossless_expand {\"node\":\"s0-0\",\"offset\":16000}"));
        let (rest, _) = call(
            &mut engine,
            "lossless_expand",
            json!({"node": "s0-0", "offset": 16000}),
        );
        assert!(rest.contains("[continued: 16000 of"), "{rest}");

        let (error, failed) = call(&mut engine, "lossless_expand", json!({"node": "leaf 3"}));
        assert!(
            failed && error.contains("`leaf 3` is not a node id"),
            "{error}"
        );
        let (error, failed) = call(&mut engine, "lossless_describe", json!({"node": "s9-0"}));
        assert!(
            failed && error.contains("no node s9-0 in this session (levels 0–"),
            "{error}"
        );
        let (error, failed) = call(
            &mut engine,
            "lossless_expand",
            json!({"node": "s0-0", "offset": 999_999}),
        );
        assert!(failed && error.contains("past the end of s0-0"), "{error}");

        let (hits, failed) = call(&mut engine, "lossless_grep", json!({"query": "module_2"}));
        assert!(!failed, "{hits}");
        assert!(hits.contains("in s0-1 < s1-0"), "{hits}");
        let (none, failed) = call(&mut engine, "lossless_grep", json!({"query": "qwertyuiop"}));
        assert!(failed && none.contains("nothing matches"), "{none}");
    });
}

#[test]
fn info_says_it_owns_compaction_and_tool_names_are_its_own() {
    let info = Lossless::info();
    assert_eq!(info.id, "lossless");
    assert!(info.owns_compaction);
    let names: BTreeSet<String> = Lossless::default()
        .tools()
        .specs()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        ["lossless_describe", "lossless_expand", "lossless_grep"]
    );
}

/// A plan as the messages it sends, in order: each kept entry by its position, each insert
/// by its JSON (what the host compares to see whether a request extends the previous one).
fn sent(plan: &AssembleResult, history: &[Message]) -> Vec<String> {
    let kept = |first: EntryRef, last: EntryRef| {
        history
            .iter()
            .filter(move |m| (first..=last).contains(&m.entry))
            .map(|m| format!("entry {}", m.entry))
    };
    plan.items
        .iter()
        .flat_map(|item| -> Vec<String> {
            match item {
                ContextItem::Insert(json) => vec![json.clone()],
                ContextItem::KeepRange(range) => kept(range.first, range.last).collect(),
                ContextItem::Keep(entry) => kept(*entry, *entry).collect(),
            }
        })
        .collect()
}

#[test]
fn between_recuts_each_request_extends_the_previous_and_recuts_are_rare_and_large() {
    const BUDGET: u32 = 3_000;
    let low = (f64::from(BUDGET) * crate::window::LOW_WATER) as u32;
    let dir = tempfile::tempdir().unwrap();
    let history = session(300, Some(500));
    let count = history.last().unwrap().entry + 1;
    let host = TestHost::new().transcript(history.clone());
    host.run(|| {
        let mut engine = fresh(dir.path(), 0);
        let mut previous: Option<Vec<String>> = None;
        let (mut turns, mut recuts) = (0, 0);
        for (n, message) in history.iter().enumerate() {
            engine
                .ingest(&testing::session(), message.clone(), false)
                .unwrap();
            if message.role != Role::User {
                continue;
            }
            // Halfway, a fresh instance: it reads the saved layout and carries on with it.
            let restarted = n == history.len() / 2;
            if restarted {
                engine = fresh(dir.path(), count);
            }
            let plan = assemble(&mut engine, &history[..=n], BUDGET);
            assert!(plan.estimated_tokens <= BUDGET, "{}", plan.estimated_tokens);
            let now = sent(&plan, &history[..=n]);
            turns += 1;
            if let Some(before) = &previous
                && !now.starts_with(before)
            {
                recuts += 1;
                assert!(!restarted, "turn {turns}: the fresh instance re-cut");
                assert!(
                    plan.estimated_tokens <= low,
                    "turn {turns}: a re-cut leaves {} tokens, over the low water {low}",
                    plan.estimated_tokens
                );
            }
            previous = Some(now);
        }
        // Each turn adds about 150 tokens and a re-cut leaves at least the 40% headroom
        // (1,200 tokens): 12 re-cuts here, where a cut made afresh each turn moves whenever a
        // leaf closes (every other turn).
        assert_eq!(turns, 300);
        assert!(
            (1..=turns / 15).contains(&recuts),
            "{recuts} re-cuts in {turns} turns"
        );

        let plan = assemble(&mut engine, &history, BUDGET);
        let (found, _) = reachable(&mut engine, &plan, &history);
        for turn in 0..300 {
            let request = format!("Request {turn}: please refactor module_{turn}");
            assert!(found.contains(&request), "{request:?} is not reachable");
        }
    });
}
