//! `ctxhost compact` and `ctxhost context ...` as an operator runs them, in a scratch home.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn ctxhost(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ctxhost"))
        .args(args)
        .env("CTXHOST_HOME", home)
        .env_remove("CTXHOST_CONFIG")
        .stdin(Stdio::null())
        .output()
        .expect("run ctxhost")
}

fn json_of(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "ctxhost failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("stdout is JSON")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A generated session stored under a key in the home.
fn session(home: &Path, messages: usize) -> std::path::PathBuf {
    let dir = home.join("sessions");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("agent%3Amain%3Amain.jsonl");
    std::fs::write(
        &path,
        ctxhost_transcript::generate::coding_session(4, messages),
    )
    .unwrap();
    path
}

#[test]
fn dry_run_compact_status_history_inspect_by_key() {
    let home = tempfile::tempdir().unwrap();
    let path = session(home.path(), 600);
    let before = std::fs::read(&path).unwrap();
    let key = "agent:main:main";

    let dry = json_of(&ctxhost(
        home.path(),
        &["compact", "--session", key, "--dry-run", "--json"],
    ));
    assert_eq!(dry["wouldCompact"], true, "{dry}");
    assert!(dry["estimatedTokensAfter"].as_u64() < dry["tokensBefore"].as_u64());
    assert!(dry["layer"].is_string());
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "a dry run writes nothing"
    );

    let status = json_of(&ctxhost(
        home.path(),
        &["context", "status", "--session", key, "--json"],
    ));
    assert_eq!(status["compactionCount"], 0);
    assert_eq!(status["contextTokens"], dry["tokensBefore"]);

    let done = json_of(&ctxhost(
        home.path(),
        &[
            "compact",
            "--session",
            key,
            "--focus",
            "keep the parser notes",
            "--yes",
            "--json",
        ],
    ));
    assert_eq!(done["compacted"], true, "{done}");
    assert!(done["tokensAfter"].as_u64() < done["tokensBefore"].as_u64());
    assert_eq!(done["details"]["focus"], "keep the parser notes");
    assert_eq!(done["details"]["engine"], "legacy");
    assert_eq!(done["degradation"]["risk"], "low");

    let status = json_of(&ctxhost(
        home.path(),
        &["context", "status", "--session", key, "--json"],
    ));
    assert_eq!(status["compactionCount"], 1);
    assert_eq!(status["countSource"], "details");
    assert!(
        status["lastCompaction"]["ago"]
            .as_str()
            .unwrap()
            .ends_with("ago")
    );
    assert!(status["bytesScanned"].as_u64() < status["fileBytes"].as_u64());

    let history = json_of(&ctxhost(
        home.path(),
        &["context", "history", "--session", key, "--json"],
    ));
    let rows = history["compactions"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["trigger"], "manual");
    assert!(rows[0]["messagesCompacted"].as_u64().unwrap() > 0);

    let text = ctxhost(home.path(), &["context", "history", "--session", key]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("manual"));

    let inspect = json_of(&ctxhost(
        home.path(),
        &["context", "inspect", "--session", key, "--json"],
    ));
    let blocks = inspect["blocks"].as_array().unwrap();
    assert_eq!(blocks[0]["kind"], "preamble");
    assert!(
        blocks[0]["message"]["summary"]
            .as_str()
            .unwrap()
            .contains("keep the parser notes")
    );
    assert!(blocks.iter().all(|b| b["tokens"].is_u64()));
    assert_eq!(inspect["engine"], "legacy");
}

#[test]
fn export_then_import_starts_a_fresh_session() {
    let home = tempfile::tempdir().unwrap();
    let path = session(home.path(), 400);
    let p = path.to_str().unwrap();
    json_of(&ctxhost(
        home.path(),
        &["compact", "--session", p, "--yes", "--json"],
    ));
    let bundle = home.path().join("bundle.json");
    let exported = json_of(&ctxhost(
        home.path(),
        &[
            "context",
            "export",
            "--session",
            p,
            bundle.to_str().unwrap(),
            "--json",
        ],
    ));
    assert_eq!(exported["hasSummary"], true);
    let imported = json_of(&ctxhost(
        home.path(),
        &[
            "context",
            "import",
            bundle.to_str().unwrap(),
            "--session",
            "fresh",
            "--json",
        ],
    ));
    assert_eq!(imported["session"], "fresh");
    let fresh = home.path().join("sessions/fresh.jsonl");
    let t = ctxhost_transcript::Transcript::load(&fresh).unwrap();
    assert_eq!(t.header().version(), 3);
    assert_eq!(t.compaction_count(), 1);
    let old = ctxhost_transcript::Transcript::load(&path).unwrap();
    assert_eq!(t.context().len(), old.context().len());
    // importing over an existing session is refused
    let again = ctxhost(
        home.path(),
        &[
            "context",
            "import",
            bundle.to_str().unwrap(),
            "--session",
            "fresh",
        ],
    );
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("already exists"),
        "{}",
        stderr(&again)
    );
}

#[test]
fn bad_transcripts_name_file_line_and_problem_and_nothing_is_written() {
    let home = tempfile::tempdir().unwrap();
    let good = ctxhost_transcript::generate::coding_session(2, 30);
    let header = good.lines().next().unwrap().to_string();
    let first_id = {
        let v: Value = serde_json::from_str(good.lines().nth(1).unwrap()).unwrap();
        v["id"].as_str().unwrap().to_string()
    };
    let cases: Vec<(&str, String, &str)> = vec![
        ("empty", String::new(), ":1: empty file"),
        ("notjson", format!("{good}{{oops\n{}\n", good.lines().nth(2).unwrap()), ": not valid JSON"),
        ("noheader", "{\"hello\":1}\n".into(), ":1: first line is not a session header"),
        (
            "missing",
            format!("{header}\n{{\"type\":\"message\",\"id\":\"a1\",\"parentId\":null}}\n"),
            ":2: message entry has no \"message\"",
        ),
        (
            "dangling",
            format!("{good}{{\"type\":\"compaction\",\"id\":\"c1\",\"parentId\":null,\"summary\":\"s\",\"firstKeptEntryId\":\"nope\",\"tokensBefore\":1}}\n"),
            "firstKeptEntryId \"nope\" is not an entry",
        ),
        (
            "v1range",
            "{\"type\":\"session\",\"id\":\"s\"}\n{\"type\":\"compaction\",\"summary\":\"s\",\"firstKeptEntryIndex\":9}\n".into(),
            ":2: firstKeptEntryIndex 9 is out of range",
        ),
        (
            "cycle",
            format!("{header}\n{{\"type\":\"message\",\"id\":\"a\",\"parentId\":\"b\",\"message\":{{\"role\":\"user\",\"content\":\"x\"}}}}\n{{\"type\":\"message\",\"id\":\"b\",\"parentId\":\"a\",\"message\":{{\"role\":\"user\",\"content\":\"y\"}}}}\n"),
            "parentId cycle",
        ),
    ];
    let _ = first_id;
    for (name, text, expected) in cases {
        let path = home.path().join(format!("{name}.jsonl"));
        std::fs::write(&path, &text).unwrap();
        for args in [
            vec!["compact", "--session"],
            vec!["context", "history", "--session"],
        ] {
            let mut args = args.clone();
            let p = path.to_str().unwrap().to_string();
            args.push(&p);
            args.push("--yes");
            if args[0] == "context" {
                args.pop();
            }
            let out = ctxhost(home.path(), &args);
            assert!(!out.status.success(), "{name} {args:?} succeeded");
            let err = stderr(&out);
            assert!(err.contains(&format!("{name}.jsonl")), "{name}: {err}");
            assert!(err.contains(expected), "{name}: {err}");
        }
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            text,
            "{name} was rewritten"
        );
        let entries: Vec<_> = std::fs::read_dir(home.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(name) && n != &format!("{name}.jsonl"))
            .collect();
        assert!(entries.is_empty(), "{name}: {entries:?}");
    }
    let missing = ctxhost(
        home.path(),
        &["context", "status", "--session", "no-such-key"],
    );
    assert!(
        stderr(&missing).contains("no session transcript at"),
        "{}",
        stderr(&missing)
    );
}
