use ctxhost_transcript::{NewCompaction, Role, Transcript};
use serde_json::json;

use super::*;

const TS: &str = "2026-11-25T10:00:00.000Z";

fn session(id: &str) -> Transcript {
    let mut t = Transcript::new(id, "/work", TS);
    t.append_message(&json!({"role": "user", "content": "Please fix the flaky websocket reconnect test", "timestamp": 1}), TS).unwrap();
    t.append_message(&json!({"role": "assistant", "content": [
        {"type": "text", "text": "Running it."},
        {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": "cargo test reconnect"}}
    ], "timestamp": 2}), TS).unwrap();
    t.append_message(&json!({"role": "toolResult", "toolCallId": "c1", "toolName": "bash", "isError": true,
        "content": [{"type": "text", "text": "error[E0308]: mismatched types in src/net/socket.rs"}], "timestamp": 3}), TS).unwrap();
    t.append_message(&json!({"role": "user", "content": "Also rename the config key to maxRetries", "timestamp": 4}), TS).unwrap();
    t
}

fn index(dir: &tempfile::TempDir) -> RecallIndex {
    RecallIndex::open(&dir.path().join("s.jsonl")).unwrap()
}

fn ids(hits: &[Hit]) -> Vec<u32> {
    hits.iter().map(|h| h.entry).collect()
}

#[test]
fn finds_entries_by_their_words_ranked_with_filters() {
    let dir = tempfile::tempdir().unwrap();
    let t = session("s1");
    let mut index = index(&dir);
    let report = index.sync(&t).unwrap();
    assert_eq!(
        report,
        SyncReport {
            rebuilt: true,
            entries: 4
        }
    );

    let hits = index
        .search(&t, &SearchQuery::words("websocket reconnect"))
        .unwrap();
    // The user's request holds both words; the tool call only "reconnect".
    assert_eq!(ids(&hits), [0, 1]);
    assert!(
        hits[0].snippet.contains("flaky websocket reconnect"),
        "{:?}",
        hits[0]
    );
    assert_eq!(hits[0].role, "user");
    assert!(hits[0].in_context);

    let failures = SearchQuery {
        is_error: Some(true),
        ..SearchQuery::words("mismatched types")
    };
    let hits = index.search(&t, &failures).unwrap();
    assert_eq!(ids(&hits), [2]);
    assert_eq!(hits[0].tool.as_deref(), Some("bash"));
    assert!(hits[0].is_error);

    let users = SearchQuery {
        role: Some(Role::User),
        ..SearchQuery::words("rename reconnect")
    };
    assert_eq!(ids(&index.search(&t, &users).unwrap()), [3, 0]);
    // Stemming: "renaming" finds "rename".
    assert_eq!(
        ids(&index.search(&t, &SearchQuery::words("renaming")).unwrap()),
        [3]
    );
}

#[test]
fn appends_are_caught_up_and_other_files_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = session("s1");
    let mut index = index(&dir);
    index.sync(&t).unwrap();
    assert_eq!(index.sync(&t).unwrap(), SyncReport::default());

    t.append_message(
        &json!({"role": "user", "content": "now deploy to staging", "timestamp": 5}),
        TS,
    )
    .unwrap();
    assert_eq!(
        index.sync(&t).unwrap(),
        SyncReport {
            rebuilt: false,
            entries: 1
        }
    );
    assert_eq!(
        ids(&index.search(&t, &SearchQuery::words("staging")).unwrap()),
        [4]
    );

    // Reopening keeps what was built.
    drop(index);
    let mut index = self::index(&dir);
    assert_eq!(index.sync(&t).unwrap(), SyncReport::default());

    // Another session under the same path (a rewrite, a new file): rebuilt, old rows gone.
    let mut other = Transcript::new("s2", "/work", TS);
    other
        .append_message(
            &json!({"role": "user", "content": "something else entirely"}),
            TS,
        )
        .unwrap();
    assert!(index.sync(&other).unwrap().rebuilt);
    assert!(
        index
            .search(&other, &SearchQuery::words("staging"))
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        ids(&index
            .search(&other, &SearchQuery::words("entirely"))
            .unwrap()),
        [0]
    );
}

#[test]
fn compacted_entries_stay_findable_and_say_they_left_the_context() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = session("s1");
    let kept = t.entries()[3].id().to_string();
    t.append_compaction(
        &NewCompaction {
            summary: "The user asked to fix a flaky test.".into(),
            first_kept_entry_id: kept,
            tokens_before: 100,
            details: None,
        },
        TS,
    )
    .unwrap();
    let mut index = index(&dir);
    index.sync(&t).unwrap();
    let hits = index.search(&t, &SearchQuery::words("websocket")).unwrap();
    assert_eq!(ids(&hits), [0]);
    assert!(!hits[0].in_context, "the request was summarized away");
    // The summary itself is indexed too.
    let hits = index.search(&t, &SearchQuery::words("flaky")).unwrap();
    assert!(
        hits.iter().any(|h| h.role == "compactionSummary"),
        "{hits:?}"
    );
}

#[test]
fn a_corrupt_or_foreign_index_file_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let t = session("s1");
    let path = index_path(&dir.path().join("s.jsonl"));
    std::fs::write(
        &path,
        b"this is not a database, just junk bytes ".repeat(200),
    )
    .unwrap();
    let mut index = index(&dir);
    index.sync(&t).unwrap();
    assert_eq!(
        ids(&index.search(&t, &SearchQuery::words("maxRetries")).unwrap()),
        [3]
    );
}
