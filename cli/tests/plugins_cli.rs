//! The operator flow of `ctxhost plugins`, end to end through the binary, and one test per
//! bad input, each asserting the message names the problem and nothing changed on disk.
//!
//! The plugin used here is made the way an author would: `ctxhost plugins new`, then
//! `cargo build --target wasm32-wasip2 --release` (built once per test run).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The `CARGO_TARGET_DIR` of the author these tests play: set for cargo and for ctxhost alike.
fn cargo_target_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().unwrap().keep().join("cargo-target"))
}

use crate::common;

fn ctxhost(home: &Path, cwd: &Path, args: &[&str]) -> Output {
    common::command(home)
        .args(args)
        .current_dir(cwd)
        .env("CARGO_TARGET_DIR", cargo_target_dir())
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

/// `ctxhost plugins install --force -l DIR`'s output.
fn install_linked(home: &Path, cwd: &Path, dir: &Path) -> String {
    let dir = dir.to_str().unwrap();
    ok(ctxhost(
        home,
        cwd,
        &["plugins", "install", "--force", "-l", dir],
    ))
}

/// `ctxhost replay --json` of a session of `messages` generated from `seed`.
fn replay_generated(
    home: &Path,
    cwd: &Path,
    scratch: &Path,
    seed: u64,
    messages: usize,
) -> serde_json::Value {
    let transcript = common::generated_session(scratch.join("recorded.jsonl"), seed, messages);
    let out = ok(ctxhost(
        home,
        cwd,
        &["replay", transcript.to_str().unwrap(), "--json"],
    ));
    serde_json::from_str(&out).unwrap()
}

/// A scaffolded engine project, built for wasm32-wasip2: (project dir, its component).
///
/// Made as an author outside this repository would: `plugins new` inside another cargo
/// workspace, built offline with `CARGO_TARGET_DIR` pointing elsewhere. `None` (and a visible
/// note) when this machine cannot build for wasm32-wasip2 at all.
fn scaffolded() -> Option<&'static (PathBuf, PathBuf)> {
    static BUILT: OnceLock<Option<(PathBuf, PathBuf)>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let parent = tempfile::tempdir().unwrap().keep();
            // An enclosing workspace the scaffold must not be taken into.
            std::fs::write(parent.join("Cargo.toml"), "[workspace]\nmembers = []\n").unwrap();
            let home = parent.join("home");
            ok(ctxhost(&home, &parent, &["plugins", "new", "my-engine"]));
            let project = parent.join("my-engine");
            assert_self_contained(&project);
            let target_dir = cargo_target_dir();
            let started = std::time::Instant::now();
            let output = Command::new(env!("CARGO"))
                .args([
                    "build",
                    "--target",
                    "wasm32-wasip2",
                    "--release",
                    "--offline",
                ])
                .current_dir(&project)
                .env("CARGO_TARGET_DIR", target_dir)
                .env_remove("RUSTFLAGS")
                .env_remove("CARGO_ENCODED_RUSTFLAGS")
                .env_remove("CARGO_BUILD_TARGET")
                .output()
                .expect("cargo build of the scaffold");
            let stderr = String::from_utf8_lossy(&output.stderr);
            if !output.status.success() && stderr.contains("target may not be installed") {
                eprintln!(
                    "SKIPPED: wasm32-wasip2 is not installed (rustup target add wasm32-wasip2)"
                );
                return None;
            }
            assert!(
                output.status.success(),
                "the scaffolded engine must build offline without edits:\n{stderr}"
            );
            let component = target_dir.join("wasm32-wasip2/release/my_engine.wasm");
            eprintln!(
                "scaffold built in {:.1?}: {} bytes",
                started.elapsed(),
                std::fs::metadata(&component).unwrap().len()
            );
            assert!(
                !project.join("target").exists(),
                "CARGO_TARGET_DIR was ignored"
            );
            Some((project, component))
        })
        .as_ref()
}

/// Every `path = "…"` of the project's manifests stays inside the project: nothing points back
/// at the checkout `ctxhost` was built from.
fn assert_self_contained(project: &Path) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    for manifest in ["Cargo.toml", "vendor/ctxhost/sdk/Cargo.toml"] {
        let text = std::fs::read_to_string(project.join(manifest)).unwrap();
        assert!(!text.contains(".workspace"), "{manifest}: {text}");
        for path in text.split("path = \"").skip(1) {
            let path = path.split('"').next().unwrap();
            assert!(
                !path.starts_with('/') && !path.contains(".."),
                "{manifest} names a path outside the project: {path}"
            );
            assert!(project.join(path).join("Cargo.toml").is_file(), "{path}");
        }
        assert!(!text.contains(&repo.display().to_string()), "{manifest}");
    }
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
    let Some((project, component)) = scaffolded() else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("ctxhost.json"), "{}").unwrap();
    let cwd = scratch.path();
    // The build went to CARGO_TARGET_DIR: a link follows it (the link records the component's
    // path, so a rebuild is picked up); a copy install finds it too.
    let linked = ok(ctxhost(
        &home,
        cwd,
        &["plugins", "install", "-l", project.to_str().unwrap()],
    ));
    assert!(linked.contains("linked `my-engine`"), "{linked}");
    let record = std::fs::read_to_string(home.join("plugins/my-engine/ctxhost.link.json")).unwrap();
    let record: serde_json::Value = serde_json::from_str(&record).unwrap();
    assert_eq!(
        record["component"].as_str().map(Path::new),
        Some(std::fs::canonicalize(component).unwrap().as_path()),
        "{record}"
    );
    let installed = ok(ctxhost(
        &home,
        cwd,
        &["plugins", "install", "--force", project.to_str().unwrap()],
    ));
    assert!(installed.contains("installed `my-engine`"), "{installed}");
    // Built with `--target-dir target`, the folder links (the development loop).
    let local = project.join("target/wasm32-wasip2/release");
    std::fs::create_dir_all(&local).unwrap();
    std::fs::copy(component, local.join("my_engine.wasm")).unwrap();
    let linked = install_linked(&home, cwd, project);
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
    assert_eq!(mine["contract"], "0.4.0");
    common::check_cli_schema("plugins-list", &list);

    // A session runs on it.
    let replay = replay_generated(&home, cwd, scratch.path(), 5, 120);
    assert_eq!(replay["engine"], "my-engine");
    assert_eq!(replay["messages"], 120);

    ok(ctxhost(&home, cwd, &["plugins", "disable", "my-engine"]));
    let refused = err(ctxhost(&home, cwd, &["plugins", "use", "my-engine"]));
    assert!(
        refused.contains("disabled") && refused.contains("ctxhost plugins enable my-engine"),
        "{refused}"
    );

    // The component cache keeps what an engine uses and loses the rest.
    let hash = blake3::hash(&std::fs::read(component).unwrap()).to_hex()[..32].to_string();
    let cached = |prefix: &str| {
        std::fs::read_dir(home.join("cache"))
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
            .count()
    };
    let entries = cached(&hash);
    assert!(entries >= 1, "the replay compiled and cached the engine");
    let stale = home
        .join("cache")
        .join(format!("{}-0000000000000000.cwasm", "a".repeat(32)));
    std::fs::write(&stale, vec![0u8; 1 << 20]).unwrap();
    let stale_check = stale.with_extension("check");
    std::fs::write(&stale_check, b"").unwrap();
    let gc = ok(ctxhost(&home, cwd, &["plugins", "gc", "--dry-run"]));
    assert!(
        gc.contains("would remove 1 cached component(s), 1.0 MiB"),
        "{gc}"
    );
    assert!(stale.is_file());
    let gc = ok(ctxhost(&home, cwd, &["plugins", "gc"]));
    assert!(gc.contains("removed 1 cached component(s)"), "{gc}");
    assert!(!stale.exists() && !stale_check.exists());
    assert_eq!(cached(&hash), entries, "what an engine uses is kept");

    let out = ok(ctxhost(&home, cwd, &["plugins", "uninstall", "my-engine"]));
    assert_eq!(
        cached(&hash),
        0,
        "uninstall drops the engine's compiled component"
    );
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
    let Some((_, component)) = scaffolded() else {
        return;
    };
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

    let mut bad_schema = manifest("my-engine");
    bad_schema["configSchema"] = serde_json::json!({"type": "no-such-type"});
    let packages: [(&str, serde_json::Value, &[u8], &[&str]); 6] = [
        (
            "bad-id",
            manifest("My Engine"),
            &wasm,
            &["`id` \"My Engine\""],
        ),
        (
            "core-module",
            manifest("my-engine"),
            b"\0asm\x01\0\0\0",
            &["core WebAssembly module", "wasm32-wasip2"],
        ),
        (
            "not-wasm",
            manifest("my-engine"),
            b"#!/bin/sh\necho hi\n",
            &["not a WebAssembly file"],
        ),
        (
            "bad-schema",
            bad_schema,
            &wasm,
            &["`configSchema`", "not a valid JSON Schema"],
        ),
        (
            "id-mismatch",
            manifest("other-name"),
            &wasm,
            &["`other-name`", "`my-engine`"],
        ),
        (
            "taken",
            manifest("legacy"),
            &wasm,
            &["`legacy` is already bundled with ctxhost"],
        ),
    ];
    for (name, manifest, component, said) in packages {
        let path = package(&dir(name), manifest, component);
        refused(
            &home,
            cwd,
            &["plugins", "install", path.to_str().unwrap()],
            said,
        );
    }

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
    install_linked(&home, cwd, &linked);
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

#[test]
fn an_unbuilt_project_names_every_place_looked_at_once() {
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("ctxhost.json"), "{}").unwrap();
    let cwd = scratch.path();
    ok(ctxhost(&home, cwd, &["plugins", "new", "unbuilt"]));
    let project = cwd.join("unbuilt");
    let message = refused(
        &home,
        cwd,
        &["plugins", "install", project.to_str().unwrap()],
        &[
            "plugin `unbuilt`: no component found",
            &project
                .join("target/wasm32-wasip2/release/unbuilt.wasm")
                .display()
                .to_string(),
            &cargo_target_dir()
                .join("wasm32-wasip2/release/unbuilt.wasm")
                .display()
                .to_string(),
            "build it with: cargo build --target wasm32-wasip2 --release",
        ],
    );
    assert!(!message.contains("os error"), "{message}");

    ok(ctxhost(
        &home,
        cwd,
        &["plugins", "new", "py-unbuilt", "--lang", "python"],
    ));
    refused(
        &home,
        cwd,
        &[
            "plugins",
            "install",
            cwd.join("py-unbuilt").to_str().unwrap(),
        ],
        &[
            "py-unbuilt/engine.wasm (`component` in ctxhost.plugin.json)",
            "build it with: componentize-py -d wit -w context-engine componentize app -o engine.wasm",
        ],
    );
    let refused_lang = err(ctxhost(
        &home,
        cwd,
        &["plugins", "new", "x", "--lang", "cobol"],
    ));
    assert!(
        refused_lang.contains("rust, python, javascript"),
        "{refused_lang}"
    );
}

/// A tool from `$var`, else the pinned one `.ci/run` installs for the examples (under
/// `target/foreign-engines/`, `cached` below it), else from PATH; `None` with a visible note
/// when absent.
fn toolchain(var: &str, command: &str, cached: &str, install: &str) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(var) {
        return Some(PathBuf::from(path));
    }
    let pinned = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/foreign-engines")
        .join(cached);
    if pinned.is_file() {
        return Some(pinned);
    }
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(command))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        eprintln!(
            "SKIPPED: `{command}` not found (set {var}, run `.ci/run`'s example step, or {install})"
        );
    }
    found
}

/// Installs a built project, selects it and replays a session through it.
fn install_and_replay(project: &Path, id: &str) {
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("home");
    let cwd = scratch.path();
    let out = ok(ctxhost(
        &home,
        cwd,
        &["plugins", "install", project.to_str().unwrap()],
    ));
    assert!(out.contains(&format!("installed `{id}`")), "{out}");
    ok(ctxhost(&home, cwd, &["plugins", "use", id]));
    std::fs::write(
        home.join("ctxhost.json"),
        format!(
            r#"{{ plugins: {{ slots: {{ contextEngine: "{id}" }}, entries: {{ "{id}": {{ config: {{ keepLast: 7 }} }} }} }} }}"#
        ),
    )
    .unwrap();
    let replay = replay_generated(&home, cwd, scratch.path(), 3, 40);
    assert_eq!(replay["engine"], id, "{replay}");
    assert_eq!(replay["messages"], 40, "{replay}");
}

fn run_build(project: &Path, program: &Path, args: &[&str]) {
    let started = std::time::Instant::now();
    // The tool's own folder first on PATH: an npm-installed tool runs with the `node` beside it.
    let mut path = vec![program.parent().unwrap().to_path_buf()];
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let output = Command::new(program)
        .args(args)
        .env("PATH", std::env::join_paths(path).unwrap())
        .current_dir(project)
        .output()
        .expect("run the build");
    assert!(
        output.status.success(),
        "{program:?} {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let size = std::fs::metadata(project.join("engine.wasm"))
        .unwrap()
        .len();
    eprintln!(
        "{program:?} built in {:.1?}: {size} bytes",
        started.elapsed()
    );
}

#[test]
fn the_python_template_builds_with_its_documented_command_and_runs() {
    let Some(tool) = toolchain(
        "CTXHOST_COMPONENTIZE_PY",
        "componentize-py",
        "componentize-py-0.25.0/bin/componentize-py",
        "pip install componentize-py",
    ) else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let cwd = scratch.path();
    ok(ctxhost(
        &cwd.join("home"),
        cwd,
        &["plugins", "new", "py-engine", "--lang", "python"],
    ));
    let project = cwd.join("py-engine");
    let command = ctxhost::plugins::Lang::Python.build_command();
    let args: Vec<&str> = command.split(' ').skip(1).collect();
    run_build(&project, &tool, &args);
    install_and_replay(&project, "py-engine");
}

#[test]
fn the_javascript_template_builds_with_its_npm_script_and_runs() {
    let Some(tool) = toolchain(
        "CTXHOST_COMPONENTIZE_JS",
        "componentize-js",
        "componentize-js-0.23.0-node-24.21.0/node_modules/.bin/componentize-js",
        "npm i -g @bytecodealliance/componentize-js",
    ) else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let cwd = scratch.path();
    let home = cwd.join("home");
    ok(ctxhost(
        &home,
        cwd,
        &["plugins", "new", "js-engine", "--lang", "javascript"],
    ));
    let project = cwd.join("js-engine");
    // The script `npm run build` runs, with the tool found here in place of node_modules/.bin.
    let package: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(project.join("package.json")).unwrap())
            .unwrap();
    let script = package["scripts"]["build"].as_str().unwrap().to_string();
    let args: Vec<&str> = script.split(' ').skip(1).collect();
    assert!(script.contains("--disable http fetch-event"), "{script}");
    run_build(&project, &tool, &args);
    install_and_replay(&project, "js-engine");

    // Without the flags the component imports wasi:http: install names it and the fix.
    let plain: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| !matches!(*a, "--disable" | "http" | "fetch-event"))
        .collect();
    run_build(&project, &tool, &plain);
    let message = refused(
        &home,
        cwd,
        &["plugins", "install", "--force", project.to_str().unwrap()],
        // Refused before compiling (the runtime's own link error says "imports instance").
        &["it imports `wasi:http/", "--disable http fetch-event"],
    );
    assert_eq!(message.matches("fix:").count(), 1, "{message}");
}
