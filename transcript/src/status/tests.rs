use std::io::Write as _;

use super::*;
use crate::compaction::{self, Extractive, Request, Settings};
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
            .run(&Extractive, &mut |_, _| {});
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
    assert_eq!(last.details.unwrap()["layer"], "summarize");
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
    assert_eq!(s.count_source, CountSource::ByteSearch);
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

#[test]
fn v1_files_are_parsed_whole() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v1.jsonl");
    std::fs::write(
        &p,
        "{\"type\":\"session\",\"id\":\"s\"}\n{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"12345678\"}}\n",
    )
    .unwrap();
    let s = scan(&p).unwrap();
    assert_eq!(s.version, 1);
    assert_eq!(s.context_tokens, 2);
    assert_eq!(s.count_source, CountSource::FullParse);
}

#[test]
fn counting_finds_needles_across_block_edges() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("n.txt");
    let mut data = vec![b'x'; 4 * BLOCK - 3];
    data.extend_from_slice(b"\"type\":\"compaction\"");
    data.extend_from_slice(b"\"type\":\"compaction\"");
    std::fs::write(&p, &data).unwrap();
    assert_eq!(
        count_occurrences(&p, b"\"type\":\"compaction\"").unwrap(),
        2
    );
}
