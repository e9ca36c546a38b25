//! `ctxhost compact` and `ctxhost context ...` as an operator runs them, in a scratch home.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::common;

use crate::common::{ctxhost, json_of, stderr};

/// A generated session stored under a key in the home.
fn session(home: &Path, messages: usize) -> std::path::PathBuf {
    let dir = home.join("sessions");
    std::fs::create_dir_all(&dir).unwrap();
    common::generated_session(dir.join("agent%3Amain%3Amain.jsonl"), 4, messages)
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
    common::check_cli_schema("compact", &dry);
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
    common::check_cli_schema("context-status", &status);
    assert_eq!(status["compactionCount"], 0);
    assert_eq!(status["contextTokens"], dry["recordedContextTokens"]);

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
    common::check_cli_schema("compact", &done);
    assert_eq!(done["compacted"], true, "{done}");
    assert!(done["tokensAfter"].as_u64() < done["tokensBefore"].as_u64());
    assert_eq!(done["details"]["focus"], "keep the parser notes");
    assert_eq!(done["details"]["engine"], "legacy");
    assert_eq!(done["degradation"]["risk"], "low");

    let status = json_of(&ctxhost(
        home.path(),
        &["context", "status", "--session", key, "--json"],
    ));
    common::check_cli_schema("context-status", &status);
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
    common::check_cli_schema("context-history", &history);
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
    common::check_cli_schema("context-inspect", &inspect);
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
    common::check_cli_schema("context-export", &exported);
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
    common::check_cli_schema("context-import", &imported);
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

/// A v3 transcript of `messages` (AgentMessages) and other entries (objects with a `type`),
/// linked in order.
fn transcript_of(entries: &[Value]) -> String {
    let mut t = ctxhost_transcript::Transcript::new(
        "00000000-0000-4000-8000-000000000001",
        "/tmp",
        "2025-01-01T00:00:00.000Z",
    );
    for e in entries {
        let at = "2025-01-01T00:00:01.000Z";
        match e["type"].as_str() {
            Some(kind) => t.append_other(kind, e, at).unwrap(),
            None => t.append_message(e, at).unwrap(),
        };
    }
    t.to_v3_string()
}

fn assistant(text: &str, total_tokens: u64) -> Value {
    serde_json::json!({
        "role": "assistant", "content": [{"type": "text", "text": text}],
        "api": "openai-completions", "provider": "local", "model": "m",
        "usage": {"input": total_tokens, "output": 0, "cacheRead": 0, "cacheWrite": 0,
                  "totalTokens": total_tokens},
        "stopReason": "stop", "timestamp": 1_735_689_601_000u64,
    })
}

/// A generated session in `dir/truncated.jsonl` whose recorded usage is far below what its
/// messages hold, as when a local model's server truncated every request.
fn truncated_usage_session(dir: &Path, messages: usize) -> PathBuf {
    let path = dir.join("truncated.jsonl");
    let text = ctxhost_transcript::generate::coding_session(4, messages);
    let lines: Vec<String> = text
        .lines()
        .map(|line| {
            let mut v: Value = serde_json::from_str(line).unwrap();
            if let Some(usage) = v.pointer_mut("/message/usage") {
                usage["totalTokens"] = 1_000.into();
            }
            v.to_string()
        })
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

#[test]
fn compaction_before_and_after_are_counted_alike_and_the_dry_run_agrees() {
    let home = tempfile::tempdir().unwrap();
    let path = truncated_usage_session(home.path(), 600);
    let p = path.to_str().unwrap();
    let dry = json_of(&ctxhost(
        home.path(),
        &["compact", "--session", p, "--dry-run", "--json"],
    ));
    assert_eq!(dry["wouldCompact"], true, "{dry}");
    // Recorded usage (1,000 + what follows it) is not what "before" is measured by.
    assert!(
        dry["recordedContextTokens"].as_u64() < dry["tokensBefore"].as_u64(),
        "{dry}"
    );
    let done = json_of(&ctxhost(
        home.path(),
        &["compact", "--session", p, "--yes", "--json"],
    ));
    assert_eq!(done["compacted"], true, "{done}");
    assert_eq!(done["tokensBefore"], dry["tokensBefore"], "{dry} {done}");
    assert_eq!(
        done["tokensAfter"], dry["estimatedTokensAfter"],
        "{dry} {done}"
    );
    assert!(done["tokensAfter"].as_u64() < done["tokensBefore"].as_u64());
    // What is written is what was measured.
    let t = ctxhost_transcript::Transcript::load(&path).unwrap();
    let entry = t
        .entries()
        .iter()
        .rev()
        .find(|e| e.entry_type() == "compaction")
        .unwrap();
    assert_eq!(Some(entry.tokens_before()), done["tokensBefore"].as_u64());
    assert_eq!(done["details"]["tokensAfter"], done["tokensAfter"]);
}

/// Many tiny turns, and a home whose compaction keeps almost nothing: any summary of them is
/// longer than they are, so compacting them is refused.
fn tiny_turns(home: &Path) -> String {
    std::fs::write(
        home.join("ctxhost.json"),
        "{ agents: { defaults: { compaction: { keepRecentTokens: 2 } } } }",
    )
    .unwrap();
    let mut entries = Vec::new();
    for n in 0..4 {
        entries.push(
            serde_json::json!({"role": "user", "content": format!("go {n}"),
            "timestamp": 1_735_689_600_000u64}),
        );
        entries.push(assistant("ok", 5));
    }
    transcript_of(&entries)
}

#[test]
fn a_compaction_that_would_grow_the_context_is_refused_and_nothing_is_written() {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("tiny.jsonl");
    std::fs::write(&path, tiny_turns(home.path())).unwrap();
    let before = std::fs::read(&path).unwrap();
    let p = path.to_str().unwrap();

    let dry = json_of(&ctxhost(
        home.path(),
        &["compact", "--session", p, "--dry-run", "--json"],
    ));
    assert_eq!(dry["wouldCompact"], false, "{dry}");
    assert!(
        dry["reason"]
            .as_str()
            .unwrap()
            .contains("would not make the context smaller"),
        "{dry}"
    );
    assert!(dry["estimatedTokensAfter"].as_u64() >= dry["tokensBefore"].as_u64());

    let done = json_of(&ctxhost(
        home.path(),
        &["compact", "--session", p, "--yes", "--json"],
    ));
    common::check_cli_schema("compact", &done);
    assert_eq!(done["compacted"], false, "{done}");
    assert_eq!(done["tokensAfter"], done["tokensBefore"]);
    assert!(
        done["reason"]
            .as_str()
            .unwrap()
            .contains("would not make the context smaller"),
        "{done}"
    );
    let text = ctxhost(home.path(), &["compact", "--session", p, "--yes"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.starts_with("not compacted: refused"), "{text}");
    assert_eq!(std::fs::read(&path).unwrap(), before, "nothing written");
}

/// Every file in `dir`, with its bytes: what "nothing written" means for a directory.
fn dir_snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect();
    files.sort();
    files
}

/// `ctxhost compact --yes --json` of the file at `path`.
fn compact_yes(home: &Path, path: &Path) -> Value {
    let session = path.to_str().unwrap();
    json_of(&ctxhost(
        home,
        &["compact", "--session", session, "--yes", "--json"],
    ))
}

/// A refused compaction of a file that a write would migrate (v1, v2) or repair (a torn last
/// line) leaves it and its directory as they were: no migration, no backup.
#[test]
fn a_refused_compaction_of_an_old_or_torn_file_leaves_its_directory_unchanged() {
    let home = tempfile::tempdir().unwrap();
    let v3 = tiny_turns(home.path());
    let shapes = [
        ("v1", ctxhost_transcript::generate::to_v1(&v3)),
        ("v2", v3.replacen("\"version\":3", "\"version\":2", 1)),
        ("torn", format!("{v3}{{\"type\":\"message\",\"id\":\"to")),
    ];
    for (shape, text) in shapes {
        let dir = home.path().join(shape);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.jsonl");
        std::fs::write(&path, &text).unwrap();
        let before = dir_snapshot(&dir);
        let done = compact_yes(home.path(), &path);
        common::check_cli_schema("compact", &done);
        assert_eq!(done["compacted"], false, "{shape}: {done}");
        assert!(
            done["reason"].as_str().unwrap().contains("nothing written"),
            "{shape}: {done}"
        );
        assert_eq!(dir_snapshot(&dir), before, "{shape}: the directory changed");
    }
    // One that compacts migrates the file, and says where the v1 original went.
    let dir = home.path().join("big");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s.jsonl");
    let v1 =
        ctxhost_transcript::generate::to_v1(&ctxhost_transcript::generate::coding_session(4, 600));
    std::fs::write(&path, &v1).unwrap();
    std::fs::write(
        home.path().join("ctxhost.json"),
        "{ agents: { defaults: { compaction: { keepRecentTokens: 2000 } } } }",
    )
    .unwrap();
    let done = compact_yes(home.path(), &path);
    assert_eq!(done["compacted"], true, "{done}");
    let backup = done["backup"].as_str().unwrap();
    assert_eq!(std::fs::read_to_string(backup).unwrap(), v1);
}

#[test]
fn status_and_inspect_name_their_measures_and_share_one_figure() {
    let home = tempfile::tempdir().unwrap();
    let path = truncated_usage_session(home.path(), 120);
    let p = path.to_str().unwrap();
    let status = json_of(&ctxhost(
        home.path(),
        &["context", "status", "--session", p, "--json"],
    ));
    assert_eq!(status["contextTokensMethod"], "recorded-usage");
    let inspect = json_of(&ctxhost(
        home.path(),
        &["context", "inspect", "--session", p, "--json"],
    ));
    assert_eq!(inspect["totalTokensMethod"], "chars/4");
    assert_eq!(inspect["recordedContextTokensMethod"], "recorded-usage");
    assert_eq!(inspect["recordedContextTokens"], status["contextTokens"]);
    // The two measures differ here (usage far below the messages), and each says which it is.
    assert!(inspect["totalTokens"].as_u64() > status["contextTokens"].as_u64());
    let text = ctxhost(home.path(), &["context", "status", "--session", p]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("by recorded usage"), "{text}");
    let text = ctxhost(home.path(), &["context", "inspect", "--session", p]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("(counted by chars/4)"), "{text}");
    assert!(
        text.contains(&format!(
            "`context status` shows {}",
            status["contextTokens"].as_u64().map_or(String::new(), |n| {
                // thousands separators, as printed
                let d = n.to_string();
                d.chars()
                    .enumerate()
                    .flat_map(|(i, c)| {
                        (i > 0 && (d.len() - i) % 3 == 0)
                            .then_some(',')
                            .into_iter()
                            .chain([c])
                    })
                    .collect()
            })
        )),
        "{text}"
    );
}

#[test]
fn export_and_import_keep_custom_messages() {
    let home = tempfile::tempdir().unwrap();
    let mut entries = Vec::new();
    for n in 0..6 {
        entries.push(
            serde_json::json!({"role": "user", "content": format!("step {n}"),
            "timestamp": 1_735_689_600_000u64}),
        );
        entries.push(serde_json::json!({"type": "custom_message", "customType": "reminder",
            "content": [{"type": "text", "text": format!("remember rule {n}: {}", "x".repeat(200))}],
            "display": false, "details": {"n": n}}));
        entries.push(assistant("done", 0));
    }
    let path = home.path().join("openclaw.jsonl");
    std::fs::write(&path, transcript_of(&entries)).unwrap();
    let p = path.to_str().unwrap();
    let bundle = home.path().join("bundle.json");
    let b = bundle.to_str().unwrap();
    let exported = json_of(&ctxhost(
        home.path(),
        &["context", "export", "--session", p, b, "--json"],
    ));
    assert_eq!(exported["entries"], 18, "{exported}");
    json_of(&ctxhost(
        home.path(),
        &["context", "import", b, "--session", "fresh", "--json"],
    ));
    let old = ctxhost_transcript::Transcript::load(&path).unwrap();
    let new =
        ctxhost_transcript::Transcript::load(&home.path().join("sessions/fresh.jsonl")).unwrap();
    let kinds = |t: &ctxhost_transcript::Transcript| -> Vec<String> {
        t.context()
            .iter()
            .copied()
            .map(|i| t.entries()[i].entry_type().to_string())
            .collect()
    };
    assert_eq!(kinds(&new), kinds(&old));
    assert_eq!(new.context_tokens(), old.context_tokens());
    let custom: Vec<Value> = new
        .entries()
        .iter()
        .filter(|e| e.entry_type() == "custom_message")
        .map(|e| serde_json::from_str(e.line()).unwrap())
        .collect();
    assert_eq!(custom.len(), 6);
    assert_eq!(custom[2]["customType"], "reminder");
    assert_eq!(custom[2]["display"], false);
    assert_eq!(custom[2]["details"]["n"], 2);
}

#[test]
fn inspect_shows_a_request_that_overflows_and_marks_it() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("ctxhost.json"),
        "{ agents: { defaults: { contextWindow: 8000, bootstrapMaxChars: 100000, compaction: { reserveTokens: 1000, reserveTokensFloor: 0 } } } }",
    )
    .unwrap();
    // Bootstrap files larger than the window: no compaction of the history can make room.
    let workspace = home.path().join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(
        workspace.join("AGENTS.md"),
        "Keep diffs small. ".repeat(3000),
    )
    .unwrap();
    let path = home.path().join("session.jsonl");
    std::fs::write(&path, ctxhost_transcript::generate::coding_session(13, 20)).unwrap();
    let args = [
        "context",
        "inspect",
        "--session",
        path.to_str().unwrap(),
        "--workspace",
        workspace.to_str().unwrap(),
    ];
    let inspect = json_of(&ctxhost(home.path(), &[&args[..], &["--json"]].concat()));
    // An overflowing request, with the compaction it ran: the optional parts are filled in.
    common::check_cli_schema("context-inspect", &inspect);
    let overflow = &inspect["overflow"];
    assert!(overflow.is_object(), "{inspect}");
    assert_eq!(overflow["window"], 8000);
    assert!(overflow["bootstrap"].as_u64() > overflow["available"].as_u64());
    assert!(overflow["total"].as_u64() > overflow["available"].as_u64());
    assert!(
        !inspect["blocks"].as_array().unwrap().is_empty(),
        "{inspect}"
    );
    let text = ctxhost(home.path(), &args);
    assert!(text.status.success(), "{}", stderr(&text));
    // No warning about what a compaction kept when the compaction was not written.
    let written = inspect["overflowCompaction"]["compacted"] == true;
    assert!(
        written || !stderr(&text).contains("compaction"),
        "{}",
        stderr(&text)
    );
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("OVERFLOW: the request needs"), "{text}");
}

#[test]
fn every_session_flag_has_help() {
    let home = tempfile::tempdir().unwrap();
    for command in [
        &["compact"][..],
        &["context", "status"],
        &["context", "history"],
        &["context", "inspect"],
        &["context", "export"],
        &["context", "import"],
    ] {
        let mut args = command.to_vec();
        args.push("--help");
        let out = ctxhost(home.path(), &args);
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with("--session <SESSION>"))
            .unwrap_or_else(|| panic!("{command:?}: {text}"));
        let help = line.split("<SESSION>").nth(1).unwrap_or("").trim();
        assert!(
            !help.is_empty(),
            "{command:?} --session has no help: {text}"
        );
    }
}

#[test]
fn inspect_leaves_the_engines_own_state_alone() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("ctxhost.json"),
        r#"{ plugins: { slots: { contextEngine: "checkpoint-manager" } }, agents: { defaults: { contextWindow: 32000 } } }"#,
    )
    .unwrap();
    let path = session(home.path(), 400);
    let state = home.path().join("state/checkpoint-manager");
    let files = |dir: &Path| -> Vec<String> {
        fn walk(dir: &Path, out: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, out);
                } else {
                    out.push(path.display().to_string());
                }
            }
        }
        let mut out = Vec::new();
        walk(dir, &mut out);
        out.sort();
        out
    };
    let before = files(&state);
    inspect_json(home.path(), &path);
    assert_eq!(
        files(&state),
        before,
        "inspect wrote into the engine's state dir"
    );
}

#[test]
fn inspect_warns_about_the_session_file_never_its_scratch_copy() {
    let home = tempfile::tempdir().unwrap();
    let path = session(home.path(), 60);
    // Two entries glued on the last line: readable, with a warning naming file and line.
    let text = std::fs::read_to_string(&path).unwrap();
    let trimmed = text.trim_end_matches('\n');
    let cut = trimmed.rfind('\n').unwrap();
    std::fs::write(
        &path,
        format!("{}{}\n", &trimmed[..cut], &trimmed[cut + 1..]),
    )
    .unwrap();
    let output = inspect_json(home.path(), &path);
    let err = stderr(&output);
    assert!(err.contains(path.to_str().unwrap()), "{err}");
    assert!(!err.contains("/ctxhost-"), "a scratch copy is named: {err}");
}

/// `context inspect --session PATH --json`, which must succeed.
fn inspect_json(home: &Path, path: &Path) -> Output {
    let output = ctxhost(
        home,
        &[
            "context",
            "inspect",
            "--session",
            path.to_str().unwrap(),
            "--json",
        ],
    );
    json_of(&output);
    output
}

/// Issue 27 item 10: a message another writer appended while a compaction ran is never dropped
/// from the context: the compaction finds the file longer than it read it and writes nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_compaction_never_builds_on_a_tail_it_did_not_read() {
    use ctxhost::config::{Config, ConfigSource, Home};
    use ctxhost::transcript::store::TranscriptFile;
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("shared.jsonl");
    std::fs::write(&path, ctxhost_transcript::generate::coding_session(9, 200)).unwrap();
    let config = Config::load(ConfigSource::resolve(None, &Home::new(home.path()))).unwrap();
    let host = ctxhost::Host::new(Home::new(home.path()), config).unwrap();
    let mut session = host
        .open_session(
            &ctxhost::SessionTarget::Path(path.clone()),
            &ctxhost::SessionOptions::default(),
        )
        .await
        .unwrap();
    // Another writer (a second process: its own handle) appends after the session read the file.
    let (mut other, mut view) = TranscriptFile::open(&path).unwrap();
    let at = view.entries().len();
    let message = serde_json::json!({ "role": "user", "content": "appended meanwhile" });
    view.append_message(&message, "2026-11-26T00:00:00.000Z")
        .unwrap();
    other.append(&view, at).unwrap();

    let refused = session
        .compact(&ctxhost::CompactOptions::forced())
        .await
        .unwrap_err();
    assert!(
        ctxhost::error::chain(&refused).contains("another writer appended"),
        "{refused}"
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("appended meanwhile"));
    assert!(
        !text.contains(r#""type":"compaction""#),
        "no compaction written"
    );
    session.close().await.unwrap();
}

/// A file with the same problem on every assistant message: `status` shows the first warnings
/// and one line counting the rest, not a line for each.
#[test]
fn many_warnings_of_one_kind_are_counted_in_one_line() {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("implausible.jsonl");
    let text = ctxhost_transcript::generate::coding_session(4, 400);
    let lines: Vec<String> = (text.lines())
        .map(|line| {
            let mut v: Value = serde_json::from_str(line).unwrap();
            if let Some(usage) = v.pointer_mut("/message/usage") {
                usage["cacheRead"] = 900_000_000_000u64.into();
            }
            v.to_string()
        })
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let output = ctxhost(
        home.path(),
        &["context", "status", "--session", path.to_str().unwrap()],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let err = stderr(&output);
    let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("warning: ")).collect();
    assert_eq!(
        warnings.len(),
        ctxhost_transcript::WARNINGS_SHOWN + 1,
        "{err}"
    );
    let last = warnings[warnings.len() - 1];
    assert!(last.contains(path.to_str().unwrap()), "{last}");
    assert!(
        last.contains("more warnings, not shown one by one:")
            && last.contains("× usage.cacheRead N is not a plausible token count"),
        "{last}"
    );
}
