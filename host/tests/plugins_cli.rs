//! The operator flow of `ctxhost plugins`, end to end through the binary, and one test per
//! bad input, each asserting the message names the problem and nothing changed on disk.
//!
//! The plugin used here is made the way an author would: `ctxhost plugins new`, then
//! `cargo build --target wasm32-wasip2 --release` (built once per test run).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn ctxhost(home: &Path, cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ctxhost"))
        .args(args)
        .current_dir(cwd)
        .env("CTXHOST_HOME", home)
        .env_remove("CTXHOST_CONFIG")
        .output()
        .expect("run ctxhost")
}

fn ok(output: Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "ctxhost failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn err(output: Output) -> String {
    assert!(
        !output.status.success(),
        "expected a failure, got:\n{}",
        String::from_utf8_lossy(&output.stdout)
    );
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A scaffolded engine project, built for wasm32-wasip2: (project dir, its component).
fn scaffolded() -> &'static (PathBuf, PathBuf) {
    static BUILT: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    BUILT.get_or_init(|| {
        let parent = tempfile::tempdir().unwrap().keep();
        let home = parent.join("home");
        ok(ctxhost(&home, &parent, &["plugins", "new", "my-engine"]));
        let project = parent.join("my-engine");
        let status = Command::new(env!("CARGO"))
            .args(["build", "--target", "wasm32-wasip2", "--release", "--quiet"])
            .current_dir(&project)
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .status()
            .expect("cargo build of the scaffold");
        assert!(
            status.success(),
            "the scaffolded engine must build without edits"
        );
        let component = project.join("target/wasm32-wasip2/release/my_engine.wasm");
        assert!(component.is_file());
        (project, component)
    })
}

/// A package folder with `manifest` and the scaffold's component as `engine.wasm`.
fn package(dir: &Path, manifest: serde_json::Value, component: &[u8]) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("engine.wasm"), component).unwrap();
    std::fs::write(dir.join("ctxhost.plugin.json"), manifest.to_string()).unwrap();
    dir.to_path_buf()
}

fn manifest(id: &str) -> serde_json::Value {
    serde_json::json!({"id": id, "version": "0.1.0", "kind": "context-engine",
        "component": "engine.wasm", "capabilities": [], "configSchema": {"type": "object"}})
}

/// Everything under the home, for "nothing changed on disk".
fn snapshot(home: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![home.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if !path.ends_with("cache") {
                    stack.push(path);
                }
            } else {
                files.push((path.clone(), std::fs::read(&path).unwrap()));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn operator_flow_scaffold_link_use_doctor_run_disable_uninstall() {
    let (project, _) = scaffolded();
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("home");
    let cwd = scratch.path();
    let linked = ok(ctxhost(
        &home,
        cwd,
        &["plugins", "install", "-l", project.to_str().unwrap()],
    ));
    assert!(linked.contains("linked `my-engine`"), "{linked}");
    ok(ctxhost(&home, cwd, &["plugins", "use", "my-engine"]));
    let doctor: serde_json::Value =
        serde_json::from_str(&ok(ctxhost(&home, cwd, &["doctor", "--json"]))).unwrap();
    assert_eq!(doctor["ok"], true, "{doctor}");
    let list: serde_json::Value =
        serde_json::from_str(&ok(ctxhost(&home, cwd, &["plugins", "list", "--json"]))).unwrap();
    let mine = list["engines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == "my-engine")
        .unwrap();
    assert_eq!(mine["source"], "linked");
    assert_eq!(mine["active"], true);
    assert_eq!(mine["contract"]["Ok"], "0.1.0");

    // A session runs on it.
    let transcript = scratch.path().join("recorded.jsonl");
    std::fs::write(
        &transcript,
        ctxhost_transcript::generate::coding_session(5, 120),
    )
    .unwrap();
    let replay: serde_json::Value = serde_json::from_str(&ok(ctxhost(
        &home,
        cwd,
        &["replay", transcript.to_str().unwrap(), "--json"],
    )))
    .unwrap();
    assert_eq!(replay["engine"], "my-engine");
    assert_eq!(replay["messages"], 120);

    ok(ctxhost(&home, cwd, &["plugins", "disable", "my-engine"]));
    let refused = err(ctxhost(&home, cwd, &["plugins", "use", "my-engine"]));
    assert!(
        refused.contains("disabled") && refused.contains("ctxhost plugins enable my-engine"),
        "{refused}"
    );

    let out = ok(ctxhost(&home, cwd, &["plugins", "uninstall", "my-engine"]));
    assert!(out.contains("now `legacy`"), "{out}");
    assert!(out.contains("state is kept"), "{out}");
    let config = std::fs::read_to_string(home.join("ctxhost.json")).unwrap();
    assert!(config.contains("\"contextEngine\": \"legacy\""), "{config}");
    assert!(home.join("ctxhost.json.bak").is_file());
}

/// Runs `args`, expects a failure whose stderr contains every `needle`, and checks the home
/// did not change.
fn refused(home: &Path, cwd: &Path, args: &[&str], needles: &[&str]) -> String {
    let before = snapshot(home);
    let message = err(ctxhost(home, cwd, args));
    for needle in needles {
        assert!(
            message.contains(needle),
            "expected `{needle}` in: {message}"
        );
    }
    assert!(
        snapshot(home) == before,
        "{args:?} changed files under the home"
    );
    eprintln!("{args:?}\n  -> {}", message.trim());
    message
}

#[test]
fn bad_packages_and_commands_get_clear_errors_and_change_nothing() {
    let (_, component) = scaffolded();
    let wasm = std::fs::read(component).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("home");
    let cwd = scratch.path();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("ctxhost.json"), "{}").unwrap();
    let dir = |name: &str| scratch.path().join(name);

    let path = dir("no-manifest");
    std::fs::create_dir_all(&path).unwrap();
    refused(
        &home,
        cwd,
        &["plugins", "install", path.to_str().unwrap()],
        &["ctxhost.plugin.json", "missing"],
    );

    let path = dir("malformed");
    std::fs::create_dir_all(&path).unwrap();
    std::fs::write(path.join("ctxhost.plugin.json"), "{ \"id\": ").unwrap();
    refused(
        &home,
        cwd,
        &["plugins", "install", path.to_str().unwrap()],
        &["ctxhost.plugin.json", "line 1"],
    );

    let path = package(&dir("bad-id"), manifest("My Engine"), &wasm);
    refused(
        &home,
        cwd,
        &["plugins", "install", path.to_str().unwrap()],
        &["`id` \"My Engine\""],
    );

    let path = package(
        &dir("core-module"),
        manifest("my-engine"),
        b"\0asm\x01\0\0\0",
    );
    refused(
        &home,
        cwd,
        &["plugins", "install", path.to_str().unwrap()],
        &["core WebAssembly module", "wasm32-wasip2"],
    );

    let path = package(
        &dir("not-wasm"),
        manifest("my-engine"),
        b"#!/bin/sh\necho hi\n",
    );
    refused(
        &home,
        cwd,
        &["plugins", "install", path.to_str().unwrap()],
        &["not a WebAssembly file"],
    );

    let mut m = manifest("my-engine");
    m["configSchema"] = serde_json::json!({"type": "no-such-type"});
    let path = package(&dir("bad-schema"), m, &wasm);
    refused(
        &home,
        cwd,
        &["plugins", "install", path.to_str().unwrap()],
        &["`configSchema`", "not a valid JSON Schema"],
    );

    let path = package(&dir("id-mismatch"), manifest("other-name"), &wasm);
    refused(
        &home,
        cwd,
        &["plugins", "install", path.to_str().unwrap()],
        &["`other-name`", "`my-engine`"],
    );

    let path = package(&dir("taken"), manifest("legacy"), &wasm);
    refused(
        &home,
        cwd,
        &["plugins", "install", path.to_str().unwrap()],
        &["`legacy` is already bundled with ctxhost"],
    );

    let good = package(&dir("good"), manifest("my-engine"), &wasm);
    ok(ctxhost(
        &home,
        cwd,
        &["plugins", "install", good.to_str().unwrap()],
    ));
    refused(
        &home,
        cwd,
        &["plugins", "install", good.to_str().unwrap()],
        &["already installed", "--force"],
    );

    refused(
        &home,
        cwd,
        &["plugins", "use", "ghost"],
        &["no engine `ghost`", "legacy"],
    );
    ok(ctxhost(&home, cwd, &["plugins", "disable", "my-engine"]));
    refused(
        &home,
        cwd,
        &["plugins", "use", "my-engine"],
        &["disabled", "plugins enable my-engine"],
    );
    refused(
        &home,
        cwd,
        &["plugins", "uninstall", "legacy"],
        &["bundled"],
    );

    // Config that breaks the plugin's schema: doctor names the plugin, the path and the rule.
    std::fs::write(
        home.join("ctxhost.json"),
        r#"{ plugins: { entries: { "my-engine": { config: { maxTokens: "lots" } } } } }"#,
    )
    .unwrap();
    let mut m = manifest("my-engine");
    m["configSchema"] =
        serde_json::json!({"type": "object", "properties": {"maxTokens": {"type": "integer"}}});
    let strict = package(&dir("strict"), m, &wasm);
    ok(ctxhost(
        &home,
        cwd,
        &["plugins", "install", "--force", strict.to_str().unwrap()],
    ));
    let doctor = ctxhost(&home, cwd, &["doctor"]);
    assert_eq!(doctor.status.code(), Some(1));
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        text.contains("plugins.entries.my-engine.config/maxTokens"),
        "{text}"
    );
    assert!(text.contains("integer"), "{text}");

    // A linked folder that disappeared.
    let linked = package(&dir("linked"), manifest("my-engine"), &wasm);
    ok(ctxhost(
        &home,
        cwd,
        &[
            "plugins",
            "install",
            "--force",
            "-l",
            linked.to_str().unwrap(),
        ],
    ));
    std::fs::remove_dir_all(&linked).unwrap();
    let doctor = ctxhost(&home, cwd, &["doctor"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(text.contains("no longer exists"), "{text}");

    // A config file that is not valid JSON5.
    std::fs::write(home.join("ctxhost.json"), "{ plugins: { slots: [ }").unwrap();
    refused(
        &home,
        cwd,
        &["plugins", "use", "legacy"],
        &["ctxhost.json:1:"],
    );
}
