//! `ctxhost serve` at its limits: any valid session key opens (long non-ASCII ones under a
//! stable short file name), a key that cannot be one is refused without leaving anything in
//! the server, a client that never reads is not read either, a shutdown ends the server
//! whatever another client does, and more sessions than the instance pool's slots or the descriptor limit allow
//! all answer (the least recently used idle ones giving their instance and descriptors up).

use serde_json::{Value, json};

use crate::common;

use crate::common::serve::{Server, mirror_file, user};

#[test]
fn long_non_ascii_keys_open_commit_and_reopen() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path(), &[]);
    // 84 to 200 bytes, most of them two-byte characters: up to 564 bytes percent-encoded.
    for n in [40, 60, 76] {
        let key = format!("agent:{}:{}", "ü".repeat(n / 4), "é".repeat(n));
        assert!(key.len() <= 200, "{}", key.len());
        let boot = server.call("session.bootstrap", json!({ "sessionKey": key }));
        let commit = json!({ "sessionKey": key, "advancementKey": "a1", "messages": [user("hi")] });
        server.call("session.commitTurn", commit);
        server.call("session.close", json!({ "sessionKey": key }));
        let again = server.call("session.bootstrap", json!({ "sessionKey": key }));
        assert_eq!(again["messageCount"], 1, "{n}: {again}");
        assert_eq!(mirror_file(&again), mirror_file(&boot));
        let name = mirror_file(&boot).file_name().unwrap().len();
        assert!(name <= 200, "{n}: a {name}-byte file name");
        // The file name is a short form; the full key is recorded inside.
        let text = std::fs::read_to_string(mirror_file(&boot)).unwrap();
        let recorded: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["customType"] == "ctxhost.sessionKey")
            .collect();
        assert_eq!(recorded.len(), 1, "{n}: {text}");
        assert_eq!(recorded[0]["data"]["sessionKey"], key.as_str());
    }
    server.finish();
}

/// The resident memory of process `pid`, in bytes.
fn resident_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[test]
fn refused_bootstraps_with_huge_keys_leave_the_server_its_size() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path(), &[]);
    // One refused request first: the line buffer and the allocator's arenas are warm.
    let key = |n: usize| format!("{n}{}", "k".repeat(8 << 20));
    let error = server.error("session.bootstrap", json!({ "sessionKey": key(0) }));
    assert_eq!(error["code"], -32602, "{error}");
    let before = resident_bytes(server.child.id());
    for n in 1..=20 {
        let error = server.error("session.bootstrap", json!({ "sessionKey": key(n) }));
        assert_eq!(error["code"], -32602);
        assert!(error.to_string().len() < 4096, "the key came back");
    }
    let grown = resident_bytes(server.child.id()).saturating_sub(before);
    // 20 keys of 8 MiB kept would be 160 MiB at least.
    assert!(grown < 64 << 20, "the server grew by {} MiB", grown >> 20);
    server.finish();
}

/// Waits up to `limit` for `child` to exit.
fn exited_within(child: &mut std::process::Child, limit: std::time::Duration) -> bool {
    let started = std::time::Instant::now();
    while started.elapsed() < limit {
        if child.try_wait().unwrap().is_some() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    false
}

#[test]
fn a_client_that_never_reads_is_not_read_either() {
    use std::io::Write;
    let home = tempfile::tempdir().unwrap();
    let mut child = common::command(home.path())
        .arg("serve")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Its answers are never read: the pipe fills and the server's writes block.
    let _unread = child.stdout.take();
    let mut stdin = child.stdin.take().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let before = resident_bytes(child.id());
    let writing = std::thread::spawn(move || {
        let line = br#"{"jsonrpc":"2.0","id":"a-long-request-id","method":"session.close","params":{"sessionKey":"never-opened"}}
"#;
        for _ in 0..800_000 {
            if stdin.write_all(line).is_err() {
                break;
            }
        }
    });
    std::thread::sleep(std::time::Duration::from_secs(4));
    let grown = resident_bytes(child.id()).saturating_sub(before);
    child.kill().unwrap();
    child.wait().unwrap();
    writing.join().unwrap();
    // 800,000 answers of ~100 bytes buffered would be 80 MiB and more.
    assert!(grown < 24 << 20, "the server grew by {} MiB", grown >> 20);
}

#[test]
fn shutdown_ends_the_server_whatever_another_client_does() {
    use std::io::{BufRead, Write};
    use std::os::unix::net::UnixStream;
    let home = tempfile::tempdir().unwrap();
    let socket = home.path().join("serve.sock");
    let mut server = common::command(home.path())
        .args(["serve", "--socket", socket.to_str().unwrap()])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while !socket.exists() {
        assert!(
            started.elapsed().as_secs() < 60,
            "the socket never appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // A client that sends and never reads.
    let mut silent = UnixStream::connect(&socket).unwrap();
    let flooding = std::thread::spawn(move || {
        let line =
            br#"{"jsonrpc":"2.0","id":1,"method":"session.close","params":{"sessionKey":"x"}}
"#;
        for _ in 0..200_000 {
            if silent.write_all(line).is_err() {
                break;
            }
        }
        silent
    });
    std::thread::sleep(std::time::Duration::from_secs(1));
    let mut polite = UnixStream::connect(&socket).unwrap();
    polite
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":\"bye\",\"method\":\"shutdown\"}\n")
        .unwrap();
    let mut answer = String::new();
    std::io::BufReader::new(&polite)
        .read_line(&mut answer)
        .unwrap();
    assert!(answer.contains(r#""id":"bye""#), "{answer}");
    let exited = exited_within(&mut server, std::time::Duration::from_secs(30));
    if !exited {
        server.kill().unwrap();
    }
    server.wait().unwrap();
    drop(flooding.join());
    assert!(exited, "the server did not exit within 30 s of shutdown");
}

#[test]
fn scratch_dirs_a_killed_server_left_are_removed_at_start() {
    let home = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let an_hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    let plant = |pid: u32| {
        let dir = tmp.path().join(format!("ctxhost-ephemeral-{pid}-x1y2"));
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("flush.jsonl"), "{}\n").unwrap();
        std::fs::File::open(&dir)
            .unwrap()
            .set_modified(an_hour_ago)
            .unwrap();
        dir
    };
    // No process has this pid (above any pid_max); the test's own process is alive.
    let dead = plant(999_999_999);
    let alive = plant(std::process::id());
    let mut command = common::command(home.path());
    command.arg("serve").env("TMPDIR", tmp.path());
    let mut server = Server::start_command(command);
    server.call("initialize", json!({}));
    server.finish();
    assert!(!dead.exists(), "the dead server's scratch is still there");
    assert!(alive.exists(), "a live server's scratch was removed");
}

/// Bootstraps `key`, commits one turn and assembles it; the assembly keeps the turn.
fn open_and_turn(server: &mut Server, key: &str) {
    server.call("session.bootstrap", json!({ "sessionKey": key }));
    let commit = json!({ "sessionKey": key, "advancementKey": "t1", "messages": [user(key)] });
    assert_eq!(
        server.call("session.commitTurn", commit)["status"],
        "committed"
    );
    assemble_keeps_the_turn(server, key);
}

fn assemble_keeps_the_turn(server: &mut Server, key: &str) {
    let assembled = server.call(
        "session.assemble",
        json!({ "sessionKey": key, "messageCount": 1 }),
    );
    assert_eq!(assembled["status"], "ok", "{key}: {assembled}");
    assert_eq!(assembled["items"], json!([{ "index": 0 }]), "{key}");
}

/// Every session answers, the first ones again after the later ones took their places, the
/// engine's breaker never counted a shortage, and no more sessions than allowed hold one.
fn every_session_answers(server: &mut Server, sessions: usize) {
    let keys: Vec<String> = (0..sessions).map(|n| format!("agent:main:s{n}")).collect();
    for key in &keys {
        open_and_turn(server, key);
    }
    for key in &keys {
        assemble_keeps_the_turn(server, key);
    }
    let health = server.call("health", json!({}));
    assert_eq!(health["status"], "ok", "{health}");
    assert_eq!(health["engine"]["circuitOpen"], Value::Null, "{health}");
    let counts = &health["sessions"];
    assert_eq!(counts["open"], sessions, "{health}");
    let (resident, limit) = (&counts["resident"], &counts["residentLimit"]);
    assert!(resident.as_u64() <= limit.as_u64(), "{health}");
    assert!(counts["evictions"].as_u64().unwrap() > 0, "{health}");
}

#[test]
fn more_sessions_than_instance_slots_all_answer() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path(), &["--max-instances", "3"]);
    every_session_answers(&mut server, 12);
    server.finish();
}

#[test]
fn a_sidecar_on_stdio_holds_one_agents_sessions_by_default() {
    let home = tempfile::tempdir().unwrap();
    // 64 slots (two kept for loads) at a soft limit where ~180 sessions would fit.
    let mut server = Server::start_limited_with(home.path(), "ulimit -Sn 1024", &[]);
    let health = server.call("health", json!({}));
    assert_eq!(health["sessions"]["residentLimit"], 62, "{health}");
    server.finish();
}

#[test]
fn a_pool_sized_by_the_operator_raises_the_soft_descriptor_limit_for_it() {
    let home = tempfile::tempdir().unwrap();
    // At a soft limit of 96 about 12 sessions fit; 40 slots need ~210 descriptors, which any
    // hard limit allows.
    let mut server =
        Server::start_limited_with(home.path(), "ulimit -Sn 96", &["--max-instances", "40"]);
    let health = server.call("health", json!({}));
    assert_eq!(health["sessions"]["residentLimit"], 38, "{health}");
    every_session_answers(&mut server, 45);
    server.finish();
}

#[test]
fn more_sessions_than_descriptors_allow_all_answer() {
    let home = tempfile::tempdir().unwrap();
    // 2 to 4 descriptors a session held would run out after 20 to 40 sessions.
    let mut server = Server::start_limited(home.path(), "ulimit -n 96");
    every_session_answers(&mut server, 60);
    server.finish();
}
