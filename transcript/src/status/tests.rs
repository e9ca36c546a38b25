use std::io::Write as _;

use serde_json::Value;

use super::*;
use crate::compaction::{self, Extractive, Layer, Request, Settings};
use crate::generate::coding_session;

/// A session with `n` summarizing compactions, written to a file.
fn compacted(dir: &Path, n: usize) -> (std::path::PathBuf, Transcript) {
    let mut t = Transcript::parse(&coding_session(3, 1200), "g").unwrap();
    for k in 0..n {
        let mut s = Settings {
            context_window: (t.context_tokens() as f64 / 0.9) as u64,
            ..Settings::default()
        };
        s.policy.prune_minimum_tokens = u64::MAX;
        s.policy.summarize_keep_recent_tokens = 30_000 - 5000 * k as u64;
        let plan = compaction::prepare(&t, &s, &Request::default())
            .unwrap()
            .run(&Extractive);
        t.append_compaction(&plan.to_new_compaction(), "2026-01-01T00:00:00.000Z")
            .unwrap();
    }
    let path = dir.join("s.jsonl");
    std::fs::write(&path, t.to_v3_string()).unwrap();
    (path, t)
}

#[test]
fn backward_scan_agrees_with_a_full_load() {
    let dir = tempfile::tempdir().unwrap();
    let (path, t) = compacted(dir.path(), 2);
    let s = scan(&path).unwrap();
    assert_eq!(s.context_tokens, t.context_tokens());
    assert_eq!(s.context_messages, t.context().len());
    assert_eq!(s.compaction_count, 2);
    assert_eq!(s.summary_count, 2);
    assert_eq!(s.count_source, CountSource::Details);
    let last = s.last_compaction.unwrap();
    let c = t.context()[0];
    assert_eq!(last.id, t.entries()[c].id());
    assert_eq!(last.details.unwrap().layer, Some(Layer::Summarize));
    assert!(
        s.bytes_scanned < s.file_bytes / 2,
        "{} of {}",
        s.bytes_scanned,
        s.file_bytes
    );
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
}

#[test]
fn no_compaction_reads_everything_and_counts_zero() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let text = coding_session(1, 200);
    std::fs::write(&path, &text).unwrap();
    let s = scan(&path).unwrap();
    let t = Transcript::parse(&text, "x").unwrap();
    assert_eq!(s.context_tokens, t.context_tokens());
    assert_eq!(s.compaction_count, 0);
    assert!(s.last_compaction.is_none());
}

#[test]
fn foreign_compactions_are_counted_by_byte_search_and_torn_tails_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (path, t) = compacted(dir.path(), 1);
    // strip our counters, as another writer would have written it
    let text = t
        .to_v3_string()
        .replace("\"compactionCount\":1,", "")
        .replace("\"summaryCount\":1,", "");
    std::fs::write(&path, &text).unwrap();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(b"{\"type\":\"message\",\"id\":\"zz").unwrap();
    drop(f);
    let s = scan(&path).unwrap();
    assert_eq!(s.count_source, CountSource::ActiveBranch);
    assert_eq!(s.compaction_count, 1);
    assert_eq!(s.warnings.len(), 1, "{:?}", s.warnings);
    let lines = text.lines().count();
    assert_eq!(s.warnings[0].line, lines + 1, "{}", s.warnings[0]);
    assert_eq!(s.context_tokens, t.context_tokens());
}

#[test]
fn bad_input_names_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("b.jsonl");
    std::fs::write(&p, "").unwrap();
    assert!(
        scan(&p)
            .unwrap_err()
            .to_string()
            .contains("b.jsonl:1: empty file")
    );
    std::fs::write(&p, "hello\n").unwrap();
    assert!(
        scan(&p)
            .unwrap_err()
            .to_string()
            .contains("b.jsonl:1: first line is not a session header")
    );
    let mut text = coding_session(1, 20);
    text.push_str("{broken\n");
    text.push_str(coding_session(1, 20).lines().last().unwrap());
    text.push('\n');
    std::fs::write(&p, &text).unwrap();
    let lines = coding_session(1, 20).lines().count();
    let err = scan(&p).unwrap_err().to_string();
    assert!(
        err.contains(&format!("b.jsonl:{}: not valid JSON", lines + 1)),
        "{err}"
    );
}

/// What a scan must agree on with a full load of the same file.
fn assert_same_as_load(path: &Path, source: CountSource) -> Status {
    let t = Transcript::load(path).unwrap();
    let s = scan(path).unwrap();
    assert_eq!(s.context_tokens, t.context_tokens());
    assert_eq!(s.context_messages, t.context().len());
    assert_eq!(s.compaction_count, t.compaction_count() as u64);
    assert_eq!(s.version, t.header().version());
    assert_eq!(s.warnings, t.warnings());
    assert_eq!(s.count_source, source);
    s
}

#[test]
fn v1_files_without_a_compaction_are_walked_not_parsed() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v1.jsonl");
    std::fs::write(
        &p,
        "{\"type\":\"session\",\"id\":\"s\"}\n{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"12345678\"}}\n",
    )
    .unwrap();
    let s = assert_same_as_load(&p, CountSource::ActiveBranch);
    assert_eq!((s.version, s.context_tokens), (1, 2));

    let text = crate::generate::to_v1(&coding_session(8, 400));
    std::fs::write(&p, &text).unwrap();
    let s = assert_same_as_load(&p, CountSource::ActiveBranch);
    assert!(s.context_messages > 300, "{}", s.context_messages);
    for window in [1_000, 10_000_000] {
        let mut t = Transcript::load(&p).unwrap();
        t.set_context_window(Some(window));
        assert_eq!(
            scan_for_window(&p, window).unwrap().context_tokens,
            t.context_tokens()
        );
    }

    // A torn last line is reported on its line, as loading reports it.
    std::fs::write(&p, format!("{text}{{\"type\":\"mess")).unwrap();
    let s = assert_same_as_load(&p, CountSource::ActiveBranch);
    assert_eq!(s.warnings.len(), 1, "{:?}", s.warnings);

    // The shared pi session is a v1 file of the real kind.
    let shared =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/pi-large-session.jsonl");
    if shared.is_file() {
        assert_same_as_load(&shared, CountSource::ActiveBranch);
    }
}

#[test]
fn v1_files_with_a_compaction_or_a_line_of_two_entries_are_parsed_whole() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v1.jsonl");
    let text = crate::generate::to_v1(&coding_session(9, 60));
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines.insert(
        30,
        r#"{"type":"compaction","timestamp":"2025-01-01T00:00:00.000Z","summary":"s","firstKeptEntryIndex":20,"tokensBefore":5}"#.into(),
    );
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    let s = assert_same_as_load(&p, CountSource::FullParse);
    assert_eq!(s.compaction_count, 1);

    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let joined = format!("{}{}", lines[10], lines[11]);
    lines.splice(10..12, [joined]);
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    let s = assert_same_as_load(&p, CountSource::FullParse);
    assert_eq!(s.warnings.len(), 1, "pi skips the line, and says so");
}

#[test]
fn a_first_parent_outside_the_file_is_a_root_found_in_one_pass() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("o.jsonl");
    let text = crate::generate::with_outside_parent(&coding_session(4, 300), "feedf00d");
    std::fs::write(&p, &text).unwrap();
    let s = assert_same_as_load(&p, CountSource::ActiveBranch);
    assert_eq!(s.warnings.len(), 1, "{:?}", s.warnings);
    assert_eq!(s.warnings[0].line, 2, "{}", s.warnings[0]);

    // With compactions another writer made (no running counts): the branch is walked to the
    // same root and its compactions counted.
    let (path, t) = compacted(dir.path(), 2);
    let outside = crate::generate::with_outside_parent(&foreign(&t), "feedf00d");
    std::fs::write(&path, &outside).unwrap();
    let loaded = Transcript::load(&path).unwrap();
    let s = scan(&path).unwrap();
    assert_eq!(s.count_source, CountSource::ActiveBranch);
    assert_eq!((s.compaction_count, s.summary_count), (2, 2));
    assert_eq!(s.context_tokens, loaded.context_tokens());
    assert_eq!(s.context_messages, loaded.context().len());
}

#[test]
fn a_parent_later_in_the_file_is_left_to_the_full_load_and_a_shared_line_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("f.jsonl");
    let header = r#"{"type":"session","version":3,"id":"s","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}"#;
    let user = |id: &str, parent: &str, text: &str| {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":{parent},"message":{{"role":"user","content":"{text}"}}}}"#
        )
    };
    // The parent of `x` is written after it.
    let lines = [
        header.to_string(),
        user("x", "\"p\"", "second"),
        user("p", "null", "first, written later"),
        user("y", "\"x\"", "third"),
    ];
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    let s = assert_same_as_load(&p, CountSource::FullParse);
    assert_eq!(s.context_messages, 3);

    // The parent of `x` is the second entry of a line of two.
    let lines = [
        header.to_string(),
        format!(
            "{}{}",
            user("q", "null", "zero"),
            user("p", "\"q\"", "first")
        ),
        user("x", "\"p\"", "second"),
        user("y", "\"x\"", "third"),
    ];
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    // The check reads both entries of the line: the file is one chain, measured without a
    // full load.
    let s = assert_same_as_load(&p, CountSource::ActiveBranch);
    assert_eq!(s.context_messages, 4);
}

/// `value` written with a space after every colon and comma: the same JSON, spelled otherwise.
fn spaced(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let members: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{}: {}", Value::String(k.clone()), spaced(v)))
                .collect();
            format!("{{ {} }}", members.join(", "))
        }
        Value::Array(a) => {
            let items: Vec<String> = a.iter().map(spaced).collect();
            format!("[{}]", items.join(", "))
        }
        other => other.to_string(),
    }
}

/// A file as another writer would leave it: no counters in the compactions' details.
fn foreign(t: &Transcript) -> String {
    t.to_v3_string()
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if let Some(d) = v.get_mut("details").and_then(Value::as_object_mut) {
                d.remove("compactionCount");
                d.remove("summaryCount");
            }
            v.to_string() + "\n"
        })
        .collect()
}

#[test]
fn compaction_count_is_right_on_any_json_spelling() {
    let dir = tempfile::tempdir().unwrap();
    let (path, t) = compacted(dir.path(), 3);
    let text = foreign(&t);
    std::fs::write(&path, &text).unwrap();
    let plain = scan(&path).unwrap();
    assert_eq!((plain.compaction_count, plain.summary_count), (3, 3));
    assert_eq!(plain.count_source, CountSource::ActiveBranch);

    // re-serialised with spaces after colons: the same answer
    let spaced_text: String = text
        .lines()
        .map(|l| spaced(&serde_json::from_str(l).unwrap()) + "\n")
        .collect();
    assert!(spaced_text.contains("\"type\": \"compaction\""));
    std::fs::write(&path, &spaced_text).unwrap();
    let s = scan(&path).unwrap();
    assert_eq!((s.compaction_count, s.summary_count), (3, 3));
    assert_eq!(s.context_tokens, plain.context_tokens);
    assert_eq!(s.context_messages, plain.context_messages);

    // member names and values spelled with escapes
    let escaped = text.replace(
        "\"type\":\"compaction\"",
        r#""typ\u0065":"compactio\u006e""#,
    );
    assert_ne!(escaped, text);
    std::fs::write(&path, &escaped).unwrap();
    assert_eq!(scan(&path).unwrap().compaction_count, 3);
    assert_eq!(Transcript::load(&path).unwrap().compaction_count(), 3);
}

#[test]
fn compactions_on_other_branches_or_in_nested_data_are_not_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.jsonl");
    let header = r#"{"type":"session","version":3,"id":"s","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}"#;
    let user = |id: &str, parent: &str| {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":{parent},"message":{{"role":"user","content":"hello"}}}}"#
        )
    };
    let compaction = |id: &str, parent: &str, kept: &str| {
        format!(
            r#"{{"type":"compaction","id":"{id}","parentId":"{parent}","summary":"s","firstKeptEntryId":"{kept}","tokensBefore":10,"timestamp":"2025-01-01T00:00:00.000Z"}}"#
        )
    };
    let lines = [
        header.to_string(),
        user("a", "null"),
        user("b", "\"a\""),
        // an abandoned branch with two compactions of its own
        compaction("x1", "b", "b"),
        compaction("x2", "x1", "b"),
        // nested data that looks like a compaction
        r#"{"type":"custom","id":"n","parentId":"b","customType":"k","data":{"type":"compaction","id":"q","parentId":"b","summary":"s","firstKeptEntryId":"b"}}"#.to_string(),
        compaction("c", "n", "b"),
        user("d", "\"c\""),
    ];
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let s = scan(&path).unwrap();
    let t = Transcript::load(&path).unwrap();
    assert_eq!(t.compaction_count(), 1);
    assert_eq!(s.compaction_count, 1);
    assert_eq!(s.summary_count, 1);
    assert_eq!(s.last_compaction.unwrap().id, "c");
    assert_eq!(s.context_tokens, t.context_tokens());
}

#[test]
fn status_rejects_what_loading_rejects() {
    let dir = tempfile::tempdir().unwrap();
    let (path, t) = compacted(dir.path(), 1);
    // the latest compaction keeps an entry that is not in the file
    let c = t.context()[0];
    let kept = t.entries()[c].first_kept_entry_id().unwrap().to_string();
    let text = t.to_v3_string().replace(
        &format!("\"firstKeptEntryId\":\"{kept}\""),
        "\"firstKeptEntryId\":\"gone0000\"",
    );
    std::fs::write(&path, &text).unwrap();
    let loaded = Transcript::load(&path).unwrap_err().to_string();
    let scanned = scan(&path).unwrap_err().to_string();
    assert_eq!(scanned, loaded);
    assert!(scanned.contains("\"gone0000\""), "{scanned}");
}

/// One reader, one verdict: whatever is wrong, and wherever it is (before the tail the walk
/// reads, off the active branch), status refuses what loading refuses in the same words, and
/// warns as loading warns.
#[test]
fn status_and_loading_give_one_verdict_on_malformed_files() {
    let dir = tempfile::tempdir().unwrap();
    let (path, t) = compacted(dir.path(), 1);
    let good = t.to_v3_string();
    let lines: Vec<&str> = good.lines().collect();
    let second = lines[2];
    let id_of_second = t.entries()[1].id();
    // `lines[2]` with its text changed: a line early in the file, long before the tail.
    let with_early = |replaced: &str| {
        let mut out: Vec<&str> = lines.clone();
        out[2] = replaced;
        (out.join("\n") + "\n").into_bytes()
    };
    let mut invalid_utf8 = with_early(second);
    let at = good.find(second).unwrap() + second.len() / 2;
    invalid_utf8[at] = 0xff;
    let duplicate = second.replacen(id_of_second, t.entries()[0].id(), 1);
    let second_header = r#"{"type":"session","version":3,"id":"again"}"#.to_string();
    let no_id = second.replacen(&format!("\"id\":\"{id_of_second}\","), "", 1);
    let no_role = r#"{"type":"message","id":"n0","parentId":null,"message":{"content":"x"}}"#;
    let side_branch_orphan =
        r#"{"type":"custom","id":"s0","parentId":"nowhere","customType":"x"}"#.to_string();
    let cycle = [
        r#"{"type":"custom","id":"c1","parentId":"c2","customType":"x"}"#,
        r#"{"type":"custom","id":"c2","parentId":"c1","customType":"x"}"#,
    ]
    .join("\n");
    let glued = format!("{second}{}", lines[3]);
    let implausible = r#"{"type":"compaction","id":"k0","parentId":null,"summary":"s","firstKeptEntryId":"k0","tokensBefore":-5}"#;
    // The second entry's id, every char replaced: the same length, another id.
    let renamed: String = id_of_second
        .chars()
        .map(|c| if c == 'z' { 'y' } else { 'z' })
        .collect();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("invalid UTF-8", invalid_utf8),
        ("syntax error", with_early(&second[..second.len() - 1])),
        ("duplicate id", with_early(&duplicate)),
        ("second header", with_early(&second_header)),
        ("entry without id", with_early(&no_id)),
        ("message without role", with_early(no_role)),
        ("array", with_early("[1,2]")),
        (
            "parent not in the file, off the branch",
            with_early(&format!("{second}\n{side_branch_orphan}")),
        ),
        (
            "a parent cycle off the branch",
            with_early(&format!("{second}\n{cycle}")),
        ),
        ("two entries on one line", with_early(&glued)),
        (
            "implausible figure",
            with_early(&format!("{second}\n{implausible}")),
        ),
        (
            "torn last line",
            format!("{good}{{\"type\":\"mess").into_bytes(),
        ),
        (
            "unterminated last line",
            format!("{good}{}", &second[..20]).into_bytes(),
        ),
        (
            "truncated",
            good.as_bytes()[..good.len() - second.len() / 2].to_vec(),
        ),
        (
            "rewritten in place at the same length",
            with_early(&second.replacen(id_of_second, &renamed, 1)),
        ),
        (
            "appended with a malformed line",
            format!("{good}{{\"type\":\"message\",\"id\":\n").into_bytes(),
        ),
    ];
    for (kind, bytes) in cases {
        // Status of the good file remembered, then the file written in place (same inode).
        let checked = tempfile::tempdir().unwrap();
        std::fs::write(&path, &good).unwrap();
        scan_remembering(&path, u64::MAX, checked.path()).unwrap();
        std::fs::write(&path, &bytes).unwrap();
        let loaded = Transcript::load(&path);
        for (how, scanned) in [
            ("whole", scan(&path)),
            ("resumed", scan_remembering(&path, u64::MAX, checked.path())),
        ] {
            match (&loaded, scanned) {
                (Err(l), Err(s)) => assert_eq!(s.to_string(), l.to_string(), "{kind}, {how}"),
                (Ok(l), Ok(s)) => {
                    assert_eq!(s.warnings, l.warnings(), "{kind}, {how}");
                    assert_eq!(s.context_tokens, l.context_tokens(), "{kind}, {how}");
                }
                (l, s) => panic!(
                    "{kind}, {how}: loading says {:?}, status {:?}",
                    l.as_ref().err(),
                    s.err()
                ),
            }
        }
    }
}

/// A status that remembers what it checked gives what a whole check gives as the file grows,
/// and on a file whose first lines were replaced at the same length.
#[test]
fn a_remembered_status_is_a_whole_status() {
    let dir = tempfile::tempdir().unwrap();
    let checked = tempfile::tempdir().unwrap();
    let (path, t) = compacted(dir.path(), 2);
    let text = t.to_v3_string();
    let lines: Vec<&str> = text.lines().collect();
    let same = |a: &Status, b: &Status| {
        assert_eq!(
            (a.context_tokens, a.context_messages, a.compaction_count),
            (b.context_tokens, b.context_messages, b.compaction_count)
        );
        assert_eq!(a.warnings, b.warnings);
    };
    // Grown in 20 steps, each appending some lines (the compactions among them).
    let step = lines.len().div_ceil(40);
    for end in (lines.len() / 2..=lines.len()).step_by(step) {
        std::fs::write(&path, lines[..end].join("\n") + "\n").unwrap();
        same(
            &scan_remembering(&path, u64::MAX, checked.path()).unwrap(),
            &scan(&path).unwrap(),
        );
    }
    assert_eq!(std::fs::read_dir(checked.path()).unwrap().count(), 1);
}

#[test]
fn status_reads_concatenated_lines_boms_and_names_arrays() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.jsonl");
    let text = coding_session(4, 30);
    let mut lines: Vec<&str> = text.lines().collect();
    let joined = format!("{}{}", lines[5], lines[6]);
    lines.splice(5..7, [joined.as_str()]);
    let glued = format!("\u{feff}{}\n", lines.join("\n"));
    std::fs::write(&path, &glued).unwrap();
    let t = Transcript::load(&path).unwrap();
    let s = scan(&path).unwrap();
    assert_eq!(s.context_tokens, t.context_tokens());
    assert_eq!(s.context_messages, t.context().len());
    assert_eq!(s.warnings, t.warnings());
    assert_eq!(s.warnings.len(), 1, "{:?}", s.warnings);
    assert_eq!(s.warnings[0].line, 6);

    // a line that is valid JSON but an array is named as such
    let mut bad: Vec<&str> = text.lines().collect();
    bad.insert(3, "[1, 2]");
    std::fs::write(&path, bad.join("\n") + "\n").unwrap();
    let e = scan(&path).unwrap_err().to_string();
    assert!(
        e.contains(":4: entry is an array, not a JSON object"),
        "{e}"
    );
    let e = Transcript::load(&path).unwrap_err().to_string();
    assert!(
        e.contains(":4: entry is an array, not a JSON object"),
        "{e}"
    );
}

#[test]
fn an_unreadable_compaction_timestamp_is_unknown_not_1970() {
    let dir = tempfile::tempdir().unwrap();
    let (path, t) = compacted(dir.path(), 1);
    let text = t.to_v3_string().replace(
        "\"timestamp\":\"2026-01-01T00:00:00.000Z\"",
        "\"timestamp\":\"yesterday\"",
    );
    std::fs::write(&path, &text).unwrap();
    let last = scan(&path).unwrap().last_compaction.unwrap();
    assert_eq!(last.timestamp, None);
    std::fs::write(&path, t.to_v3_string()).unwrap();
    let last = scan(&path).unwrap().last_compaction.unwrap();
    assert_eq!(
        last.timestamp,
        Some(crate::time::parse_iso_ms("2026-01-01T00:00:00.000Z").unwrap())
    );
}

#[test]
fn usage_from_another_window_is_not_the_status() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.jsonl");
    let text = coding_session(6, 120);
    std::fs::write(&path, &text).unwrap();
    let t = Transcript::parse(&text, "x").unwrap();
    let recorded = scan(&path).unwrap().context_tokens;
    assert_eq!(recorded, t.context_tokens());
    let estimated: u64 = t
        .context()
        .iter()
        .map(|&i| u64::from(t.entries()[i].tokens()))
        .sum();
    assert_ne!(recorded, estimated, "the session records usage");
    // a window the recorded figures do not fit: estimates, as the full load says
    let small = recorded / 2;
    let s = scan_for_window(&path, small).unwrap();
    assert_eq!(s.context_tokens, t.context_tokens_in_window(small));
    assert_eq!(s.context_tokens, estimated);
    assert_eq!(
        scan_for_window(&path, recorded).unwrap().context_tokens,
        recorded
    );
}

#[test]
fn invalid_utf8_in_the_tail_names_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("u.jsonl");
    let text = coding_session(2, 30);
    let mut bytes = text.clone().into_bytes();
    // break the last line's text: a lone continuation byte
    let at = text.trim_end().rfind("\"role\"").unwrap();
    bytes[at + 2] = 0x80;
    std::fs::write(&path, &bytes).unwrap();
    let lines = text.lines().count();
    let scanned = scan(&path).unwrap_err().to_string();
    let loaded = Transcript::load(&path).unwrap_err().to_string();
    assert!(
        scanned.contains(&format!("u.jsonl:{lines}: not valid UTF-8")),
        "{scanned}"
    );
    assert_eq!(scanned, loaded);
}

/// Without a compaction the walk gathers the context itself (no parse of the file): the same
/// figures as a full load, at any window, with the implausible usage it read reported on its
/// line, and through a branch.
#[test]
fn a_branch_without_a_compaction_is_measured_in_one_pass() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let mut text = coding_session(4, 300);
    // A branch: the last entry hangs off an early one, so most of the file is off the branch.
    let t = Transcript::parse(&text, "x").unwrap();
    let early = t.entries()[40].id().to_string();
    text.push_str(&format!(
        "{{\"type\":\"message\",\"id\":\"zz1\",\"parentId\":\"{early}\",\"message\":{{\"role\":\"assistant\",\"content\":\"x\",\"usage\":{{\"totalTokens\":1e300}}}}}}\n"
    ));
    text.push_str(
        "{\"type\":\"message\",\"id\":\"zz2\",\"parentId\":\"zz1\",\"message\":{\"role\":\"user\",\"content\":\"more\"}}\n",
    );
    std::fs::write(&path, &text).unwrap();
    let mut t = Transcript::load(&path).unwrap();
    for window in [None, Some(1_000), Some(10_000_000)] {
        t.set_context_window(window);
        let s = match window {
            Some(w) => scan_for_window(&path, w).unwrap(),
            None => scan(&path).unwrap(),
        };
        assert_eq!(s.context_tokens, t.context_tokens(), "window {window:?}");
        assert_eq!(s.context_messages, t.context().len(), "window {window:?}");
        assert_eq!(s.compaction_count, 0);
        for w in &s.warnings {
            assert!(t.warnings().contains(w), "{w:?} not in {:?}", t.warnings());
        }
        assert_eq!(s.warnings.len(), 1, "{:?}", s.warnings);
    }
}

/// A string cut after its backslash at the very end of a line is an error, not a panic.
#[test]
fn a_line_ending_in_an_escape_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let mut text = coding_session(2, 10);
    text.push_str("{\"type\":\"message\",\"id\":\"q\",\"x\":\"\\\n");
    std::fs::write(&path, &text).unwrap();
    assert!(scan(&path).is_err());
    assert!(Transcript::load(&path).is_err());
}
