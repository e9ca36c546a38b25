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

/// A session long enough that its index spans many pages.
fn long_session(id: &str, requests: usize) -> Transcript {
    let mut t = Transcript::new(id, "/work", TS);
    for i in 0..requests {
        t.append_message(&json!({"role": "user", "content": format!("request number{i} about module{i} and the parser"), "timestamp": i}), TS).unwrap();
        t.append_message(&json!({"role": "assistant", "content": format!("answer number{i}: {}", "lorem ipsum dolor ".repeat(20)), "timestamp": i}), TS).unwrap();
    }
    t
}

/// Overwrites every page after the first with junk, as a bad disk or a torn copy leaves it,
/// and bumps the header's change counter so an open connection re-reads the pages.
fn damage_middle_pages(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let page = match u16::from_be_bytes([bytes[16], bytes[17]]) {
        1 => 65_536,
        n => usize::from(n),
    };
    assert!(
        bytes.len() > 3 * page,
        "index too small to damage: {} bytes",
        bytes.len()
    );
    for (i, b) in bytes[page..].iter_mut().enumerate() {
        *b = (i % 251) as u8 ^ 0xA5;
    }
    let counter = u32::from_be_bytes(bytes[24..28].try_into().unwrap()).wrapping_add(1);
    bytes[24..28].copy_from_slice(&counter.to_be_bytes());
    std::fs::write(path, bytes).unwrap();
}

fn file_is_sound(path: &Path) -> bool {
    let conn = Connection::open(path).unwrap();
    conn.query_row("PRAGMA integrity_check", [], |r| r.get::<_, String>(0))
        .is_ok_and(|check| check == "ok")
}

#[test]
fn an_index_damaged_in_the_middle_is_rebuilt_when_opened() {
    let dir = tempfile::tempdir().unwrap();
    let t = long_session("s1", 300);
    let mut first = index(&dir);
    first.sync(&t).unwrap();
    let path = first.path().to_path_buf();
    drop(first);
    damage_middle_pages(&path);

    let mut reopened = index(&dir);
    let index = &mut reopened;
    index.sync(&t).unwrap();
    let hits = index.search(&t, &SearchQuery::words("number123")).unwrap();
    assert_eq!(ids(&hits), [246, 247]);
    assert!(file_is_sound(&path), "the index on disk was not rebuilt");
}

#[test]
fn damage_found_by_a_search_rebuilds_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let t = long_session("s1", 300);
    let mut index = index(&dir);
    index.sync(&t).unwrap();
    // Damaged under an open index: only the search itself can find it.
    damage_middle_pages(index.path());

    let hits = index.search(&t, &SearchQuery::words("module7")).unwrap();
    assert_eq!(ids(&hits), [14]);
    assert!(
        file_is_sound(index.path()),
        "the index on disk was not rebuilt"
    );
    // And it keeps working afterwards.
    let hits = index.search(&t, &SearchQuery::words("module299")).unwrap();
    assert_eq!(ids(&hits), [598]);
}

#[test]
fn damage_found_while_catching_up_rebuilds_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = long_session("s1", 300);
    let mut index = index(&dir);
    index.sync(&t).unwrap();
    damage_middle_pages(index.path());
    t.append_message(
        &json!({"role": "user", "content": "now the appended zeppelin request", "timestamp": 999}),
        TS,
    )
    .unwrap();

    let report = index.sync(&t).unwrap();
    assert!(report.rebuilt, "{report:?}");
    assert_eq!(
        ids(&index.search(&t, &SearchQuery::words("zeppelin")).unwrap()),
        [600]
    );
    assert_eq!(
        ids(&index.search(&t, &SearchQuery::words("module5")).unwrap()),
        [10]
    );
    assert!(
        file_is_sound(index.path()),
        "the index on disk was not rebuilt"
    );
}

/// A transcript whose directory cannot hold a file for anyone, root included: its "directory"
/// is a regular file.
fn unwritable_transcript_path(dir: &tempfile::TempDir) -> PathBuf {
    let not_a_dir = dir.path().join("shared");
    std::fs::write(&not_a_dir, b"a file where a directory is expected").unwrap();
    not_a_dir.join("s.jsonl")
}

#[test]
fn an_index_that_cannot_sit_beside_its_transcript_goes_to_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let transcript = unwritable_transcript_path(&dir);
    let cached = cache_index_path_in(home.path(), &transcript);
    let t = session("s1");

    let mut index = RecallIndex::open_with_cache(&transcript, Some(&cached)).unwrap();
    assert_eq!(index.path(), cached);
    index.sync(&t).unwrap();
    assert_eq!(
        ids(&index.search(&t, &SearchQuery::words("maxRetries")).unwrap()),
        [3]
    );
    drop(index);
    // The next process finds it already built.
    let mut index = RecallIndex::open_with_cache(&transcript, Some(&cached)).unwrap();
    assert!(!index.sync(&t).unwrap().rebuilt);
}

#[test]
fn an_index_with_nowhere_to_go_lives_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let transcript = unwritable_transcript_path(&dir);
    // The cache is unreachable too.
    let cached = dir.path().join("shared").join("cache").join("x.sqlite");
    let t = session("s1");

    let mut index = RecallIndex::open_with_cache(&transcript, Some(&cached)).unwrap();
    assert!(index.is_in_memory());
    index.sync(&t).unwrap();
    assert_eq!(
        ids(&index.search(&t, &SearchQuery::words("maxRetries")).unwrap()),
        [3]
    );
    assert_eq!(index.size_bytes(), 0);
}

#[test]
fn a_read_only_index_file_is_not_used() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let transcript = dir.path().join("s.jsonl");
    let t = session("s1");
    RecallIndex::open(&transcript).unwrap().sync(&t).unwrap();
    // Read-only even for root: SQLite opens it with the read-only flag.
    let beside = index_path(&transcript);
    let cached = cache_index_path_in(home.path(), &transcript);
    let conn =
        Connection::open_with_flags(&beside, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    assert!(
        prepare(&conn).is_err(),
        "a read-only connection passed the write probe"
    );
    drop(conn);
    let mut index = RecallIndex::open_with_cache(&transcript, Some(&cached)).unwrap();
    index.sync(&t).unwrap();
    assert_eq!(
        ids(&index.search(&t, &SearchQuery::words("maxRetries")).unwrap()),
        [3]
    );
}

#[test]
fn parts_of_identifiers_and_paths_find_their_entry() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = session("s1");
    t.append_message(
        &json!({"role": "user", "content": "look at AssembleTurn first", "timestamp": 5}),
        TS,
    )
    .unwrap();
    t.append_message(&json!({"role": "user", "content": "then src/session/driver.rs and build_context", "timestamp": 6}), TS).unwrap();
    let mut index = index(&dir);
    index.sync(&t).unwrap();
    for (words, entry) in [
        ("turn", 4),
        ("assemble", 4),
        ("assembleturn", 4),
        ("driver", 5),
        ("build", 5),
    ] {
        assert_eq!(
            ids(&index.search(&t, &SearchQuery::words(words)).unwrap()),
            [entry],
            "{words}"
        );
    }
}

#[test]
fn an_index_of_an_older_schema_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let t = session("s1");
    let mut index = index(&dir);
    index.sync(&t).unwrap();
    index
        .conn
        .borrow()
        .execute(
            "UPDATE meta SET value = ?1 WHERE key = 'schema'",
            [SCHEMA - 1],
        )
        .unwrap();
    drop(index);
    let mut index = RecallIndex::open(&dir.path().join("s.jsonl")).unwrap();
    assert!(index.sync(&t).unwrap().rebuilt);
    assert_eq!(
        ids(&index.search(&t, &SearchQuery::words("retries")).unwrap()),
        [3]
    );
}

#[test]
fn entries_missing_one_word_come_before_those_holding_only_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = Transcript::new("s1", "/work", TS);
    // Short and dense in one rare word: bm25 alone puts it first among entries holding any.
    t.append_message(
        &json!({"role": "user", "content": "zeppelin zeppelin", "timestamp": 1}),
        TS,
    )
    .unwrap();
    t.append_message(&json!({"role": "user", "content": "the parser drops the websocket frame header when it is long, see the notes about it", "timestamp": 2}), TS).unwrap();
    for i in 0..20 {
        t.append_message(&json!({"role": "assistant", "content": format!("parser websocket frame note {i}"), "timestamp": 3}), TS).unwrap();
    }
    let mut index = index(&dir);
    index.sync(&t).unwrap();
    // "zeppelin" is misremembered; the request holds the other three words.
    let query = SearchQuery {
        limit: Some(1),
        ..SearchQuery::words("parser header zeppelin drops")
    };
    assert_eq!(ids(&index.search(&t, &query).unwrap()), [1]);
}

#[test]
fn repeated_errors_leave_room_for_other_texts() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = Transcript::new("s-repeats", "/work", TS);
    // The same short error twelve times outranks the one longer message holding both words.
    for i in 0..12 {
        t.append_message(&json!({"role": "toolResult", "toolCallId": format!("c{i}"), "toolName": "bash", "isError": true,
            "content": [{"type": "text", "text": "socket timeout"}], "timestamp": i}), TS).unwrap();
    }
    t.append_message(&json!({"role": "user", "content": "The socket timeout in the deploy script happens only on the staging host", "timestamp": 20}), TS).unwrap();
    let mut index = index(&dir);
    index.sync(&t).unwrap();
    let hits = index
        .search(&t, &SearchQuery::words("socket timeout"))
        .unwrap();
    assert_eq!(
        hits.len(),
        2,
        "one of the twelve copies, and the other text"
    );
    assert_eq!(
        hits[1].entry, 12,
        "the longer message is listed beside the error"
    );
}

#[test]
fn tool_calls_without_text_are_told_apart_by_their_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = Transcript::new("s-calls", "/work", TS);
    for (i, path) in ["src/deploy.rs", "src/retry.rs"].iter().enumerate() {
        t.append_message(&json!({"role": "assistant", "content": [{"type": "toolCall", "id": format!("c{i}"), "name": "read",
            "arguments": {"path": path}}], "timestamp": i}), TS).unwrap();
    }
    let mut index = index(&dir);
    index.sync(&t).unwrap();
    let hits = index.search(&t, &SearchQuery::words("read src")).unwrap();
    assert_eq!(hits.len(), 2, "two different calls, both listed");
}

#[test]
fn words_held_by_more_entries_than_a_round_ranks_are_found_among_the_newest() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = Transcript::new("s-window", "/work", TS);
    // The oldest entry would rank first (a user request holding both words) but is older than
    // the newest RANKED_WINDOW entries holding them.
    t.append_message(
        &json!({"role": "user", "content": "socket timeout on the staging host", "timestamp": 0}),
        TS,
    )
    .unwrap();
    let newer = RANKED_WINDOW as usize + 100;
    for i in 0..newer {
        t.append_message(&json!({"role": "assistant", "content": format!("retry {i} after the socket timeout in step {i}"), "timestamp": i + 1}), TS).unwrap();
    }
    let mut index = index(&dir);
    index.sync(&t).unwrap();
    let hits = index
        .search(&t, &SearchQuery::words("socket timeout"))
        .unwrap();
    assert_eq!(hits.len(), 10, "{hits:?}");
    let oldest_ranked = newer + 1 - RANKED_WINDOW as usize;
    assert!(
        hits.iter().all(|h| h.entry as usize >= oldest_ranked),
        "{hits:?}"
    );
    let hits = index
        .search(&t, &SearchQuery::words("socket timeout staging"))
        .unwrap();
    assert_eq!(hits[0].entry, 0, "a word only it holds finds it: {hits:?}");
}
