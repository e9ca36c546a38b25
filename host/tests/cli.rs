//! The `ctxhost` binary as an operator runs it, in a scratch `CTXHOST_HOME`.

mod common;

use common::{ctxhost, json_of as stdout_json};

#[test]
fn doctor_json_succeeds_on_an_empty_home() {
    let home = tempfile::tempdir().unwrap();
    let report = stdout_json(&ctxhost(home.path(), &["doctor", "--json"]));
    assert_eq!(report["ok"], true);
    let names: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "config",
            "slot",
            "engine checkpoint-manager",
            "engine checkpoint-manager state-dir",
            "engine legacy",
            "engine legacy state-dir",
            "engine lossless",
            "engine lossless capabilities",
            "engine lossless state-dir",
            "component cache"
        ]
    );
    assert!(home.path().join("state/legacy").is_dir());
    // Optional for a bundled engine: a passed check that says how to grant it, no warning.
    let capabilities = &report["checks"][7];
    assert_eq!(capabilities["status"], "ok");
    let detail = capabilities["detail"].as_str().unwrap();
    assert!(detail.starts_with("optional, not granted: llm"), "{detail}");
    // The three bundled engines were compiled into the cache by the checks above.
    let cache = report["checks"][9]["detail"].as_str().unwrap();
    assert!(cache.starts_with("3 compiled component(s), "), "{cache}");
}

#[test]
fn doctor_fails_with_the_position_of_a_config_syntax_error() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("ctxhost.json"), "{\n  plugins: {,\n}").unwrap();
    let output = ctxhost(home.path(), &["doctor"]);
    assert_eq!(output.status.code(), Some(1));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("ctxhost.json:2:"), "{text}");
}

#[test]
fn doctor_names_an_unknown_engine_and_the_available_ones() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("ctxhost.json"),
        "{ plugins: { slots: { contextEngine: 'ghost' } } }",
    )
    .unwrap();
    let output = ctxhost(home.path(), &["doctor", "--json"]);
    assert_eq!(output.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let slot = &report["checks"][1];
    assert_eq!(slot["name"], "slot");
    assert_eq!(slot["ok"], false);
    let detail = slot["detail"].as_str().unwrap();
    assert!(
        detail.contains("`ghost`")
            && detail.contains("available: checkpoint-manager, legacy, lossless"),
        "{detail}"
    );
}

#[test]
fn replay_reports_compactions_at_a_small_window() {
    let home = tempfile::tempdir().unwrap();
    let transcript = home.path().join("recorded.jsonl");
    std::fs::write(
        &transcript,
        ctxhost_transcript::generate::coding_session(11, 300),
    )
    .unwrap();
    let report = stdout_json(&ctxhost(
        home.path(),
        &[
            "replay",
            transcript.to_str().unwrap(),
            "--window",
            "16000",
            "--json",
        ],
    ));
    assert_eq!(report["engine"], "legacy");
    assert_eq!(report["messages"], 300);
    let compactions = report["compactions"].as_array().unwrap();
    assert!(!compactions.is_empty(), "{report}");
    for c in compactions {
        assert!(
            c["tokensAfter"].as_u64() < c["tokensBefore"].as_u64(),
            "{c}"
        );
    }
    assert!(
        report["peakUtilisation"].as_f64().unwrap() <= 1.0,
        "{report}"
    );
}

#[test]
fn demo_runs_offline_and_reports_what_happened() {
    let home = tempfile::tempdir().unwrap();
    let output = ctxhost(home.path(), &["demo", "--messages", "200", "--json"]);
    let demo = stdout_json(&output);
    assert_eq!(demo["report"]["messages"], 200);
    assert!(!demo["report"]["compactions"].as_array().unwrap().is_empty());
    assert!(demo["latestSummary"].as_str().unwrap().contains("## "));
}

#[test]
fn inspect_with_a_workspace_shows_the_whole_request_and_the_parts_add_up() {
    let home = tempfile::tempdir().unwrap();
    let workspace = home.path().join("ws");
    std::fs::create_dir_all(workspace.join("skills/review")).unwrap();
    std::fs::write(
        workspace.join("AGENTS.md"),
        "Keep diffs small. ".repeat(3000),
    )
    .unwrap();
    std::fs::write(
        workspace.join("skills/review/SKILL.md"),
        "---\nname: review\ndescription: Review a diff for bugs\n---\n",
    )
    .unwrap();
    let transcript = home.path().join("session.jsonl");
    std::fs::write(
        &transcript,
        ctxhost_transcript::generate::coding_session(13, 80),
    )
    .unwrap();
    let before = std::fs::read(&transcript).unwrap();
    let inspect = stdout_json(&ctxhost(
        home.path(),
        &[
            "context",
            "inspect",
            "--session",
            transcript.to_str().unwrap(),
            "--workspace",
            workspace.to_str().unwrap(),
            "--json",
        ],
    ));
    let b = &inspect["breakdown"];
    let parts: u64 = [
        "system",
        "bootstrap",
        "skills",
        "tools",
        "history",
        "engineAdditions",
        "currentMessage",
    ]
    .iter()
    .map(|k| b[*k].as_u64().unwrap())
    .sum();
    assert_eq!(parts, b["total"].as_u64().unwrap());
    let blocks: u64 = inspect["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|block| block["tokens"].as_u64().unwrap())
        .sum();
    assert_eq!(blocks, b["history"].as_u64().unwrap());
    let sections: u64 = inspect["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["tokens"].as_u64().unwrap())
        .sum();
    assert_eq!(sections, parts - blocks);
    assert_eq!(inspect["truncated"][0]["file"], "AGENTS.md");
    assert_eq!(inspect["truncated"][0]["originalChars"], 54_000);
    let kinds: Vec<&str> = inspect["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["runtime", "identity", "skills", "hints"]);
    assert_eq!(
        std::fs::read(&transcript).unwrap(),
        before,
        "inspect must not write"
    );
}

/// A generated session with a `custom_message` entry after every user message, as OpenClaw
/// writes them; returns the text and how many custom messages it holds.
fn session_with_custom_messages(messages: usize) -> (String, usize) {
    let generated = ctxhost_transcript::generate::coding_session(21, messages);
    let source = ctxhost_transcript::Transcript::parse(&generated, "gen").unwrap();
    let mut t = ctxhost_transcript::Transcript::new("s-1", "/tmp", "2025-01-01T00:00:00.000Z");
    let mut custom = 0;
    for e in source.entries() {
        let message: serde_json::Value = match e.entry_type() {
            "message" => serde_json::from_str(&e.message_json()).unwrap(),
            _ => continue,
        };
        let user = message["role"] == "user";
        t.append_message(&message, "2025-01-01T00:00:01.000Z")
            .unwrap();
        if user {
            t.append_other(
                "custom_message",
                &serde_json::json!({"customType": "memory", "display": false,
                    "content": [{"type": "text", "text": "recalled: the tests run with cargo"}]}),
                "2025-01-01T00:00:01.000Z",
            )
            .unwrap();
            custom += 1;
        }
    }
    (t.to_v3_string(), custom)
}

#[test]
fn replay_feeds_custom_messages_too() {
    let home = tempfile::tempdir().unwrap();
    let transcript = home.path().join("openclaw.jsonl");
    let (text, custom) = session_with_custom_messages(120);
    assert!(custom > 5);
    std::fs::write(&transcript, text).unwrap();
    let report = stdout_json(&ctxhost(
        home.path(),
        &["replay", transcript.to_str().unwrap(), "--json"],
    ));
    assert_eq!(report["messages"], 120 + custom as u64, "{report}");
}

#[test]
fn replay_counts_turns_whose_request_overflowed_the_window() {
    let home = tempfile::tempdir().unwrap();
    let mut t = ctxhost_transcript::Transcript::new("s-2", "/tmp", "2025-01-01T00:00:00.000Z");
    let at = "2025-01-01T00:00:01.000Z";
    for n in 0..3 {
        // Each user message alone is larger than the 4,000-token window.
        t.append_message(
            &serde_json::json!({"role": "user", "content": format!("{n} {}", "z".repeat(24_000))}),
            at,
        )
        .unwrap();
        t.append_message(
            &serde_json::json!({"role": "assistant", "content": [{"type": "text", "text": "ok"}],
                "stopReason": "stop"}),
            at,
        )
        .unwrap();
    }
    let transcript = home.path().join("huge.jsonl");
    std::fs::write(&transcript, t.to_v3_string()).unwrap();
    let args = ["replay", transcript.to_str().unwrap(), "--window", "4000"];
    let report = stdout_json(&ctxhost(home.path(), &[&args[..], &["--json"]].concat()));
    assert_eq!(report["overflowingTurns"], 3, "{report}");
    assert_eq!(report["firstOverflowAt"], 2, "{report}");
    let text = ctxhost(home.path(), &args);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("3 of 3 turns exceeded the window (first before message 2)"),
        "{text}"
    );
}

#[test]
fn replay_into_a_closed_pipe_exits_quietly() {
    let home = tempfile::tempdir().unwrap();
    let transcript = home.path().join("recorded.jsonl");
    std::fs::write(
        &transcript,
        ctxhost_transcript::generate::coding_session(5, 200),
    )
    .unwrap();
    for json in [false, true] {
        let mut command = common::command(home.path());
        command
            .args(["replay", transcript.to_str().unwrap()])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        if json {
            command.arg("--json");
        }
        let mut child = command.spawn().unwrap();
        // The reader goes away before anything is written, as `| head -0` would.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "json {json}: {err}");
        assert!(!err.contains("panicked"), "json {json}: {err}");
    }
}
