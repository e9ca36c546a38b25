//! The `ctxhost` binary as an operator runs it, in a scratch `CTXHOST_HOME`.

use crate::common;

use crate::common::{ctxhost, json_of as stdout_json};

#[test]
fn plugins_list_json_is_its_documented_shape() {
    let home = tempfile::tempdir().unwrap();
    let list = stdout_json(&ctxhost(home.path(), &["plugins", "list", "--json"]));
    common::check_cli_schema("plugins-list", &list);
    let engines = list["engines"].as_array().unwrap();
    assert!(engines.len() >= 3, "the bundled engines: {list}");
    for engine in engines {
        // A version, not a Rust `Result` (`{"Ok": "0.4.0"}`).
        assert_eq!(engine["contract"], "0.4.0", "{engine}");
        assert!(engine["error"].is_null(), "{engine}");
    }
}

#[test]
fn doctor_json_succeeds_on_an_empty_home() {
    let home = tempfile::tempdir().unwrap();
    let report = stdout_json(&ctxhost(home.path(), &["doctor", "--json"]));
    common::check_cli_schema("doctor", &report);
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
    let transcript = common::generated_session(home.path().join("recorded.jsonl"), 11, 300);
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
    // The replayed transcript was a scratch file, removed on exit: not reported as a path.
    assert!(report["output"].is_null(), "{}", report["output"]);
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
    common::check_cli_schema("demo", &demo);
    assert_eq!(demo["report"]["messages"], 200);
    for scratch in ["source", "output"] {
        let named = demo["report"][scratch].as_str().unwrap_or("<none>");
        assert!(
            named.starts_with('<'),
            "{scratch} names a removed file: {named}"
        );
    }
    assert!(!demo["report"]["compactions"].as_array().unwrap().is_empty());
    assert!(demo["latestSummary"].as_str().unwrap().contains("## "));
    // It ends with recall: a compacted request, found by search and opened again whole.
    let recall = &demo["recall"];
    let id = recall["entryId"].as_str().unwrap();
    assert!(recall["rank"].as_u64().is_some(), "{recall}");
    assert!(
        recall["found"]["content"].as_str().unwrap().contains(id),
        "{recall}"
    );
    let request = recall["request"].as_str().unwrap();
    assert!(
        recall["opened"]["content"]
            .as_str()
            .unwrap()
            .contains(request),
        "{recall}"
    );
}

/// A command working as designed logs no warning: what an operator should know is in its own
/// output.
fn assert_no_warning(output: &std::process::Output) {
    assert!(output.status.success(), "{output:?}");
    let stderr = common::stderr(output);
    assert!(!stderr.contains("WARN"), "stderr has warnings:\n{stderr}");
}

#[test]
fn the_demo_tells_its_story_on_stdout_and_warns_of_nothing() {
    let home = tempfile::tempdir().unwrap();
    // The README's first command as it stands: enough compactions for the degradation guard.
    let output = ctxhost(home.path(), &["demo"]);
    assert_no_warning(&output);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("! this is summarizing compaction #3: high risk"),
        "the guard is a line of the turn-by-turn output:\n{stdout}"
    );
}

#[test]
fn context_search_and_expand_reach_compacted_messages_by_the_tools_arguments() {
    let home = tempfile::tempdir().unwrap();
    let transcript = common::generated_session(home.path().join("session.jsonl"), 5, 120);
    let path = transcript.to_str().unwrap();
    let compact = ctxhost(
        home.path(),
        &["compact", "--session", path, "--yes", "--json"],
    );
    assert!(compact.status.success(), "{compact:?}");
    let t = ctxhost_transcript::Transcript::load(&transcript).unwrap();
    let (position, first_request) = t
        .entries()
        .iter()
        .enumerate()
        .find_map(|(i, e)| {
            let view = e.view()?;
            (view.role == ctxhost_transcript::Role::User).then_some((i, view.text))
        })
        .unwrap();
    assert!(
        !t.context().contains(&position),
        "the first request was compacted"
    );
    let id = t.entries()[position].id().to_string();
    let words: Vec<&str> = first_request
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() >= 4)
        .take(4)
        .collect();

    let found = stdout_json(&ctxhost(
        home.path(),
        &[
            "context",
            "search",
            "--session",
            path,
            &words.join(" "),
            "--role",
            "user",
            "--json",
        ],
    ));
    common::check_cli_schema("context-search", &found);
    assert_eq!(found["indexRebuilt"], true, "{found}");
    let hits = found["hits"].as_array().unwrap();
    assert!(
        hits.iter()
            .any(|h| h["id"] == id.as_str() && h["inContext"] == false),
        "{found}"
    );
    assert!(hits.iter().all(|h| h["role"] == "user"), "{found}");

    let opened = stdout_json(&ctxhost(
        home.path(),
        &[
            "context",
            "expand",
            "--session",
            path,
            &format!("#{id}"),
            "--json",
        ],
    ));
    common::check_cli_schema("context-expand", &opened);
    assert!(
        opened["text"].as_str().unwrap().contains(&first_request),
        "{opened}"
    );

    // The second search reuses the index; a bad argument names itself.
    let again = stdout_json(&ctxhost(
        home.path(),
        &["context", "search", "--session", path, "anything", "--json"],
    ));
    assert_eq!(again["indexRebuilt"], false);
    let bad = ctxhost(
        home.path(),
        &[
            "context",
            "search",
            "--session",
            path,
            "x",
            "--role",
            "robot",
        ],
    );
    assert!(!bad.status.success());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(
        stderr.contains("arguments.role") && stderr.contains("robot"),
        "{stderr}"
    );
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
    let transcript = common::generated_session(home.path().join("session.jsonl"), 13, 80);
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
    common::check_cli_schema("context-inspect", &inspect);
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
    common::check_cli_schema("replay", &report);
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
    common::check_cli_schema("replay", &report);
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
    let transcript = common::generated_session(home.path().join("recorded.jsonl"), 5, 200);
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

#[test]
fn closed_stdout_or_stderr_never_panics_and_the_exit_code_stays() {
    let home = tempfile::tempdir().unwrap();
    let commands: [&[&str]; 4] = [
        &["context", "status", "--session", "nope.jsonl"],
        &["plugins", "list"],
        &["doctor"],
        &["demo", "--messages", "nope"],
    ];
    for args in commands {
        let open = common::ctxhost(home.path(), args);
        for closed in ["stdout", "stderr"] {
            let (reader, writer) = std::io::pipe().unwrap();
            // Closed before the child starts, as `2>&1 | true` leaves it by the time it writes.
            drop(reader);
            let mut command = common::command(home.path());
            command.args(args);
            if closed == "stdout" {
                command.stdout(writer).stderr(std::process::Stdio::null());
            } else {
                command.stderr(writer).stdout(std::process::Stdio::null());
            }
            let status = command.status().unwrap();
            assert_eq!(
                status.code(),
                open.status.code(),
                "{args:?} with {closed} closed (101 is a panic)"
            );
        }
    }
}

#[test]
fn every_command_that_reads_a_transcript_refuses_a_fifo_at_once() {
    let home = tempfile::tempdir().unwrap();
    let fifo = home.path().join("pipe.jsonl");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let fifo = fifo.to_str().unwrap();
    let commands: [&[&str]; 3] = [
        &["replay", fifo],
        &["context", "status", "--session", fifo],
        &["context", "history", "--session", fifo],
    ];
    for args in commands {
        let mut child = common::command(home.path())
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > std::time::Duration::from_secs(60) {
                let _ = child.kill();
                panic!("{args:?} waited on the FIFO");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("pipe.jsonl"), "{args:?}: {err}");
    }
}
