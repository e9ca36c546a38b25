//! An engine per agent (`plugins.slots.contextEngineByAgent`): one `ctxhost serve` serves an
//! OpenClaw agent, another OpenClaw agent and a pi session, each on the engine its agent is
//! configured to, and the ledger of each session says which engine ran every turn.

use serde_json::{Value, json};

use crate::common::serve::{Server, assistant, mirror_file, user};
use crate::common::{ctxhost, stderr};

const CONFIG: &str = r#"{
  // The slot serves every agent not named below.
  "plugins": { "slots": {
    "contextEngine": "legacy",
    "contextEngineByAgent": { "agent:review": "checkpoint-manager", "pi": "lossless" }
  } }
}
"#;

/// Bootstraps `key`, commits one turn and assembles it; returns the session's ledger (written
/// after each answer is sent: read it once the server has finished).
fn one_turn(server: &mut Server, key: &str) -> String {
    let boot = server.call("session.bootstrap", json!({ "sessionKey": key }));
    let messages = [
        user("which engine serves me?"),
        assistant("the one configured"),
    ];
    server.call(
        "session.commitTurn",
        json!({ "sessionKey": key, "advancementKey": "t1", "messages": messages }),
    );
    let assembled = server.call(
        "session.assemble",
        json!({ "sessionKey": key, "messageCount": 2, "tokenBudget": 32000, "prompt": "next" }),
    );
    assert_eq!(assembled["status"], "ok", "{key}: {assembled}");
    format!("{}.ledger.jsonl", mirror_file(&boot).display())
}

/// The engine of each record of the ledger at `path`.
fn ledger_engines(path: &str) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .map(|record| record["engine"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn each_agent_runs_on_its_own_engine_and_the_ledger_says_which() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("ctxhost.json"), CONFIG).unwrap();
    let mut server = Server::start(home.path(), &[]);
    let sessions = [
        ("agent:main:chat", "legacy"),
        ("agent:review:pr-7", "checkpoint-manager"),
        ("pi:0193-session", "lossless"),
    ];
    let ledgers: Vec<String> = (sessions.iter())
        .map(|(key, _)| one_turn(&mut server, key))
        .collect();
    server.finish();
    for ((key, engine), ledger) in sessions.iter().zip(&ledgers) {
        let engines = ledger_engines(ledger);
        assert!(!engines.is_empty(), "{key}: no ledger record");
        assert!(engines.iter().all(|e| e == engine), "{key}: {engines:?}");
    }

    // `config show` says which engine applies where, and which line of which file said so.
    let shown = ctxhost(home.path(), &["config", "show"]);
    assert!(shown.status.success(), "{}", stderr(&shown));
    let text = String::from_utf8_lossy(&shown.stdout);
    for (key, engine) in [
        (
            "plugins.slots.contextEngineByAgent.agent:review",
            "checkpoint-manager",
        ),
        ("plugins.slots.contextEngineByAgent.pi", "lossless"),
    ] {
        let line = text
            .lines()
            .find(|l| l.contains(key))
            .unwrap_or_else(|| panic!("{key} not shown:\n{text}"));
        assert!(line.contains(engine), "{line}");
        assert!(
            line.contains("ctxhost.json"),
            "the origin is the file: {line}"
        );
    }
}
