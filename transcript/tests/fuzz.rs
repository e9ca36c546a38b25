//! A stable-toolchain fuzz harness for the transcript reader and the status scan: a
//! deterministic mutation loop over generated transcripts, bounded in time
//! (`CTXHOST_FUZZ_SECS`, default 3 s; `CTXHOST_FUZZ_SEED` picks another sequence).
//!
//! Feedback stands in for coverage: a mutant whose outcome (the error's problem kind, the
//! warnings' kinds, the count source) was not seen before joins the pool that later mutants are
//! made from, so the loop digs into new reader paths instead of repeating one. Every file in
//! `tests/fuzz-corpus/` (cases found so far) is checked first, on every run.
//!
//! Checked on each input: nothing panics; a file that loads also scans, with the same context
//! size, message count, warnings and (when counted from the file) compaction count; a file
//! that does not load does not scan either, refused in the same words.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ctxhost_transcript::generate::{Mutator, coding_session};
use ctxhost_transcript::status::{self, CountSource};
use ctxhost_transcript::{NewCompaction, Transcript};

/// Fragments that reach the reader's special cases.
const TOKENS: &[&[u8]] = &[
    b"}{",
    b"\n",
    b"\r\n",
    b"\xef\xbb\xbf",
    b"\xff\xfe",
    b"\"type\":\"compaction\"",
    b"\"type\" : \"compaction\"",
    b"\"typ\\u0065\"",
    b"\"parentId\":null",
    b"\"firstKeptEntryId\":\"00000000\"",
    b"18446744073709551615",
    b"1e308",
    b"-1",
    b"[1,2]",
    b"\"role\":\"narrator\"",
    b"\"timestamp\":\"never\"",
    b"{",
    b"\"",
    b"\\",
];

/// The seeds: generated sessions with and without compactions, branches, v1.
fn seeds() -> Vec<Vec<u8>> {
    let mut seeds = vec![coding_session(11, 40).into_bytes()];
    let mut t = Transcript::parse(&coding_session(12, 60), "seed").unwrap();
    for k in 0..2 {
        let ctx = t.context();
        let kept = t.entries()[ctx[ctx.len() / 2 + k]].id().to_string();
        let details = if k == 0 {
            serde_json::json!({"layer": "summarize"})
        } else {
            serde_json::json!({"layer": "summarize", "compactionCount": 2, "summaryCount": 2})
        };
        t.append_compaction(
            &NewCompaction {
                summary: "earlier work".into(),
                first_kept_entry_id: kept,
                tokens_before: 1000,
                details: Some(details),
            },
            "2026-01-01T00:00:00.000Z",
        )
        .unwrap();
        t.append_message(
            &serde_json::json!({"role": "user", "content": "go on"}),
            "2026-01-01T00:00:01.000Z",
        )
        .unwrap();
    }
    // Appends draw random ids; fixed ones keep every run's inputs the same.
    let mut text = t.to_v3_string();
    let fresh: Vec<String> = t.entries()[t.entries().len() - 4..]
        .iter()
        .map(|e| e.id().to_string())
        .collect();
    for (k, id) in fresh.iter().enumerate() {
        text = text.replace(&format!("\"{id}\""), &format!("\"f000000{k}\""));
    }
    seeds.push(text.into_bytes());
    seeds.push(
        b"{\"type\":\"session\",\"id\":\"v1\"}\n{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"x\"}}\n{\"type\":\"compaction\",\"summary\":\"s\",\"firstKeptEntryIndex\":1,\"tokensBefore\":5}\n"
            .to_vec(),
    );
    seeds
}

/// The kind of a problem or warning text, without its variable parts (ids, numbers).
fn kind(text: &str) -> String {
    text.split(|c: char| c == '"' || c == ':' || c.is_ascii_digit())
        .next()
        .unwrap_or("")
        .to_string()
}

/// Check one input; returns its outcome signature.
fn check(path: &Path, bytes: &[u8]) -> String {
    std::fs::write(path, bytes).unwrap();
    let loaded = Transcript::load(path);
    let scanned = status::scan(path);
    match (&loaded, &scanned) {
        (Ok(t), Ok(s)) => {
            let context = |what: &str| format!("{what} differs on {}", keep_case(bytes));
            assert_eq!(
                s.context_tokens,
                t.context_tokens(),
                "{}",
                context("context size")
            );
            assert_eq!(
                s.context_messages,
                t.context().len(),
                "{}",
                context("message count")
            );
            assert_eq!(s.warnings, t.warnings(), "{}", context("warnings"));
            if s.count_source != CountSource::Details {
                assert_eq!(
                    s.compaction_count,
                    t.compaction_count() as u64,
                    "{}",
                    context("compaction count")
                );
            }
            let warnings: Vec<String> = t.warnings().iter().map(|w| kind(&w.message)).collect();
            format!("ok {} {warnings:?}", s.count_source.as_str())
        }
        (Ok(_), Err(e)) => panic!("loads but status fails ({e}) on {}", keep_case(bytes)),
        (Err(e), Ok(_)) => panic!(
            "status accepts what loading refuses ({e}) on {}",
            keep_case(bytes)
        ),
        (Err(e), Err(refused)) => {
            // One reader, one verdict: the same words, naming the same line.
            assert_eq!(
                refused.to_string(),
                e.to_string(),
                "on {}",
                keep_case(bytes)
            );
            let problem = e.to_string();
            assert!(
                problem.starts_with(&path.display().to_string()),
                "errors name the file: {problem}"
            );
            assert!(!problem.contains("struct "), "a Rust type name: {problem}");
            let after_line = problem.splitn(3, ':').nth(2).unwrap_or("");
            format!("err {}", kind(after_line.trim()))
        }
    }
}

/// Save a failing input where it can be inspected (and copied into the corpus).
fn keep_case(bytes: &[u8]) -> String {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-failure.jsonl");
    std::fs::write(&path, bytes).unwrap();
    path.display().to_string()
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-corpus")
}

#[test]
fn reader_and_status_survive_mutations() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.jsonl");
    let mut seen = HashSet::new();
    let mut pool = seeds();
    let mut corpus: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    corpus.sort();
    for case in &corpus {
        let bytes = std::fs::read(case).unwrap();
        seen.insert(check(&path, &bytes));
        pool.push(bytes);
    }
    for seed in pool.clone() {
        seen.insert(check(&path, &seed));
    }
    let secs = std::env::var("CTXHOST_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let seed = std::env::var("CTXHOST_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_cafe_u64);
    let mut rng = Mutator::new(seed);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut runs = 0u64;
    while Instant::now() < deadline {
        let parent = &pool[rng.below(pool.len())];
        let child = rng.mutate(parent, TOKENS);
        let outcome = check(&path, &child);
        runs += 1;
        if seen.insert(outcome) && pool.len() < 512 {
            pool.push(child);
        }
    }
    println!(
        "{runs} mutants in {secs} s, {} outcome kinds, pool {}",
        seen.len(),
        pool.len()
    );
    assert!(runs > 0);
}
