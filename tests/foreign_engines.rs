//! The Python and JavaScript examples (`examples/python-tool-trim`,
//! `examples/javascript-turn-budget`) built with their pinned toolchains and run through the
//! host: install, info, ingest, assemble, compact, an export's error, and a replay.
//!
//! Each example's `build.sh` installs its toolchain once (componentize-py from PyPI;
//! componentize-js and Node from npm) under `target/foreign-engines/`; the components are built
//! into `target/foreign-engines/out/` and rebuilt only when a source is newer. Where a
//! toolchain cannot be installed (no network, no python3 or npm), the tests print why and skip.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use ctxhost::{AssembleOptions, AssembledItem, CompactOptions, SessionTarget};
use ctxhost_tests::{
    Scratch, block_on, last_compaction, open_session, recorded_messages, transcript_tokens,
    workspace,
};
use serde_json::Value;

/// An example engine in another language.
struct Example {
    /// Its directory under `examples/`.
    dir: &'static str,
    /// The engine id in its manifest.
    id: &'static str,
    /// The component file its manifest names.
    component: &'static str,
    /// The files its component is built from, besides `build.sh` and the WIT.
    sources: &'static [&'static str],
}

const PYTHON: Example = Example {
    dir: "python-tool-trim",
    id: "tool-trim",
    component: "tool_trim.wasm",
    sources: &["app.py"],
};

const JAVASCRIPT: Example = Example {
    dir: "javascript-turn-budget",
    id: "turn-budget",
    component: "turn_budget.wasm",
    sources: &["engine.js"],
};

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"))
}

fn modified(path: &Path) -> std::time::SystemTime {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// An example's directory and its component (`None`: its toolchain could not be installed),
/// built at most once per test process.
type Built = (&'static str, Option<PathBuf>);

impl Example {
    fn source_dir(&self) -> PathBuf {
        workspace().join("examples").join(self.dir)
    }

    /// The built component: from the cache when no source is newer, else built now. `None`
    /// (after saying why) when the build script could not install its toolchain.
    fn build(&self) -> Option<PathBuf> {
        static BUILT: OnceLock<Mutex<Vec<Built>>> = OnceLock::new();
        let mut built = BUILT.get_or_init(Default::default).lock().unwrap();
        if let Some((_, result)) = built.iter().find(|(dir, _)| *dir == self.dir) {
            return result.clone();
        }
        let result = self.build_now();
        built.push((self.dir, result.clone()));
        result
    }

    fn build_now(&self) -> Option<PathBuf> {
        let source_dir = self.source_dir();
        let out = target_dir()
            .join("foreign-engines/out")
            .join(self.component);
        let inputs = self.sources.iter().map(|s| source_dir.join(s)).chain([
            source_dir.join("build.sh"),
            workspace().join("wit/0.2.0/engine.wit"),
        ]);
        let newest = inputs.map(|p| modified(&p)).max().expect("inputs");
        if out.is_file() && modified(&out) >= newest {
            return Some(out);
        }
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        let partial = out.with_extension("wasm.partial");
        eprintln!("building {} (first run installs its toolchain)", self.dir);
        let output = Command::new("bash")
            .arg(source_dir.join("build.sh"))
            .arg(&partial)
            .env("TOOLCHAINS", target_dir().join("foreign-engines"))
            .output()
            .expect("running bash");
        let stderr = String::from_utf8_lossy(&output.stderr);
        match output.status.code() {
            Some(0) => {}
            // The build script's "toolchain unavailable".
            Some(3) => {
                eprintln!(
                    "SKIPPED: the {} example's toolchain cannot be installed here: {}",
                    self.dir,
                    stderr.trim()
                );
                return None;
            }
            _ => panic!(
                "examples/{}/build.sh failed ({}):\n{}\n{stderr}",
                self.dir,
                output.status,
                String::from_utf8_lossy(&output.stdout)
            ),
        }
        std::fs::rename(&partial, &out).unwrap();
        Some(out)
    }

    /// A package directory as an author has it: the example's manifest beside its component.
    fn package(&self, scratch: &Scratch, component: &Path) -> PathBuf {
        let dir = scratch.path(self.dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(
            self.source_dir().join("ctxhost.plugin.json"),
            dir.join("ctxhost.plugin.json"),
        )
        .unwrap();
        std::fs::copy(component, dir.join(self.component)).unwrap();
        dir
    }
}

/// A host over `scratch`'s home with `config` (JSON5 text), whose compile cache is shared by
/// every test and run (`target/foreign-engines/compile-cache`): compiling a 12-18 MB component
/// takes tens of seconds, loading it from the cache milliseconds.
fn host(scratch: &Scratch, config: &str) -> ctxhost::Host {
    let home = scratch.home();
    std::fs::create_dir_all(home.root()).unwrap();
    let path = home.default_config_path();
    std::fs::write(&path, config).unwrap();
    let config = ctxhost::config::Config::from_str(config, &path).expect("valid test config");
    let options = ctxhost::runtime::RuntimeOptions {
        cache_dir: Some(target_dir().join("foreign-engines/compile-cache")),
        ..Default::default()
    };
    ctxhost::Host::with_options(home, config, &options).expect("host starts")
}

/// A host whose slot selects `example` (installed with `plugins install`) with `config`.
fn host_with(
    scratch: &Scratch,
    example: &Example,
    component: &Path,
    config: &str,
) -> ctxhost::Host {
    let package = example.package(scratch, component);
    let installer = host(scratch, "{}");
    let installed = block_on(ctxhost::plugin_ops::install(
        &installer, &package, false, false,
    ))
    .unwrap_or_else(|e| panic!("installing {}: {e}", example.id));
    assert_eq!(installed.contract_version, "0.2.0");
    host(
        scratch,
        &format!(
            "{{ plugins: {{ slots: {{ contextEngine: '{id}' }}, entries: {{ '{id}': {{ config: {config} }} }} }} }}",
            id = example.id
        ),
    )
}

fn parse(json: &str) -> Value {
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

fn tool_call_id(message: &Value) -> Option<&str> {
    message["toolCallId"].as_str()
}

/// Checks that the host loaded `example` on contract 0.2, then opens a session under `key` and
/// appends every message of `source` (each ingested by the engine). Returns the messages too.
async fn fed_session(
    host: &ctxhost::Host,
    example: &Example,
    key: &str,
    source: &Path,
) -> (ctxhost::Session, Vec<Value>) {
    let engine = host.active_engine().await.unwrap();
    assert_eq!(engine.info().id, example.id);
    assert_eq!(engine.contract_version(), "0.2.0");
    let mut session = open_session(host, SessionTarget::Key(key.into())).await;
    let messages = recorded_messages(source);
    for message in &messages {
        session.append(message).await.unwrap();
    }
    (session, messages)
}

/// A forced manual compaction, delegated by the engine to the host; it must be written.
async fn compact_now(session: &mut ctxhost::Session) {
    let outcome = session.compact(&CompactOptions::forced()).await.unwrap();
    assert!(outcome.compacted, "{outcome:?}");
}

#[test]
fn python_tool_trim_trims_old_tool_outputs_and_keeps_every_call_answered() {
    let Some(component) = PYTHON.build() else {
        return;
    };
    let scratch = Scratch::new();
    let host = host_with(
        &scratch,
        &PYTHON,
        &component,
        "{ keepRecentToolResults: 3, minTokens: 20 }",
    );
    let source = scratch.generated_transcript(11, 160);
    block_on(async {
        let (mut session, messages) =
            fed_session(&host, &PYTHON, "agent:main:python", &source).await;
        let assembly = session.assemble(&AssembleOptions::default()).await.unwrap();
        let items: Vec<AssembledItem> = assembly.items().collect();
        let rendered: Vec<Value> = session.render(&assembly).iter().map(|m| parse(m)).collect();

        // Same messages in the same order, every tool result still answering its call.
        assert_eq!(rendered.len(), messages.len());
        let original_ids: Vec<_> = messages.iter().map(tool_call_id).collect();
        let rendered_ids: Vec<_> = rendered.iter().map(tool_call_id).collect();
        assert_eq!(rendered_ids, original_ids);

        let tool_results: Vec<usize> = (0..messages.len())
            .filter(|&i| messages[i]["role"] == "toolResult")
            .collect();
        assert!(
            tool_results.len() > 10,
            "the session must have tool results"
        );
        let trimmed: Vec<usize> = tool_results
            .iter()
            .copied()
            .filter(|&i| matches!(items[i], AssembledItem::Inserted(_)))
            .collect();
        assert!(!trimmed.is_empty(), "old tool outputs are trimmed");
        // The newest three tool results, and everything that is not one, are kept verbatim.
        for &i in &tool_results[tool_results.len() - 3..] {
            assert_eq!(items[i], AssembledItem::Entry(i), "recent result {i}");
        }
        for (i, item) in items.iter().enumerate() {
            if !trimmed.contains(&i) {
                assert_eq!(*item, AssembledItem::Entry(i), "message {i} kept");
            }
        }
        for &i in &trimmed {
            let placeholder = &rendered[i];
            assert_eq!(placeholder["toolName"], messages[i]["toolName"]);
            assert_eq!(placeholder["isError"], messages[i]["isError"]);
            let text = placeholder["content"][0]["text"].as_str().unwrap();
            assert!(text.starts_with("[tool-trim: the output of"), "{text}");
        }
        let total: u32 = transcript_tokens(&session);
        assert!(
            assembly.estimated_tokens < total,
            "{} < {total}",
            assembly.estimated_tokens
        );

        // An export's error is the engine's message, not a trap: the instance keeps serving.
        let err = session
            .rollback_subagent_spawn(7)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("rollback handle 7 was never issued"), "{err}");
        session.assemble(&AssembleOptions::default()).await.unwrap();

        compact_now(&mut session).await;
        let after = session.assemble(&AssembleOptions::default()).await.unwrap();
        assert!(after.estimated_tokens < assembly.estimated_tokens);
        session.close().await.unwrap();
    });
}

#[test]
fn javascript_turn_budget_keeps_the_newest_whole_turns() {
    let Some(component) = JAVASCRIPT.build() else {
        return;
    };
    let scratch = Scratch::new();
    let host = host_with(&scratch, &JAVASCRIPT, &component, "{ maxTurns: 3 }");
    let source = scratch.generated_transcript(12, 160);
    block_on(async {
        let (mut session, messages) =
            fed_session(&host, &JAVASCRIPT, "agent:main:javascript", &source).await;
        let user_turns: Vec<usize> = (0..messages.len())
            .filter(|&i| messages[i]["role"] == "user")
            .collect();
        assert!(user_turns.len() > 3, "the session must have several turns");

        let assembly = session.assemble(&AssembleOptions::default()).await.unwrap();
        let items: Vec<AssembledItem> = assembly.items().collect();
        // The omission note, then the last three turns whole: from the third user message from
        // the end to the last message.
        let first_kept = user_turns[user_turns.len() - 3];
        let AssembledItem::Inserted(note) = &items[0] else {
            panic!("no omission note: {:?}", items[0]);
        };
        let note = parse(note);
        assert_eq!(note["role"], "custom");
        let omitted = user_turns.len() - 3 + usize::from(user_turns[0] > 0);
        assert_eq!(
            note["content"],
            format!("[turn-budget: {omitted} earlier turns omitted]")
        );
        let kept: Vec<AssembledItem> = (first_kept..messages.len())
            .map(AssembledItem::Entry)
            .collect();
        assert_eq!(items[1..], kept[..]);
        let kept_tokens: u32 = session.transcript().entries()[first_kept..]
            .iter()
            .map(|e| e.tokens())
            .sum();
        assert!(assembly.estimated_tokens > kept_tokens);

        // A thrown string is the engine's error, not a trap: the instance keeps serving.
        let err = session
            .rollback_subagent_spawn(9)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("rollback handle 9 was never issued"), "{err}");

        // A token budget narrower than three turns keeps fewer (but at least the newest).
        let narrow = session
            .assemble(&AssembleOptions {
                token_budget: Some(1),
                ..AssembleOptions::default()
            })
            .await
            .unwrap();
        let newest_turn = *user_turns.last().unwrap();
        assert_eq!(
            narrow.items().nth(1),
            Some(AssembledItem::Entry(newest_turn))
        );
        assert_eq!(narrow.kept(), messages.len() - newest_turn);

        compact_now(&mut session).await;
        // After the compaction the summary leads the kept context.
        let after = session.assemble(&AssembleOptions::default()).await.unwrap();
        let summary = last_compaction(&session).unwrap();
        assert!(
            after
                .items()
                .any(|item| item == AssembledItem::Entry(summary)),
            "{:?}",
            after
        );
        session.close().await.unwrap();
    });
}

/// A whole recorded session (400 messages, ~100k tokens) fed turn by turn at a 32k window on
/// `example`, which keeps what it assembles small enough that the runtime need not compact.
fn replays(example: &Example, config: &str) {
    let Some(component) = example.build() else {
        return;
    };
    let scratch = Scratch::new();
    let host = host_with(&scratch, example, &component, config);
    let source = scratch.generated_transcript(13, 400);
    let output = scratch.path("replayed.jsonl");
    let report = block_on(async {
        let engine = host.active_engine().await.unwrap();
        ctxhost::replay::replay(&host, &source, engine, 32_000, &output, &mut ()).await
    })
    .unwrap_or_else(|e| panic!("replaying on {}: {e}", example.id));
    assert_eq!(report.engine, example.id);
    assert_eq!(report.messages, recorded_messages(&source).len());
    assert!(report.turns > 10, "{report:?}");
    // The engine's trimming is what the model would get: placeholders or omission notes were
    // inserted, and what it assembled stayed inside the window on every turn.
    assert!(report.inserted_messages > 0, "{report:?}");
    assert_eq!(report.overflowing_turns, 0, "{report:?}");
    assert!(report.assembled_max > 0, "{report:?}");
    assert!(
        u64::from(report.peak_tokens) <= report.context_window,
        "{report:?}"
    );
}

#[test]
fn python_tool_trim_replays_a_recorded_session() {
    replays(&PYTHON, "{ keepRecentToolResults: 4 }");
}

#[test]
fn javascript_turn_budget_replays_a_recorded_session() {
    replays(&JAVASCRIPT, "{ maxTurns: 6, maxTokens: 24000 }");
}
