//! A history that differs from the mirror's only in the middle: the chain of fingerprints the
//! server computes from each commit's and sync's `fingerprints` tells it apart, where the count
//! and the last fingerprint alone answer `ok`. Nothing written is lost on the way back in step.

use serde_json::{Value, json};

use crate::common::serve::{Server, markers, mirror_file, user};

/// The chains of `["fa", "fb", "fc", "fd"]` and of that history rewritten or reordered in the
/// middle (SHA-256 over the previous chain and the fingerprint, 16 hex digits: what
/// `integrations/client/fingerprint.js` computes).
const CHAIN_ABCD: &str = "6fa9da46391d8962";
const CHAIN_AXCD: &str = "f089ab97c16e2896";
const CHAIN_ABC: &str = "de40367f720c7cbe";

fn assemble(server: &mut Server, key: &str, last: &str, chain: &str) -> Value {
    let params = json!({
        "sessionKey": key, "messageCount": 4, "lastFingerprint": last, "chain": chain,
    });
    server.call("session.assemble", params)
}

#[test]
fn a_sync_over_a_middle_rewritten_is_a_mismatch_and_a_reset_loses_nothing() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path(), &[]);
    let key = "agent:main:chain-sync";
    let boot = server.call("session.bootstrap", json!({ "sessionKey": key }));
    let messages: Vec<Value> = ["a", "b", "c"].iter().map(|t| user(t)).collect();
    let head = json!({
        "sessionKey": key, "from": 0, "messages": messages, "fingerprints": ["fa", "fb", "fc"],
    });
    let state = server.call("session.sync", head);
    assert_eq!(state["chain"], CHAIN_ABC, "{state}");
    // The client's message 1 was rewritten; it sends only the tail, as it would without chains.
    let tail = json!({
        "sessionKey": key, "from": 3, "messages": [user("d")], "fingerprints": ["fd"],
    });
    server.call("session.sync", tail);
    let answer = assemble(&mut server, key, "fd", CHAIN_AXCD);
    assert_eq!(answer["status"], "mismatch", "{answer}");
    assert_eq!(answer["chain"], CHAIN_ABCD);
    assert_eq!(answer["lastFingerprint"], "fd");
    // A tail that names the history it extends by its chain is refused as it arrives.
    let based = json!({
        "sessionKey": key, "from": 4, "messages": [user("e")], "fingerprints": ["fe"],
        "base": { "messageCount": 4, "lastFingerprint": "fd", "chain": CHAIN_AXCD },
    });
    let refused = server.error("session.sync", based);
    assert_eq!(refused["data"]["path"], "base", "{refused}");
    assert_eq!(refused["data"]["chain"], CHAIN_ABCD);
    // The client resets from its whole history; the old mirror is kept beside the new one.
    let history: Vec<Value> = ["a", "x", "c", "d"].iter().map(|t| user(t)).collect();
    let reset = json!({
        "sessionKey": key, "from": 0, "messages": history, "reset": true,
        "fingerprints": ["fa", "fx", "fc", "fd"],
    });
    assert_eq!(server.call("session.sync", reset)["chain"], CHAIN_AXCD);
    assert_eq!(assemble(&mut server, key, "fd", CHAIN_AXCD)["status"], "ok");
    let mirror = mirror_file(&boot);
    let kept = set_aside(&mirror, "reset");
    assert_eq!(
        markers(&kept).len(),
        2,
        "both syncs of the old mirror are kept"
    );
    server.finish();
}

#[test]
fn commits_out_of_order_without_a_base_are_a_mismatch_at_the_next_assemble() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path(), &[]);
    let key = "agent:main:chain-order";
    server.call("session.bootstrap", json!({ "sessionKey": key }));
    let commit = |turn: &str, text: &str, fingerprint: &str| {
        json!({
            "sessionKey": key, "advancementKey": turn, "messages": [user(text)],
            "lastFingerprint": fingerprint, "fingerprints": [fingerprint],
        })
    };
    // Turn 3 arrives before turn 2; the last turn arrives last, so the count and the last
    // fingerprint are the client's.
    for (turn, text, fingerprint) in [("t1", "a", "fa"), ("t3", "c", "fc"), ("t2", "b", "fb")] {
        server.call("session.commitTurn", commit(turn, text, fingerprint));
    }
    server.call("session.commitTurn", commit("t4", "d", "fd"));
    let answer = assemble(&mut server, key, "fd", CHAIN_ABCD);
    assert_eq!(answer["status"], "mismatch", "{answer}");
    assert_eq!(answer["messageCount"], 4);
    server.finish();
}

#[test]
fn a_commit_without_fingerprints_leaves_the_chain_unknown_and_old_clients_in_step() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path(), &[]);
    let key = "agent:main:chain-old";
    server.call("session.bootstrap", json!({ "sessionKey": key }));
    let old = json!({
        "sessionKey": key, "advancementKey": "t1", "messages": [user("a")], "lastFingerprint": "fa",
    });
    server.call("session.commitTurn", old);
    let params = json!({ "sessionKey": key, "messageCount": 1, "lastFingerprint": "fa" });
    let answer = server.call("session.assemble", params);
    assert_eq!(answer["status"], "ok", "{answer}");
    let state = server.call("session.bootstrap", json!({ "sessionKey": key }));
    assert_eq!(state.get("chain"), None, "unknown, so absent: {state}");
    // Fingerprints that are not one a message are refused, naming the field.
    let uneven = json!({
        "sessionKey": key, "advancementKey": "t2", "messages": [user("b")], "fingerprints": [],
    });
    let refused = server.error("session.commitTurn", uneven);
    assert_eq!(refused["data"]["path"], "fingerprints", "{refused}");
    server.finish();
}

/// The one copy of `mirror` set aside as `<file>.<kind>-<time>`.
fn set_aside(mirror: &std::path::Path, kind: &str) -> std::path::PathBuf {
    let name = mirror.file_name().unwrap().to_string_lossy().to_string();
    let prefix = format!("{name}.{kind}-");
    let mut copies: Vec<_> = std::fs::read_dir(mirror.parent().unwrap())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&prefix)
        })
        .collect();
    assert_eq!(copies.len(), 1, "{copies:?}");
    copies.remove(0)
}
