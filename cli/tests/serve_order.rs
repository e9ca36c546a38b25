//! Order checks the client cannot make alone: a commit or a tail sync that says which history
//! it extends (`base`) is refused, with nothing written, when the mirror holds another one.

use serde_json::json;

use crate::common::serve::{Server, markers, mirror_file, user};

#[test]
fn commits_out_of_order_and_syncs_over_another_history_are_refused() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path(), &[]);
    let key = "agent:main:order";
    let boot = server.call("session.bootstrap", json!({ "sessionKey": key }));
    let commit = |n: usize, base: usize, fingerprint: &str| {
        json!({
            "sessionKey": key, "advancementKey": format!("t{n}"),
            "messages": [user(&format!("m{n}"))], "lastFingerprint": fingerprint,
            "base": { "messageCount": base },
        })
    };
    server.call("session.commitTurn", commit(0, 0, "f0"));
    // Turn 2 arrives before turn 1: it extends 2 messages, and the mirror holds 1.
    let early = server.error("session.commitTurn", commit(2, 2, "f2"));
    assert_eq!(early["code"], -32602, "{early}");
    assert_eq!(early["data"]["path"], "base");
    assert_eq!(early["data"]["messageCount"], 1);
    server.call("session.commitTurn", commit(1, 1, "f1"));
    // A commit already made stays `duplicate`, whatever base it is retried with.
    let again = server.call("session.commitTurn", commit(0, 0, "f0"));
    assert_eq!(again["status"], "duplicate");
    // A tail sync whose base fingerprint is not the mirror's last one (the middle changed).
    let sync = json!({
        "sessionKey": key, "from": 2, "messages": [user("m2")], "lastFingerprint": "g2",
        "base": { "messageCount": 2, "lastFingerprint": "g1" },
    });
    let refused = server.error("session.sync", sync);
    assert_eq!(refused["code"], -32602, "{refused}");
    assert_eq!(refused["data"]["lastFingerprint"], "f1");
    assert_eq!(markers(&mirror_file(&boot)).len(), 2, "nothing written");
    server.finish();
}
