//! Whole-file checks on a generated session and on the real pi session in ../shared/data.

use std::path::PathBuf;
use std::time::Instant;

use ctxhost_transcript::compaction::{self, Settings};
use ctxhost_transcript::generate::coding_session;
use ctxhost_transcript::{Role, Transcript};
use serde_json::Value;

fn shared(name: &str) -> Option<PathBuf> {
    let path = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/data")).join(name);
    if path.exists() {
        Some(path)
    } else {
        println!("skipped: ../shared/data absent");
        None
    }
}

/// The `message` member's text, found independently of the crate: in these files it is the
/// last member of each message line.
fn message_text_of(line: &str) -> &str {
    let start = line.find(",\"message\":").expect("message member") + ",\"message\":".len();
    &line[start..line.len() - 1]
}

fn assert_message_json_byte_identical(t: &Transcript) -> usize {
    let mut n = 0;
    for e in t.entries().iter().filter(|e| e.entry_type() == "message") {
        let json = e.message_json();
        assert_eq!(json, message_text_of(e.line()), "entry {}", e.id());
        let from_line: Value = serde_json::from_str(e.line()).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&json).unwrap(),
            from_line["message"]
        );
        n += 1;
    }
    n
}

#[test]
fn generated_session_message_json_is_byte_identical() {
    let t = Transcript::parse(&coding_session(42, 500), "gen").unwrap();
    assert_eq!(assert_message_json_byte_identical(&t), 500);
}

#[test]
fn real_pi_session() {
    let Some(path) = shared("pi-large-session.jsonl") else {
        return;
    };
    let started = Instant::now();
    let t = Transcript::load(&path).unwrap();
    println!(
        "loaded {} entries in {:?}",
        t.entries().len(),
        started.elapsed()
    );
    assert_eq!(t.header().version(), 1);
    assert!(t.warnings().is_empty(), "{:?}", t.warnings());
    assert_eq!(assert_message_json_byte_identical(&t), 914);

    let views: Vec<_> = t.entries().iter().filter_map(|e| e.view()).collect();
    assert_eq!(views.len(), 914);
    let failed = views
        .iter()
        .filter(|v| v.role == Role::ToolResult && v.is_error)
        .count();
    assert_eq!(failed, 19);
    let tools: std::collections::BTreeSet<_> = views
        .iter()
        .flat_map(|v| &v.tool_calls)
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        tools.into_iter().collect::<Vec<_>>(),
        ["bash", "edit", "read", "write"]
    );

    // linear v1: the active branch is the whole file
    assert_eq!(t.active_branch().len(), t.entries().len());
    assert_eq!(t.context().len(), 914);
    let started = Instant::now();
    let tokens = t.context_tokens();
    println!("context_tokens {tokens} in {:?}", started.elapsed());
    assert!(tokens > 10_000, "{tokens}");

    // migrated to v3 and read back: same structure, stable text
    let v3 = t.to_v3_string();
    let again = Transcript::parse(&v3, "v3").unwrap();
    assert_eq!(again.header().version(), 3);
    assert_eq!(again.context_tokens(), tokens);
    assert_eq!(again.to_v3_string(), v3);
    for (a, b) in t.entries().iter().zip(again.entries()) {
        assert_eq!(a.message_json(), b.message_json());
        assert_eq!(a.id(), b.id());
    }

    let p = compaction::prepare(&t, &Settings::default(), &compaction::Request::default())
        .expect("a large session compacts")
        .run(&compaction::Extractive);
    assert_ne!(
        t.entries()[p.first_kept_index].context_role(),
        Some(Role::ToolResult)
    );
    assert!(p.summary.contains("## Files modified"));
    assert!(p.summary.chars().count() <= compaction::extractive::MAX_CHARS);
}
