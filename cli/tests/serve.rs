//! `ctxhost serve` over real pipes: a child process per server, requests written to its stdin,
//! responses read from its stdout and checked against `docs/serve-protocol.schema.json`.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common;

use crate::common::serve::{
    Server, assistant, entries, kept_positions, markers, mirror_file, user, wait_with_timeout,
};

#[test]
fn every_method_answers_as_documented() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path(), &[]);
    let init = server.call(
        "initialize",
        json!({ "protocolVersion": 1, "client": { "name": "test" } }),
    );
    assert_eq!(init["engine"]["id"], "legacy");
    assert_eq!(init["protocolVersion"], 1);
    assert!(init["limits"]["maxLineBytes"].as_u64().unwrap() > 0);

    let key = "agent:main:main";
    let boot = server.call("session.bootstrap", json!({ "sessionKey": key }));
    assert_eq!(
        (boot["created"].clone(), boot["messageCount"].clone()),
        (json!(true), json!(0))
    );
    let mirror = mirror_file(&boot);
    assert!(
        mirror.starts_with(home.path().join("sessions/agents/main")),
        "{}",
        mirror.display()
    );

    // Fields ctxhost does not model survive byte for byte, number spelling included.
    let odd = r#"{"role":"user","content":"hello","timestamp":1700000000000,"__openclaw":{"x":1.50,"y":[1e3]},"idempotencyKey":"k-1"}"#;
    let id = "commit-1";
    server.write_line(&format!(
        r#"{{"jsonrpc":"2.0","id":"{id}","method":"session.commitTurn","params":{{"sessionKey":"{key}","advancementKey":"turn-1","messages":[{odd},{}],"lastFingerprint":"f1"}}}}"#,
        assistant("hi there")
    ));
    let committed = server.response(id);
    assert_eq!(
        committed["result"],
        json!({ "status": "committed", "messageCount": 2 })
    );
    let text = std::fs::read_to_string(&mirror).unwrap();
    assert!(text.contains(odd), "message rewritten:\n{text}");

    let again = server.call(
        "session.commitTurn",
        json!({ "sessionKey": key, "advancementKey": "turn-1", "messages": [user("x")], "lastFingerprint": "zz" }),
    );
    assert_eq!(again, json!({ "status": "duplicate", "messageCount": 2 }));

    let assembled = server.call(
        "session.assemble",
        json!({ "sessionKey": key, "messageCount": 2, "lastFingerprint": "f1", "tokenBudget": 32000, "prompt": "next" }),
    );
    assert_eq!(assembled["status"], "ok");
    assert_eq!(assembled["items"], json!([{ "from": 0, "to": 1 }]));
    assert!(assembled["estimatedTokens"].as_u64().unwrap() > 0);

    server.call(
        "session.afterTurn",
        json!({ "sessionKey": key, "prePromptMessageCount": 0 }),
    );
    let spawn = server.call(
        "subagent.prepareSpawn",
        json!({ "sessionKey": key, "childSessionKey": "agent:main:child", "contextMode": "fork" }),
    );
    if let Some(handle) = spawn["rollbackHandle"].as_u64() {
        server.call(
            "subagent.rollback",
            json!({ "sessionKey": key, "rollbackHandle": handle }),
        );
    }
    // The parent is found from prepareSpawn when sessionKey is left out.
    server.call(
        "subagent.ended",
        json!({ "childSessionKey": "agent:main:child", "reason": "completed" }),
    );
    let bogus = server.error(
        "subagent.rollback",
        json!({ "sessionKey": key, "rollbackHandle": 987654 }),
    );
    assert_eq!(bogus["code"], -32602, "{bogus}");

    let compact = server.call(
        "session.compact",
        json!({ "sessionKey": key, "force": true }),
    );
    assert_eq!(compact["ok"], true);

    // Recall: the host's tools, over everything the mirror ever held.
    let tools = server.call("session.tools", json!({ "sessionKey": key }));
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ctx_search", "ctx_expand"]);
    assert_eq!(tools["tools"][0]["source"], "host");
    let found = server.call(
        "session.callTool",
        json!({ "sessionKey": key, "name": "ctx_search", "arguments": { "query": "hello" } }),
    );
    assert_eq!(found["isError"], false, "{found}");
    assert!(
        found["content"].as_str().unwrap().contains("hello"),
        "{found}"
    );
    let bad = server.error(
        "session.callTool",
        json!({ "sessionKey": key, "name": "ctx_search", "arguments": { "query": 7 } }),
    );
    assert_eq!(bad["code"], -32602, "{bad}");
    assert!(
        bad["message"].as_str().unwrap().contains("arguments.query"),
        "{bad}"
    );
    let unknown = server.error(
        "session.callTool",
        json!({ "sessionKey": key, "name": "rm", "arguments": {} }),
    );
    assert_eq!(unknown["data"]["tool"], "rm", "{unknown}");

    assert_eq!(
        server.call("session.close", json!({ "sessionKey": key })),
        json!({ "closed": true })
    );
    assert_eq!(
        server.call("session.close", json!({ "sessionKey": key })),
        json!({ "closed": false })
    );

    let id = server.send("shutdown", json!({}));
    assert_eq!(server.response(&id)["result"], json!({}));
    let status = wait_with_timeout(&mut server.child, Duration::from_secs(30));
    assert!(status.success());
}

#[test]
fn the_context_commands_find_a_mirror_by_its_session_key() {
    let home = tempfile::tempdir().unwrap();
    let key = "agent:main:by-key";
    let mut server = Server::start(home.path(), &[]);
    server.call("session.bootstrap", json!({ "sessionKey": key }));
    server.call(
        "session.commitTurn",
        json!({ "sessionKey": key, "advancementKey": "t1", "messages": [user("find me"), assistant("found")] }),
    );
    server.finish();
    let output = common::ctxhost(
        home.path(),
        &["context", "history", "--session", key, "--json"],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let created: Vec<_> = walk(&home.path().join("sessions"));
    assert_eq!(
        created.len(),
        1,
        "a second transcript was created: {created:?}"
    );
}

#[test]
fn bad_input_gets_a_typed_error_and_the_server_keeps_serving() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path(), &["--max-line-bytes", "4096"]);

    server.write_line("{not json");
    let error = server.next_line();
    assert_eq!(error["error"]["code"], -32700, "{error}");
    assert!(error["id"].is_null());

    server.write_line(r#"[{"jsonrpc":"2.0","id":1,"method":"initialize"}]"#);
    assert_eq!(server.next_line()["error"]["code"], -32600);

    server.write_line(&format!(
        r#"{{"jsonrpc":"2.0","id":"big","method":"initialize","params":{{"pad":"{}"}}}}"#,
        "x".repeat(10_000)
    ));
    let error = server.next_line();
    assert_eq!(error["error"]["code"], -32003, "{error}");
    assert_eq!(error["error"]["data"]["maxLineBytes"], 4096);

    let unknown = server.error("session.frobnicate", json!({}));
    assert_eq!(unknown["code"], -32601);
    assert!(
        unknown["message"]
            .as_str()
            .unwrap()
            .contains("session.frobnicate")
    );

    let bad = server.error(
        "session.commitTurn",
        json!({ "sessionKey": "s", "advancementKey": "k", "messages": [user("a"), 5] }),
    );
    assert_eq!(bad["code"], -32602);
    let bad = server.error(
        "session.assemble",
        json!({ "sessionKey": "s", "messageCount": "two" }),
    );
    assert_eq!(
        (bad["code"].clone(), bad["data"]["path"].clone()),
        (json!(-32602), json!("messageCount"))
    );

    let not_open = server.error(
        "session.assemble",
        json!({ "sessionKey": "never", "messageCount": 0 }),
    );
    assert_eq!(not_open["code"], -32001);
    assert_eq!(not_open["data"]["sessionKey"], "never");

    // A message that is not an AgentMessage is refused before anything is written.
    let boot = server.call("session.bootstrap", json!({ "sessionKey": "s" }));
    let before = std::fs::read_to_string(mirror_file(&boot)).unwrap();
    let refused = server.error(
        "session.commitTurn",
        json!({ "sessionKey": "s", "advancementKey": "k", "messages": [user("ok"), { "content": "no role" }] }),
    );
    assert_eq!(
        (refused["code"].clone(), refused["data"]["path"].clone()),
        (json!(-32602), json!("messages[1]"))
    );
    assert_eq!(std::fs::read_to_string(mirror_file(&boot)).unwrap(), before);

    // Still serving.
    assert_eq!(
        server.call("initialize", json!({}))["engine"]["id"],
        "legacy"
    );
    server.finish();
}

#[test]
fn a_committed_turn_stays_committed_across_a_restart_and_a_torn_commit_is_set_aside() {
    let home = tempfile::tempdir().unwrap();
    let key = "agent:main:restart";
    let mirror = {
        let mut server = Server::start(home.path(), &[]);
        let boot = server.call("session.bootstrap", json!({ "sessionKey": key }));
        server.call(
            "session.commitTurn",
            json!({ "sessionKey": key, "advancementKey": "a1", "messages": [user("one"), assistant("two")], "lastFingerprint": "fp2" }),
        );
        server.finish();
        mirror_file(&boot)
    };
    // A crash while writing the next commit: a message line and half of another, no marker.
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&mirror)
        .unwrap();
    writeln!(file, r#"{{"type":"message","id":"deadbeef","parentId":null,"timestamp":"2026-01-01T00:00:00Z","message":{}}}"#, user("lost?")).unwrap();
    write!(file, r#"{{"type":"message","id":"#).unwrap();
    drop(file);

    let mut server = Server::start(home.path(), &[]);
    let boot = server.call("session.bootstrap", json!({ "sessionKey": key }));
    assert_eq!(boot["created"], false);
    assert_eq!(boot["messageCount"], 2);
    assert_eq!(boot["lastFingerprint"], "fp2");
    let torn: Vec<_> = std::fs::read_dir(mirror.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".torn-"))
        .collect();
    assert_eq!(torn.len(), 1, "the torn commit is kept aside");
    assert!(
        std::fs::read_to_string(torn[0].path())
            .unwrap()
            .contains("lost?")
    );

    let again = server.call(
        "session.commitTurn",
        json!({ "sessionKey": key, "advancementKey": "a1", "messages": [user("one"), assistant("two")] }),
    );
    assert_eq!(again["status"], "duplicate");
    let next = server.call(
        "session.commitTurn",
        json!({ "sessionKey": key, "advancementKey": "a2", "messages": [user("three")], "lastFingerprint": "fp3" }),
    );
    assert_eq!(next, json!({ "status": "committed", "messageCount": 3 }));
    server.finish();
    let keys: Vec<Value> = markers(&mirror)
        .iter()
        .map(|m| m["data"]["advancementKey"].clone())
        .collect();
    assert_eq!(keys, [json!("a1"), json!("a2")]);
}

#[test]
fn a_history_that_moved_on_is_resynced_by_tail_or_reset() {
    let home = tempfile::tempdir().unwrap();
    let key = "agent:main:sync";
    let mut server = Server::start(home.path(), &[]);
    let boot = server.call("session.bootstrap", json!({ "sessionKey": key }));
    server.call(
        "session.commitTurn",
        json!({ "sessionKey": key, "advancementKey": "t1", "messages": [user("a"), assistant("b")], "lastFingerprint": "fb" }),
    );
    // The runtime ran a turn without the engine: its history has 4 messages.
    let stale = server.call(
        "session.assemble",
        json!({ "sessionKey": key, "messageCount": 4, "lastFingerprint": "fd" }),
    );
    assert_eq!(
        stale,
        json!({ "status": "mismatch", "messageCount": 2, "lastFingerprint": "fb" })
    );
    let wrong_from = server.error(
        "session.sync",
        json!({ "sessionKey": key, "from": 1, "messages": [user("c")] }),
    );
    assert_eq!(wrong_from["data"]["path"], "from");
    let synced = server.call(
        "session.sync",
        json!({ "sessionKey": key, "from": 2, "messages": [user("c"), assistant("d")], "lastFingerprint": "fd" }),
    );
    assert_eq!(
        synced,
        json!({ "messageCount": 4, "lastFingerprint": "fd" })
    );
    let ok = server.call(
        "session.assemble",
        json!({ "sessionKey": key, "messageCount": 4, "lastFingerprint": "fd" }),
    );
    assert_eq!(
        kept_positions(ok["items"].as_array().unwrap()),
        [0, 1, 2, 3]
    );

    // A rewritten history: same length, another last message. Reset keeps the old file whole.
    let rewritten = server.call(
        "session.assemble",
        json!({ "sessionKey": key, "messageCount": 4, "lastFingerprint": "other" }),
    );
    assert_eq!(rewritten["status"], "mismatch");
    let reset = server.call(
        "session.sync",
        json!({ "sessionKey": key, "from": 0, "reset": true, "messages": [user("new"), assistant("start")], "lastFingerprint": "n2" }),
    );
    assert_eq!(reset["messageCount"], 2);
    let ok = server.call(
        "session.assemble",
        json!({ "sessionKey": key, "messageCount": 2, "lastFingerprint": "n2" }),
    );
    assert_eq!(ok["items"], json!([{ "from": 0, "to": 1 }]));
    server.finish();
    let mirror = mirror_file(&boot);
    assert!(
        !std::fs::read_to_string(&mirror)
            .unwrap()
            .contains("\"content\":\"a\"")
    );
    let kept: Vec<_> = std::fs::read_dir(mirror.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".reset-"))
        .collect();
    assert_eq!(kept.len(), 1);
    assert!(
        std::fs::read_to_string(kept[0].path())
            .unwrap()
            .contains("\"content\":\"c\"")
    );
}

#[test]
fn fifty_sessions_at_once_keep_to_themselves() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path(), &[]);
    let keys: Vec<String> = (0..50).map(|n| format!("agent:main:s{n}")).collect();
    // Pipelined: every request is written before any answer is read; per-session order holds.
    let mut ids = Vec::new();
    for (n, key) in keys.iter().enumerate() {
        ids.push(server.send("session.bootstrap", json!({ "sessionKey": key })));
        for turn in 0..3 {
            ids.push(server.send(
                "session.commitTurn",
                json!({ "sessionKey": key, "advancementKey": format!("t{turn}"),
                        "messages": [user(&format!("session {n} turn {turn}")), assistant(&format!("reply {n}.{turn}"))],
                        "lastFingerprint": format!("{n}-{turn}") }),
            ));
        }
        ids.push(server.send(
            "session.assemble",
            json!({ "sessionKey": key, "messageCount": 6, "lastFingerprint": format!("{n}-2") }),
        ));
    }
    let mut mirrors = Vec::new();
    for (n, chunk) in ids.chunks(5).enumerate() {
        let boot = server.response(&chunk[0]);
        mirrors.push(mirror_file(&boot["result"]));
        for id in &chunk[1..4] {
            assert_eq!(
                server.response(id)["result"]["status"],
                "committed",
                "session {n}"
            );
        }
        let assembled = server.response(&chunk[4]);
        assert_eq!(
            assembled["result"]["status"], "ok",
            "session {n}: {assembled}"
        );
        assert_eq!(
            kept_positions(assembled["result"]["items"].as_array().unwrap()),
            [0, 1, 2, 3, 4, 5]
        );
    }
    server.finish();
    for (n, mirror) in mirrors.iter().enumerate() {
        let texts: Vec<String> = entries(mirror)
            .iter()
            .filter(|e| e["type"] == "message" && e["message"]["role"] == "user")
            .map(|e| e["message"]["content"].as_str().unwrap().to_string())
            .collect();
        let expected: Vec<String> = (0..3).map(|t| format!("session {n} turn {t}")).collect();
        assert_eq!(texts, expected, "{}", mirror.display());
        assert_eq!(markers(mirror).len(), 3);
    }
}

#[test]
fn a_small_budget_compacts_and_the_summary_comes_back_as_an_inserted_message() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path(), &[]);
    let key = "agent:main:budget";
    server.call("session.bootstrap", json!({ "sessionKey": key }));
    let filler = "lorem ipsum dolor sit amet ".repeat(150); // ~1,000 tokens a message
    let mut count = 0;
    for turn in 0..12 {
        server.call(
            "session.commitTurn",
            json!({ "sessionKey": key, "advancementKey": format!("t{turn}"),
                    "messages": [user(&format!("request {turn}: {filler}")), assistant(&format!("done {turn}: {filler}"))] }),
        );
        count += 2;
    }
    let assembled = server.call(
        "session.assemble",
        json!({ "sessionKey": key, "messageCount": count, "tokenBudget": 8000 }),
    );
    assert_eq!(assembled["status"], "ok");
    assert_eq!(assembled["compaction"]["compacted"], true, "{assembled}");
    let items = assembled["items"].as_array().unwrap();
    let summary = &items[0]["message"];
    assert_eq!(summary["role"], "user", "{assembled}");
    assert_eq!(summary["__ctxhost"]["kind"], "compactionSummary");
    let kept = kept_positions(items);
    assert!(!kept.is_empty() && kept.len() < count, "{kept:?}");
    assert_eq!(*kept.last().unwrap(), count as u64 - 1);
    assert!(
        assembled["estimatedTokens"].as_u64().unwrap() <= 8000,
        "{assembled}"
    );
    server.finish();
}

#[test]
fn a_mirror_carries_the_runtimes_session_id_and_big_ids_come_back_as_written() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path(), &[]);
    let params = json!({ "sessionKey": "agent:main:main", "sessionId": "oc-7f3a" });
    let boot = server.call("session.bootstrap", params);
    assert_eq!(boot["sessionId"], "oc-7f3a");
    let text = std::fs::read_to_string(mirror_file(&boot)).unwrap();
    let header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(header["id"], "oc-7f3a");
    server.write_line(r#"{"jsonrpc":"2.0","id":-18446744073709551617,"method":"initialize"}"#);
    let line = server.lines.recv_timeout(Duration::from_secs(60)).unwrap();
    assert!(line.contains(r#""id":-18446744073709551617,"#), "{line}");
    server.finish();
}

#[test]
fn internal_sessions_leave_no_mirror_behind() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path(), &[]);
    let key = "agent:main:internal-session-effects:1234";
    let boot = server.call("session.bootstrap", json!({ "sessionKey": key }));
    assert_eq!(boot["ephemeral"], true);
    let mirror = mirror_file(&boot);
    assert!(!mirror.starts_with(home.path()));
    server.call(
        "session.commitTurn",
        json!({ "sessionKey": key, "advancementKey": "x", "messages": [user("flush memory")] }),
    );
    assert!(mirror.exists());
    server.finish();
    assert!(!mirror.exists(), "{} left behind", mirror.display());
    let sessions = home.path().join("sessions");
    let leftovers: Vec<_> = walk(&sessions);
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// The files under `dir` once none are left, or those still there after `within`.
fn walk_until_empty(dir: &Path, within: Duration) -> Vec<PathBuf> {
    let deadline = Instant::now() + within;
    loop {
        let left = walk(dir);
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    read.filter_map(|e| e.ok())
        .flat_map(|e| {
            let path = e.path();
            if path.is_dir() {
                walk(&path)
            } else {
                vec![path]
            }
        })
        .collect()
}

#[test]
fn the_socket_serves_several_clients_sharing_sessions() {
    use std::os::unix::net::UnixStream;
    let home = tempfile::tempdir().unwrap();
    let socket = home.path().join("serve.sock");
    let mut child = common::command(home.path())
        .args(["serve", "--socket"])
        .arg(&socket)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while !socket.exists() {
        assert!(start.elapsed() < Duration::from_secs(30), "no socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    let ask = |stream: &mut UnixStream, line: Value| -> Value {
        writeln!(stream, "{line}").unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut response = String::new();
        reader.read_line(&mut response).unwrap();
        serde_json::from_str(&response).unwrap()
    };
    let mut first = UnixStream::connect(&socket).unwrap();
    let mut second = UnixStream::connect(&socket).unwrap();
    let r = ask(
        &mut first,
        json!({ "jsonrpc": "2.0", "id": 1, "method": "session.bootstrap", "params": { "sessionKey": "shared" } }),
    );
    assert_eq!(r["result"]["created"], true, "{r}");
    let r = ask(
        &mut second,
        json!({ "jsonrpc": "2.0", "id": 2, "method": "session.commitTurn",
        "params": { "sessionKey": "shared", "advancementKey": "k", "messages": [user("from the second client")] } }),
    );
    assert_eq!(r["result"]["status"], "committed", "{r}");
    let r = ask(
        &mut first,
        json!({ "jsonrpc": "2.0", "id": 3, "method": "session.assemble",
        "params": { "sessionKey": "shared", "messageCount": 1 } }),
    );
    assert_eq!(r["result"]["items"], json!([{ "index": 0 }]), "{r}");
    let r = ask(
        &mut first,
        json!({ "jsonrpc": "2.0", "id": 4, "method": "shutdown" }),
    );
    assert_eq!(r["result"], json!({}));
    let status = wait_with_timeout(&mut child, Duration::from_secs(30));
    assert!(status.success());
    let mut stdout = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut stdout).unwrap();
    assert!(stdout.is_empty(), "socket mode wrote to stdout: {stdout}");
    assert!(!socket.exists(), "the socket file is removed on shutdown");
}

/// Commits `turns` turns of ~2,000 tokens and assembles after each (at an 8,000-token budget);
/// returns the assemble answers.
fn commit_and_assemble(server: &mut Server, key: &str, turns: usize) -> Vec<Value> {
    let filler = "lorem ipsum dolor sit amet ".repeat(150);
    let mut answers = Vec::new();
    for turn in 0..turns {
        server.call(
            "session.commitTurn",
            json!({ "sessionKey": key, "advancementKey": format!("t{turn}"),
                    "messages": [user(&format!("request {turn}: {filler}")), assistant(&format!("done {turn}: {filler}"))] }),
        );
        answers.push(server.call(
            "session.assemble",
            json!({ "sessionKey": key, "messageCount": 2 * (turn + 1), "tokenBudget": 8000 }),
        ));
    }
    answers
}

#[test]
fn every_turn_is_in_the_ledger_and_health_sums_them_up() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path(), &[]);
    let key = "agent:main:ledger";
    let boot = server.call("session.bootstrap", json!({ "sessionKey": key }));
    let answers = commit_and_assemble(&mut server, key, 10);
    let compacted_at: Vec<usize> = (answers.iter().enumerate())
        .filter(|(_, a)| a["compaction"]["compacted"] == true)
        .map(|(n, _)| n)
        .collect();
    assert!(!compacted_at.is_empty(), "the budget forces a compaction");

    let health = server.call("health", json!({ "sessionKey": key }));
    assert_eq!(health["status"], "ok", "{health}");
    assert_eq!(health["sessions"]["turns"], 10, "{health}");
    assert_eq!(health["sessions"]["degradedTurns"], 0, "{health}");
    assert_eq!(health["session"]["known"], true);
    assert_eq!(health["session"]["health"]["engine"], "legacy");
    let unknown = server.call("health", json!({ "sessionKey": "agent:main:never" }));
    assert_eq!(unknown["session"]["known"], false, "{unknown}");
    assert!(
        unknown["session"]["message"]
            .as_str()
            .unwrap()
            .contains("agent:main:never"),
        "{unknown}"
    );
    server.finish();

    // The ledger beside the mirror: one record a turn, the compaction with its figures, and
    // legacy's request extending the previous one on every turn that did not compact.
    let mirror = mirror_file(&boot);
    let ledger = std::fs::read_to_string(format!("{}.ledger.jsonl", mirror.display())).unwrap();
    let records: Vec<Value> = ledger
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 10);
    for (n, record) in records.iter().enumerate() {
        assert_eq!(record["outcome"], "ok", "{record}");
        assert_eq!(record["engine"], "legacy");
        assert!(
            record["bridgeMicros"].as_u64().unwrap() >= record["engineMicros"].as_u64().unwrap()
        );
        let compacted = compacted_at.contains(&n);
        assert_eq!(
            record["compaction"]["compacted"] == true,
            compacted,
            "{record}"
        );
        if compacted {
            let c = &record["compaction"];
            assert!(
                c["tokensAfter"].as_u64() < c["tokensBefore"].as_u64(),
                "{record}"
            );
        } else if n > 0 {
            assert_eq!(record["prefix"]["keptPrevious"], true, "turn {n}: {record}");
        }
    }

    let output = common::ctxhost(
        home.path(),
        &["context", "history", "--session", key, "--json"],
    );
    let history = common::json_of(&output);
    // Served turns fill the ledger's records: the shape the schema documents holds them too.
    common::check_cli_schema("context-history", &history);
    assert_eq!(history["turns"]["turns"], 10, "{history}");
    assert_eq!(history["turns"]["degradedTurns"], 0);
    let text = common::ctxhost(home.path(), &["context", "history", "--session", key]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("turns: 10 recorded, 0 degraded"), "{text}");

    // The report plots the ledger: ten turns in the tokens plot, the compactions in its table.
    let page = home.path().join("report.html");
    let page_arg = page.display().to_string();
    let output = common::ctxhost(
        home.path(),
        &["report", "--session", key, "--out", &page_arg],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains(r#"data-plot="tokens""#), "no tokens plot");
    assert!(
        html.contains(r#"data-run="legacy" data-points="10""#),
        "ten turns plotted"
    );
    let summary = String::from_utf8_lossy(&output.stdout);
    assert!(summary.contains("compactions"), "{summary}");
}

#[test]
fn a_quarantined_engine_reads_degraded_in_health_and_the_ledger() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("ctxhost.json"),
        "{ plugins: { slots: { contextEngine: 'ghost' }, contextEngineFallback: 'legacy' } }",
    )
    .unwrap();
    let mut server = Server::start(home.path(), &[]);
    let key = "agent:main:fallback";
    let boot = server.call("session.bootstrap", json!({ "sessionKey": key }));
    commit_and_assemble(&mut server, key, 2);
    let health = server.call("health", json!({}));
    assert_eq!(health["status"], "degraded", "{health}");
    assert_eq!(health["quarantined"][0]["engine"], "ghost", "{health}");
    assert_eq!(health["sessions"]["degradedTurns"], 2, "{health}");
    assert_eq!(health["degradedSessions"][0]["sessionKey"], key, "{health}");
    server.finish();
    let mirror = mirror_file(&boot);
    let ledger = std::fs::read_to_string(format!("{}.ledger.jsonl", mirror.display())).unwrap();
    let first: Value = serde_json::from_str(ledger.lines().next().unwrap()).unwrap();
    assert_eq!(first["outcome"], "fallback", "{first}");
    assert_eq!(first["configuredEngine"], "ghost");
    assert!(
        first["error"].as_str().unwrap().contains("quarantined"),
        "{first}"
    );
}

#[test]
fn a_changed_tool_list_breaks_the_prefix_and_the_same_list_keeps_it() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path(), &[]);
    let key = "agent:main:tools-prefix";
    let boot = server.call("session.bootstrap", json!({ "sessionKey": key }));
    server.call(
        "session.commitTurn",
        json!({ "sessionKey": key, "advancementKey": "t0", "messages": [user("q"), assistant("a")] }),
    );
    for tools in [
        json!(["read"]),
        json!(["read"]),
        json!(["read", "edit"]),
        json!(["read", "edit"]),
    ] {
        server.call(
            "session.assemble",
            json!({ "sessionKey": key, "messageCount": 2, "availableTools": tools }),
        );
    }
    server.finish();
    let mirror = mirror_file(&boot);
    let ledger = std::fs::read_to_string(format!("{}.ledger.jsonl", mirror.display())).unwrap();
    let kept: Vec<bool> = (ledger.lines())
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["prefix"]["keptPrevious"] == true)
        .collect();
    assert_eq!(kept, [false, true, false, true], "{ledger}");
}

#[test]
fn an_idle_session_gives_its_instance_back_and_the_next_request_starts_a_fresh_one() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path(), &["--idle-release-ms", "300"]);
    let key = "agent:main:idle";
    server.call("session.bootstrap", json!({ "sessionKey": key }));
    server.call(
        "session.commitTurn",
        json!({ "sessionKey": key, "advancementKey": "t0", "messages": [user("q0"), assistant("a0")] }),
    );
    let server_pid = server.child.id();
    let held = || descriptors_under(server_pid, home.path());
    assert!(!held().is_empty(), "a busy session holds its mirror open");
    let health = health_once(&mut server, |h| h["sessions"]["idleReleases"] != 0);
    assert_eq!(health["sessions"]["idleReleases"], 1, "{health}");
    // Nothing in the home is held open by an idle session (its mirror, ledger, state dir).
    assert_eq!(held(), Vec::<PathBuf>::new());
    // The session is still open: the next turn bootstraps a fresh instance from the mirror.
    server.call(
        "session.commitTurn",
        json!({ "sessionKey": key, "advancementKey": "t1", "messages": [user("q1"), assistant("a1")] }),
    );
    let assembled = server.call(
        "session.assemble",
        json!({ "sessionKey": key, "messageCount": 4 }),
    );
    assert_eq!(
        assembled["items"],
        json!([{ "from": 0, "to": 3 }]),
        "{assembled}"
    );
    health_once(&mut server, |h| h["sessions"]["idleReleases"] == 2);
    // Released once while idle; a session without an instance is not released again.
    std::thread::sleep(Duration::from_millis(900));
    let health = server.call("health", json!({}));
    assert_eq!(health["sessions"]["idleReleases"], 2, "{health}");
    server.finish();
}

/// The server's `health` once `holds` is true of it, polled for up to ten seconds (the
/// last one read when it never is): timers under a loaded machine fire late, not never.
fn health_once(server: &mut Server, holds: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let health = server.call("health", json!({}));
        if holds(&health) || Instant::now() >= deadline {
            return health;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What process `pid` holds open under `dir`.
fn descriptors_under(pid: u32, dir: &Path) -> Vec<PathBuf> {
    let open = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap();
    (open.flatten())
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter(|target| target.starts_with(dir))
        .collect()
}

#[test]
fn a_new_sidecar_measures_its_first_turn_against_the_last_ones_request() {
    let home = tempfile::tempdir().unwrap();
    let key = "agent:main:per-run";
    let mut mirror = PathBuf::new();
    // One sidecar per run, as `openclaw agent --local` and pi start them.
    for run in 0..2 {
        let mut server = Server::start(home.path(), &[]);
        let boot = server.call("session.bootstrap", json!({ "sessionKey": key }));
        mirror = mirror_file(&boot);
        server.call(
            "session.commitTurn",
            json!({ "sessionKey": key, "advancementKey": format!("t{run}"),
                    "messages": [user(&format!("q{run}")), assistant(&format!("a{run}"))] }),
        );
        server.call(
            "session.assemble",
            json!({ "sessionKey": key, "messageCount": 2 * (run + 1) }),
        );
        server.finish();
    }
    let ledger = std::fs::read_to_string(format!("{}.ledger.jsonl", mirror.display())).unwrap();
    let records: Vec<Value> = ledger
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 2);
    assert_eq!(
        records[0]["prefix"]["keptPrevious"], false,
        "nothing before the first"
    );
    assert_eq!(records[1]["prefix"]["keptPrevious"], true, "{ledger}");
    assert_eq!(
        records[1]["prefix"]["sharedTokens"], records[0]["prefix"]["requestTokens"],
        "{ledger}"
    );
}

/// `ctxhost serve` on `home` with its temp dir at `tmp`, as a sidecar started with `TMPDIR`.
fn start_with_tmp(home: &Path, tmp: &Path) -> Server {
    let mut command = common::command(home);
    command.arg("serve").env("TMPDIR", tmp);
    Server::start_command(command)
}

/// Commits `turns` two-message turns (`t0`…) to `key`.
fn commit_turns(server: &mut Server, key: &str, turns: std::ops::Range<usize>) {
    for turn in turns {
        server.call(
            "session.commitTurn",
            json!({ "sessionKey": key, "advancementKey": format!("t{turn}"),
                    "messages": [user(&format!("q{turn}")), assistant(&format!("a{turn}"))],
                    "lastFingerprint": format!("f{turn}") }),
        );
    }
}

#[test]
fn servers_of_several_agent_processes_share_one_home() {
    let home = tempfile::tempdir().unwrap();
    // Started together, as two `pi -p` runs start their sidecars.
    let mut first = Server::start(home.path(), &[]);
    let mut second = Server::start(home.path(), &[]);
    for (server, key) in [
        (&mut first, "agent:main:one"),
        (&mut second, "agent:main:two"),
    ] {
        let boot = server.call("session.bootstrap", json!({ "sessionKey": key }));
        assert_eq!(boot["created"], true, "{boot}");
    }
    commit_turns(&mut first, "agent:main:one", 0..2);
    commit_turns(&mut second, "agent:main:two", 0..3);
    for (server, key, count) in [
        (&mut first, "agent:main:one", 4),
        (&mut second, "agent:main:two", 6),
    ] {
        let assembled = server.call(
            "session.assemble",
            json!({ "sessionKey": key, "messageCount": count }),
        );
        assert_eq!(assembled["status"], "ok", "{key}: {assembled}");
        assert_eq!(
            kept_positions(assembled["items"].as_array().unwrap()).len(),
            count
        );
    }
    first.finish();
    second.finish();
}

#[test]
fn a_session_open_in_another_server_is_refused_naming_it_until_that_one_is_killed() {
    let home = tempfile::tempdir().unwrap();
    let key = "agent:main:shared";
    let mut holder = Server::start(home.path(), &[]);
    holder.call("session.bootstrap", json!({ "sessionKey": key }));
    commit_turns(&mut holder, key, 0..3);

    let mut other = Server::start(home.path(), &[]);
    let refused = other.error("session.bootstrap", json!({ "sessionKey": key }));
    assert_eq!(refused["code"], -32000, "{refused}");
    assert_eq!(refused["data"]["sessionKey"], key, "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("pid {}", holder.child.id()))
            && message.contains("another process"),
        "{message}"
    );
    // Refused, the other server holds nothing of it: not open there.
    let unknown = other.error(
        "session.assemble",
        json!({ "sessionKey": key, "messageCount": 6 }),
    );
    assert_eq!(unknown["code"], -32001, "{unknown}");

    // kill -9: no close, no cleanup; what it acknowledged is all on disk.
    holder.child.kill().unwrap();
    holder.child.wait().unwrap();
    let boot = other.call("session.bootstrap", json!({ "sessionKey": key }));
    assert_eq!(boot["messageCount"], 6, "{boot}");
    assert_eq!(boot["lastFingerprint"], "f2", "{boot}");
    let again = other.call(
        "session.commitTurn",
        json!({ "sessionKey": key, "advancementKey": "t2", "messages": [user("q2")] }),
    );
    assert_eq!(again["status"], "duplicate", "{again}");
    commit_turns(&mut other, key, 3..4);
    other.finish();
    let messages = entries(&mirror_file(&boot))
        .into_iter()
        .filter(|e| e["type"] == "message")
        .count();
    assert_eq!(messages, 8);
}

#[test]
fn an_idle_session_is_left_to_another_server_and_read_again_when_it_returns() {
    let home = tempfile::tempdir().unwrap();
    let key = "agent:main:handed";
    let mut first = Server::start(home.path(), &["--idle-release-ms", "100"]);
    first.call("session.bootstrap", json!({ "sessionKey": key }));
    commit_turns(&mut first, key, 0..1);
    // Idle: the first gives the session up, so another process can open it.
    health_once(&mut first, |h| h["sessions"]["idleReleases"] == 1);
    let mut second = Server::start(home.path(), &[]);
    let boot = second.call("session.bootstrap", json!({ "sessionKey": key }));
    assert_eq!(boot["messageCount"], 2, "{boot}");
    commit_turns(&mut second, key, 1..2);
    // While the second holds it, the first cannot take it back.
    let refused = first.error(
        "session.assemble",
        json!({ "sessionKey": key, "messageCount": 4 }),
    );
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains(&format!("pid {}", second.child.id())),
        "{refused}"
    );
    second.call("session.close", json!({ "sessionKey": key }));
    // Back in the first, the session is what the second left: nothing written over it.
    commit_turns(&mut first, key, 2..3);
    let assembled = first.call(
        "session.assemble",
        json!({ "sessionKey": key, "messageCount": 6, "lastFingerprint": "f2" }),
    );
    assert_eq!(assembled["status"], "ok", "{assembled}");
    first.finish();
    second.finish();
    let texts: Vec<String> = entries(&mirror_file(&boot))
        .into_iter()
        .filter(|e| e["type"] == "message")
        .map(|e| {
            let content = &e["message"]["content"];
            (content.as_str())
                .or_else(|| content[0]["text"].as_str())
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(texts, ["q0", "a0", "q1", "a1", "q2", "a2"], "{texts:?}");
}

#[test]
fn a_killed_servers_internal_session_is_removed_at_the_next_start() {
    let home = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let key = "agent:main:internal-session-effects:77";
    let mut killed = start_with_tmp(home.path(), tmp.path());
    let boot = killed.call("session.bootstrap", json!({ "sessionKey": key }));
    let mirror = mirror_file(&boot);
    assert!(mirror.starts_with(tmp.path()), "{}", mirror.display());
    killed.call(
        "session.commitTurn",
        json!({ "sessionKey": key, "advancementKey": "x", "messages": [user("private flush")] }),
    );
    killed.child.kill().unwrap();
    killed.child.wait().unwrap();
    assert!(mirror.exists(), "kill -9 cleans nothing up itself");

    // At once, not a minute later: the lock, not an age, says its process is gone. The sweep
    // runs beside the first request, so it is given a few seconds, far under the minute an
    // age would have needed.
    let mut next = start_with_tmp(home.path(), tmp.path());
    next.call("initialize", json!({}));
    let left = walk_until_empty(tmp.path(), Duration::from_secs(10));
    assert!(left.is_empty(), "left behind: {left:?}");
    // A live server's scratch is not another's to remove.
    let live_boot = next.call("session.bootstrap", json!({ "sessionKey": key }));
    let mut third = start_with_tmp(home.path(), tmp.path());
    third.call("initialize", json!({}));
    assert!(mirror_file(&live_boot).exists());
    third.finish();
    next.finish();
    assert!(walk(tmp.path()).is_empty());
}

#[test]
fn a_burst_of_resets_keeps_every_old_history() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path(), &[]);
    let key = "agent:main:resets";
    let boot = server.call("session.bootstrap", json!({ "sessionKey": key }));
    // Pipelined: all 50 written before any answer is read, so many fall in one millisecond.
    let ids: Vec<String> = (0..50)
        .map(|n| {
            server.send(
                "session.sync",
                json!({ "sessionKey": key, "from": 0, "reset": true,
                        "messages": [user(&format!("history {n}"))], "lastFingerprint": format!("h{n}") }),
            )
        })
        .collect();
    for id in ids {
        let response = server.response(&id);
        assert_eq!(response["result"]["messageCount"], 1, "{response}");
    }
    server.finish();
    let mirror = mirror_file(&boot);
    let kept: Vec<String> = std::fs::read_dir(mirror.parent().unwrap())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".reset-"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    assert_eq!(kept.len(), 50, "one old history per reset");
    // Every history but the last one set aside, each exactly once.
    for n in 0..49 {
        let holding = (kept.iter())
            .filter(|text| text.contains(&format!("\"history {n}\"")))
            .count();
        assert_eq!(holding, 1, "history {n} is kept {holding} times");
    }
    assert!(
        std::fs::read_to_string(&mirror)
            .unwrap()
            .contains("\"history 49\"")
    );
}
