//! A failed write leaves nothing behind: `ctxhost serve` under a file size limit (EFBIG, the
//! same class as a full disk) refuses the commit that does not fit, keeps the mirror exactly
//! as the last acknowledged commit left it, and goes on serving from there.

use std::path::Path;

use serde_json::json;

use crate::common::serve::{Server, markers, mirror_file, user};

/// `ctxhost serve` limited to files of `kib` KiB (with SIGXFSZ ignored, so a write past it
/// fails with EFBIG instead of killing the process).
fn serve_with_file_limit(home: &Path, kib: u64) -> Server {
    // `ulimit -f` counts 512-byte blocks in POSIX shells.
    Server::start_limited(home, &format!("trap '' XFSZ; ulimit -f {}", kib * 2))
}

#[test]
fn a_commit_past_the_file_size_limit_is_refused_and_leaves_no_fragment() {
    let home = tempfile::tempdir().unwrap();
    let key = "agent:main:efbig";
    let mut server = serve_with_file_limit(home.path(), 64);
    let boot = server.call("session.bootstrap", json!({ "sessionKey": key }));
    let mirror = mirror_file(&boot);
    let commit = |n: usize, text: &str| json!({ "sessionKey": key, "advancementKey": format!("t{n}"), "messages": [user(text)] });
    for n in 0..3 {
        let done = server.call("session.commitTurn", commit(n, &format!("small {n}")));
        assert_eq!(done["status"], "committed");
    }
    let good = std::fs::read(&mirror).unwrap();
    // 100 KiB does not fit under the 64 KiB limit: part of it would be written.
    let refused = server.error("session.commitTurn", commit(3, &"x".repeat(100 << 10)));
    assert_eq!(refused["code"], -32004, "{refused}");
    assert_eq!(std::fs::read(&mirror).unwrap(), good, "a fragment was left");
    // The session goes on from the last acknowledged commit.
    let assembled = server.call(
        "session.assemble",
        json!({ "sessionKey": key, "messageCount": 3 }),
    );
    assert_eq!(assembled["status"], "ok", "{assembled}");
    assert_eq!(assembled["items"], json!([{ "from": 0, "to": 2 }]));
    let next = server.call("session.commitTurn", commit(4, "small again"));
    assert_eq!(next["messageCount"], 4);
    server.finish();

    // Restarted without the limit: every acknowledged commit is there, nothing set aside.
    let mut server = Server::start(home.path(), &[]);
    let again = server.call("session.bootstrap", json!({ "sessionKey": key }));
    assert_eq!(again["messageCount"], 4, "{again}");
    assert_eq!(markers(&mirror).len(), 4);
    let dir = mirror.parent().unwrap();
    let torn: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".torn-"))
        .collect();
    assert!(torn.is_empty(), "{torn:?}");
    server.finish();
}
