use super::*;
use crate::capture::tests::{call, message, result};
use crate::checkpoint::Status;
use ctxhost_sdk::{ContextEntry, ContextItem, Session};

const NOW: u64 = 1_700_000_000_000;

fn start<'a>(key: &'a str, file: &'a str, entry_count: u32) -> Start<'a> {
    Start {
        key,
        session_file: file,
        entry_count: Some(entry_count),
        leading_summary: None,
        config: Config::default(),
    }
}

/// An assemble request whose entries add up to `tokens` (the host's estimate); the
/// recorded-usage figure says something else, which the gauge must ignore.
fn request(tokens: u32, mut entries: Vec<ContextEntry>) -> AssembleRequest {
    let others: u32 = entries.iter().skip(1).map(|e| e.tokens).sum();
    if let Some(first) = entries.first_mut() {
        first.tokens = tokens.saturating_sub(others);
    }
    AssembleRequest {
        session: Session {
            id: "s".into(),
            key: "agent:main:main".into(),
        },
        token_budget: None,
        context_window: 32_000,
        context_tokens: tokens.saturating_mul(7),
        available_tools: vec![],
        entries: entries.into(),
        model: None,
        prompt: None,
    }
}

fn entry(entry: u32, role: Role) -> ContextEntry {
    ContextEntry::new(entry, role, 10)
}

/// A short coding exchange: a task, a read, a failed and a successful edit, a reply.
fn work(state: &mut SessionState) {
    state.ingest(&message(Role::User, "Rename the parser module"), NOW);
    state.ingest(&call("c1", "read", r#"{"path":"src/parser.rs"}"#), NOW);
    state.ingest(&result("c1", "read", "fn parse() {}", false), NOW);
    state.ingest(&call("c2", "edit", r#"{"path":"src/parser.rs"}"#), NOW);
    state.ingest(&result("c2", "edit", "Could not find the text", true), NOW);
    state.ingest(&call("c3", "edit", r#"{"path":"src/parser.rs"}"#), NOW);
}

/// The gauge notes an assembly carries, in order.
fn gauge_notes(result: &AssembleResult) -> Vec<String> {
    (result.items.iter())
        .filter_map(|item| match item {
            ContextItem::Insert(json) => serde_json::from_str::<Value>(json).ok(),
            _ => None,
        })
        .filter(|m| m["customType"] == GAUGE_CUSTOM_TYPE)
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn gauge_lines_and_the_checkpoint_at_eighty_percent() {
    let root = tempfile::tempdir().unwrap();
    let mut state = SessionState::open(root.path(), start("agent:main:main", "a.jsonl", 0));
    work(&mut state);
    let entries = vec![entry(0, Role::User), entry(1, Role::Assistant)];

    let quiet = state.assemble(&request(10_000, entries.clone()), NOW);
    assert_eq!(quiet.system_prompt_addition, None);
    // Both entries, as one range.
    assert_eq!(
        quiet.items,
        [ContextItem::KeepRange(ctxhost_sdk::KeepRange {
            first: 0,
            last: 1
        })]
    );

    let shown = state.assemble(&request(23_000, entries.clone()), NOW);
    assert_eq!(
        shown.system_prompt_addition, None,
        "never in the system prompt"
    );
    assert_eq!(gauge_notes(&shown), ["[Context: 71% | 23k/32k tokens]"]);
    assert!(state.latest().is_none());

    let saved = state.assemble(&request(26_000, entries.clone()), NOW);
    assert_eq!(
        gauge_notes(&saved),
        [
            "[Context: 71% | 23k/32k tokens]",
            "[Context: 81% | 26k/32k tokens | Checkpoint saved]"
        ]
    );
    let checkpoint = state.latest().unwrap().clone();
    assert_eq!(checkpoint.meta.checkpoint_id, "cp_001");
    assert_eq!(checkpoint.meta.trigger, Trigger::Auto80Pct);
    assert_eq!(checkpoint.meta.token_usage.utilization, 0.81);
    assert_eq!(
        (
            checkpoint.meta.agent_id.as_deref(),
            checkpoint.meta.channel.as_deref()
        ),
        (Some("main"), Some("main"))
    );
    assert_eq!(checkpoint.resources.files_modified, ["src/parser.rs"]);
    assert_eq!(checkpoint.working.status, Status::InProgress);
    assert_eq!(
        checkpoint.open_items,
        ["\"edit\" on src/parser.rs: Could not find the text"]
    );

    // Within 5% of the last one: no rewrite, the line still says saved.
    state.assemble(&request(27_000, entries.clone()), NOW);
    assert_eq!(
        Store::new(root.path(), "agent:main:main").checkpoint_numbers(),
        [1]
    );
    state.assemble(&request(27_400, entries), NOW);
    assert_eq!(
        Store::new(root.path(), "agent:main:main").checkpoint_numbers(),
        [1, 2]
    );
}

#[test]
fn the_gauge_reads_the_hosts_estimate_with_the_restore_not_recorded_usage() {
    let root = tempfile::tempdir().unwrap();
    let mut state = SessionState::open(root.path(), start("k", "a.jsonl", 0));
    work(&mut state);
    let mut usage_says_full = request(10_000, vec![entry(0, Role::User)]);
    usage_says_full.context_tokens = 150_000;
    assert!(
        gauge_notes(&state.assemble(&usage_says_full, NOW)).is_empty(),
        "10k of 32k is quiet whatever the recorded usage says"
    );
    state.before_compaction(Some(25_000), NOW);
    state.after_compaction(true);
    let after = request(22_500, vec![entry(9, Role::CompactionSummary)]);
    let assembled = state.assemble(&after, NOW);
    let restore = state.restore().unwrap();
    let expected = 22_500 + ctxhost_sdk::estimate_tokens(restore);
    assert_eq!(
        gauge_notes(&assembled),
        [gauge::line(expected, 32_000, false)],
        "the inserted restore counts"
    );
}

#[test]
fn each_assembly_extends_the_previous_one_between_compactions() {
    let root = tempfile::tempdir().unwrap();
    let mut state = SessionState::open(root.path(), start("k", "a.jsonl", 0));
    work(&mut state);
    let mut previous: Option<Vec<ContextItem>> = None;
    let mut notes = 0;
    // From 60% to 95% of the window, one message a turn: the gauge starts, steps and saves a
    // checkpoint, and every request still starts with the whole previous one.
    for n in 0..36u32 {
        let entries: Vec<_> = (0..=n).map(|i| entry(i, Role::User)).collect();
        let result = state.assemble(&request(19_200 + n * 320, entries), NOW);
        assert_eq!(result.system_prompt_addition, None);
        if let Some(previous) = &previous {
            let expanded = expand(&result.items);
            let before = expand(previous);
            assert!(
                expanded.starts_with(&before),
                "turn {n}: {before:?} is not a prefix of {expanded:?}"
            );
        }
        notes = gauge_notes(&result).len();
        previous = Some(result.items);
    }
    // 70% to 95% in steps of 5 points, and the checkpoint saved at 80%.
    assert!((5..=8).contains(&notes), "{notes} notes");
}

#[test]
fn the_users_prompt_stays_the_last_message_the_model_reads() {
    let root = tempfile::tempdir().unwrap();
    let mut state = SessionState::open(root.path(), start("k", "a.jsonl", 0));
    work(&mut state);
    let entries = vec![
        entry(0, Role::User),
        entry(1, Role::Assistant),
        entry(2, Role::User),
    ];
    let result = state.assemble(&request(23_000, entries), NOW);
    assert_eq!(gauge_notes(&result).len(), 1);
    let expanded = expand(&result.items);
    assert!(
        matches!(expanded.last(), Some(ContextItem::Keep(2))),
        "the prompt last, the note before it: {expanded:?}"
    );
    assert!(
        matches!(expanded[2], ContextItem::Insert(_)),
        "{expanded:?}"
    );
}

#[test]
fn a_reading_inside_a_tool_loop_waits_for_the_next_turn() {
    let root = tempfile::tempdir().unwrap();
    let mut state = SessionState::open(root.path(), start("k", "a.jsonl", 0));
    work(&mut state);
    let mut tool_result = entry(3, Role::ToolResult);
    tool_result.tool_name = Some("read".into());
    let mut entries = vec![
        entry(0, Role::User),
        entry(1, Role::Assistant),
        entry(2, Role::User),
        tool_result,
    ];
    let in_loop = state.assemble(&request(23_000, entries.clone()), NOW);
    assert!(
        gauge_notes(&in_loop).is_empty(),
        "no note inside the tool loop"
    );
    entries.extend([entry(4, Role::Assistant), entry(5, Role::User)]);
    let next = expand(&state.assemble(&request(23_500, entries), NOW).items);
    assert!(matches!(next[5], ContextItem::Insert(_)), "{next:?}");
    assert!(
        matches!(next.last(), Some(ContextItem::Keep(5))),
        "{next:?}"
    );
    assert!(
        next.starts_with(&expand(&in_loop.items)),
        "the loop's request stays a prefix"
    );
}

/// Items with ranges spelled out, so a grown range compares as an extension.
fn expand(items: &[ContextItem]) -> Vec<ContextItem> {
    let mut out = Vec::new();
    for item in items {
        match item {
            ContextItem::KeepRange(range) => {
                out.extend((range.first..=range.last).map(ContextItem::Keep));
            }
            other => out.push(other.clone()),
        }
    }
    out
}

#[test]
fn compaction_writes_first_then_the_next_assemble_restores() {
    let root = tempfile::tempdir().unwrap();
    let mut state = SessionState::open(root.path(), start("k", "a.jsonl", 0));
    work(&mut state);
    state.assemble(&request(20_000, vec![entry(0, Role::User)]), NOW);
    state.before_compaction(Some(25_000), NOW);
    let written = state.latest().unwrap().clone();
    assert_eq!(written.meta.trigger, Trigger::Compaction);
    assert_eq!(written.meta.compaction_count, 1);
    assert!(
        written.working.interrupted,
        "compacted between a tool call and its result"
    );
    assert_eq!(written.working.last_tool_call.as_deref(), Some("edit"));
    state.after_compaction(true);

    let after = vec![
        entry(9, Role::CompactionSummary),
        entry(5, Role::ToolResult),
    ];
    let assembled = state.assemble(&request(8_000, after.clone()), NOW);
    assert_eq!(assembled.items[0], ContextItem::Keep(9));
    assert_eq!(assembled.items[2], ContextItem::Keep(5));
    let ContextItem::Insert(json) = &assembled.items[1] else {
        panic!("the restore follows the summary: {:?}", assembled.items)
    };
    let inserted: Value = serde_json::from_str(json).unwrap();
    assert_eq!(inserted["customType"], restore::CUSTOM_TYPE);
    let text = inserted["content"].as_str().unwrap();
    assert!(text.starts_with("[Checkpoint cp_001 of k,"), "{text}");
    assert!(text.contains("the context was compacted"));
    assert!(text.contains("\nNext: "), "{text}");
    assert!(
        !text.contains("Modified: src/parser.rs"),
        "the runtime's summary lists the files: {text}"
    );

    // It stays until the next compaction replaces it.
    let again = state.assemble(&request(8_500, after), NOW);
    assert_eq!(again.items.len(), 3);
    state.before_compaction(Some(25_000), NOW);
    state.after_compaction(true);
    let next = state.assemble(
        &request(8_000, vec![entry(20, Role::CompactionSummary)]),
        NOW,
    );
    let ContextItem::Insert(json) = &next.items[1] else {
        panic!()
    };
    assert!(json.contains("cp_002"), "{json}");

    // A compaction that compacted nothing does not count.
    state.before_compaction(Some(25_000), NOW);
    state.after_compaction(false);
    state.before_compaction(Some(25_000), NOW);
    assert_eq!(state.latest().unwrap().meta.compaction_count, 3);
}

/// An instance started again on the same transcript after the one before it compacted, as
/// OpenClaw starts one per turn: `leading` is the summary the context now starts with.
fn started_again<'a>(file: &'a str, leading: Option<u32>) -> Start<'a> {
    Start {
        leading_summary: leading,
        ..start("k", file, 12)
    }
}

#[test]
fn an_instance_started_again_shows_what_the_one_before_showed() {
    let root = tempfile::tempdir().unwrap();
    let mut first = SessionState::open(root.path(), start("k", "a.jsonl", 0));
    work(&mut first);
    let before: Vec<_> = (0..4).map(|i| entry(i, Role::User)).collect();
    // Nothing to show yet (no note, no summary): still on disk, or the first compaction would
    // look like an old one to the next instance.
    let plain = first.assemble(&request(1_000, before), NOW);
    assert!(gauge_notes(&plain).is_empty());
    // It compacts and goes away before assembling again.
    first.before_compaction(Some(25_000), NOW);
    first.after_compaction(true);
    drop(first);

    let after = vec![entry(9, Role::CompactionSummary), entry(3, Role::User)];
    let mut second = SessionState::open(root.path(), started_again("a.jsonl", Some(9)));
    let restored = second.assemble(&request(8_000, after.clone()), NOW);
    assert!(
        second
            .restore()
            .is_some_and(|r| r.contains("the context was compacted")),
        "the compaction the instance before made still gets its restore: {:?}",
        restored.items
    );
    let more: Vec<_> = after
        .iter()
        .cloned()
        .chain([entry(10, Role::Assistant)])
        .collect();
    let noted = second.assemble(&request(24_000, more.clone()), NOW);
    assert!(matches!(&noted.items[1], ContextItem::Insert(json) if json.contains("cp_001")));
    assert_eq!(gauge_notes(&noted).len(), 1);
    drop(second);

    // The next one plans what the last one did, restore and note in their places.
    let mut third = SessionState::open(root.path(), started_again("a.jsonl", Some(9)));
    assert_eq!(
        third.assemble(&request(24_000, more.clone()), NOW).items,
        noted.items
    );
    // Another transcript under the key starts from its own context: no note of this one's.
    let mut other = SessionState::open(root.path(), started_again("b.jsonl", Some(9)));
    assert!(gauge_notes(&other.assemble(&request(8_000, more), NOW)).is_empty());
}

#[test]
fn a_checkpoint_keeps_what_the_last_message_left_going_on_for_the_next_instance() {
    let root = tempfile::tempdir().unwrap();
    let mut first = SessionState::open(root.path(), start("k", "a.jsonl", 0));
    work(&mut first);
    let working = first.capture.working(false);
    assert_eq!(working.status, Status::InProgress);
    first.end(NOW);
    drop(first);

    let reopened = SessionState::open(root.path(), start("k", "a.jsonl", 7));
    assert_eq!(reopened.capture.working(false), working);
    // Another transcript under the key starts its own thread.
    let other = SessionState::open(root.path(), start("k", "b.jsonl", 0));
    assert_eq!(other.capture.status(), Status::Idle);
}

#[test]
fn a_new_session_with_the_same_key_is_restored_and_a_reopened_one_is_not() {
    let root = tempfile::tempdir().unwrap();
    let mut first = SessionState::open(root.path(), start("k", "a.jsonl", 0));
    work(&mut first);
    first.end(NOW);
    assert_eq!(first.latest().unwrap().meta.trigger, Trigger::SessionEnd);
    first.end(NOW + 1);
    assert_eq!(
        Store::new(root.path(), "k").checkpoint_numbers(),
        [1],
        "nothing new to save"
    );

    // The same transcript reopened: no restore, the capture carries on.
    let reopened = SessionState::open(root.path(), start("k", "a.jsonl", 7));
    assert_eq!(reopened.restore(), None);
    assert_eq!(reopened.capture.resources.files_read.0, ["src/parser.rs"]);

    // Another transcript under the same key: restored on the first assemble.
    let mut second = SessionState::open(root.path(), start("k", "b.jsonl", 0));
    let assembled = second.assemble(&request(100, vec![]), NOW);
    let ContextItem::Insert(json) = &assembled.items[0] else {
        panic!("expected the restore: {:?}", assembled.items)
    };
    assert!(json.contains("a new session started"), "{json}");
    assert!(json.contains("Rename the parser module"), "{json}");
    assert_eq!(second.compaction_count, 0);
}

#[test]
fn state_files_are_saved_at_a_bounded_rate() {
    let root = tempfile::tempdir().unwrap();
    let mut state = SessionState::open(root.path(), start("k", "a.jsonl", 0));
    let store = Store::new(root.path(), "k");
    let saved = |store: &Store| store.load_state::<Value>(store::RESOURCES).unwrap();
    let count = |store: &Store| {
        let files = saved(store).unwrap().data["files_read"].clone();
        files.as_array().unwrap().len()
    };
    state.ingest(&call("c", "read", r#"{"path":"src/first.rs"}"#), NOW);
    assert_eq!(count(&store), 1, "the first change is saved at once");
    for i in 0..SAVE_EVERY_MESSAGES - 1 {
        let path = format!(r#"{{"path":"src/f{i}.rs"}}"#);
        state.ingest(&call(&format!("c{i}"), "read", &path), NOW + 10);
    }
    assert_eq!(count(&store), 1, "within the interval: not on every ingest");
    state.ingest(&call("c", "read", r#"{"path":"src/last.rs"}"#), NOW + 20);
    let n = SAVE_EVERY_MESSAGES as usize;
    assert_eq!(count(&store), n + 1, "after the count");
    state.ingest(&call("c", "read", r#"{"path":"src/later.rs"}"#), NOW + 30);
    let much_later = NOW + 30 + SAVE_INTERVAL_MS;
    state.ingest(&call("c", "read", r#"{"path":"src/z.rs"}"#), much_later);
    assert_eq!(count(&store), n + 3, "after the interval");
}

#[test]
fn state_files_survive_a_crash_and_stale_ones_give_way_to_the_checkpoint() {
    let root = tempfile::tempdir().unwrap();
    let mut state = SessionState::open(root.path(), start("k", "a.jsonl", 0));
    work(&mut state);
    let store = Store::new(root.path(), "k");
    assert!(
        store
            .load_state::<Value>(store::RESOURCES)
            .unwrap()
            .is_none(),
        "state files are not rewritten on every ingest"
    );
    state.ingest(
        &message(Role::Assistant, "Working on it"),
        NOW + SAVE_INTERVAL_MS,
    );
    drop(state); // a crash: no checkpoint was written
    let resumed = SessionState::open(root.path(), start("k", "a.jsonl", 6));
    assert_eq!(
        resumed.capture.resources.files_modified.0,
        ["src/parser.rs"]
    );
    assert_eq!(resumed.capture.open_items.open.len(), 1);

    // State files older than the newest checkpoint are discarded; the checkpoint seeds the
    // capture instead.
    let mut state = resumed;
    state.write_checkpoint(Trigger::SessionEnd, 0, false, NOW + 60_000);
    assert!(
        store
            .load_state::<Value>(store::RESOURCES)
            .unwrap()
            .is_some()
    );
    let reopened = SessionState::open(root.path(), start("k", "a.jsonl", 6));
    assert!(
        store
            .load_state::<Value>(store::RESOURCES)
            .unwrap()
            .is_none()
    );
    assert_eq!(
        reopened.capture.resources.files_modified.0,
        ["src/parser.rs"]
    );
    assert_eq!(
        reopened.capture.open_items(),
        ["\"edit\" on src/parser.rs: Could not find the text"]
    );
}
