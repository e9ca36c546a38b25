//! The compaction settings operators write (issue 18), as an operator meets them: each key
//! changes what a replay, a compaction or `serve` does; each kind of bad input is named with
//! its path and stops the command before it runs; `config show` says where values came from.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use serde_json::{Value, json};

use crate::common;

use crate::common::{json_of, stderr};

fn ctxhost(home: &Path, config: &Path, args: &[&str]) -> Output {
    common::command(home)
        .args(args)
        .arg("--config")
        .arg(config)
        .env_remove("CTXHOST_TEST_MODEL_KEY")
        .output()
        .expect("run ctxhost")
}

/// A scratch home with a config file (JSON5 text) and a recorded coding session.
struct Setup {
    home: tempfile::TempDir,
    config: PathBuf,
    recorded: PathBuf,
}

impl Setup {
    fn new(config: &str) -> Setup {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join("ctxhost.json");
        std::fs::write(&path, config).unwrap();
        let recorded = common::generated_session(home.path().join("recorded.jsonl"), 11, 300);
        Setup {
            home,
            config: path,
            recorded,
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        ctxhost(self.home.path(), &self.config, args)
    }

    /// `replay` at a 16,000-token window: (report, stderr).
    fn replay(&self) -> (Value, String) {
        let out = self.run(&[
            "replay",
            self.recorded.to_str().unwrap(),
            "--window",
            "16000",
            "--json",
        ]);
        let err = stderr(&out);
        (json_of(&out), err)
    }

    /// A copy of the recorded session to compact.
    fn session(&self, name: &str) -> PathBuf {
        let path = self.home.path().join(name);
        std::fs::copy(&self.recorded, &path).unwrap();
        path
    }

    fn dry_run(&self, session: &Path) -> Value {
        json_of(&self.run(&[
            "compact",
            "--session",
            session.to_str().unwrap(),
            "--dry-run",
            "--json",
        ]))
    }
}

/// One setting of `config show --json`, by key.
fn setting(shown: &Value, key: &str) -> Value {
    shown["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"] == key)
        .unwrap_or_else(|| panic!("{key} in {shown}"))
        .clone()
}

fn compaction(settings: &str) -> String {
    format!("{{ agents: {{ defaults: {{ compaction: {{ {settings} }} }} }} }}")
}

fn compactions(report: &Value) -> usize {
    report["compactions"].as_array().unwrap().len()
}

#[test]
fn enabled_false_stops_automatic_compaction_but_not_manual() {
    let (default, _) = Setup::new("{}").replay();
    assert!(compactions(&default) > 0, "{default}");
    for key in ["enabled", "autoEnabled"] {
        let setup = Setup::new(&compaction(&format!("{key}: false")));
        let (report, _) = setup.replay();
        assert_eq!(compactions(&report), 0, "{key}: {report}");
        assert_eq!(report["autoCompaction"], false);
        // It overflows instead, and says so.
        assert!(report["overflowingTurns"].as_u64().unwrap() > 0, "{report}");
        // A manual compaction still runs.
        let session = setup.session("manual.jsonl");
        let done = json_of(&setup.run(&[
            "compact",
            "--session",
            session.to_str().unwrap(),
            "--yes",
            "--json",
        ]));
        assert_eq!(done["compacted"], true, "{done}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn enabled_false_turns_an_overflow_into_the_typed_error() {
    use ctxhost::config::{Config, ConfigSource, Home};
    use ctxhost::prompt::PromptSettings;
    use ctxhost::session::TurnOptions;
    for (settings, compacts) in [("", true), ("enabled: false", false)] {
        let setup = Setup::new(&format!(
            "{{ agents: {{ defaults: {{ contextWindow: 40000, compaction: {{ {settings} }} }} }} }}"
        ));
        let config = Config::load(ConfigSource::Flag(setup.config.clone())).unwrap();
        let host = ctxhost::Host::new(Home::new(setup.home.path()), config).unwrap();
        let prompt = PromptSettings::from_config(&host.config().settings.agents.defaults);
        let session_path = setup.session("overflow.jsonl");
        let mut session = host
            .open_session(
                &ctxhost::SessionTarget::Path(session_path),
                &ctxhost::SessionOptions::default(),
            )
            .await
            .unwrap();
        let result = session
            .prepare_request(&prompt, &TurnOptions::default())
            .await;
        let compacted = session.transcript().compaction_count();
        if compacts {
            assert!(result.is_ok(), "{:?}", result.err());
            assert_eq!(compacted, 1, "the overflow compacted");
        } else {
            let err = result.expect_err("an overflow without compaction");
            assert!(matches!(err, ctxhost::Error::Overflow(_)), "{err}");
            assert!(err.to_string().contains("context overflow"), "{err}");
            assert_eq!(compacted, 0, "nothing compacted silently");
        }
        session.close().await.unwrap();
    }
}

/// Window and pruning thresholds that put the recorded session in the prune layer.
fn prune_layer(tokens: u64, extra: &str) -> String {
    // The session sits at 84% of the window: above pruneAt (80%), below summarizeAt (88%).
    let window = tokens * 100 / 84;
    format!(
        "{{ agents: {{ defaults: {{ contextWindow: {window}, compaction: {{ pruneToolOutputTokens: 1000, pruneProtectTokens: 2000, pruneMinimumTokens: 500, {extra} }} }} }} }}"
    )
}

fn session_tokens() -> u64 {
    let setup = Setup::new("{ agents: { defaults: { contextWindow: 10000000 } } }");
    let dry = setup.dry_run(&setup.session("measure.jsonl"));
    dry["tokensBefore"].as_u64().unwrap()
}

#[test]
fn prune_false_runs_the_summarize_layer_where_prune_would_have() {
    let tokens = session_tokens();
    let setup = Setup::new(&prune_layer(tokens, ""));
    let dry = setup.dry_run(&setup.session("a.jsonl"));
    assert_eq!(dry["layer"], "prune", "{dry}");
    for off in ["prune: false", "prune: { enabled: false }"] {
        let setup = Setup::new(&prune_layer(tokens, off));
        let dry = setup.dry_run(&setup.session("a.jsonl"));
        assert_eq!(dry["layer"], "summarize", "{off}: {dry}");
        assert_eq!(dry["toolOutputsPruned"], 0, "{off}: {dry}");
    }
}

#[test]
fn the_prune_object_sets_protection_and_the_minimum() {
    let tokens = session_tokens();
    let base = Setup::new(&prune_layer(tokens, ""));
    let pruned = base.dry_run(&base.session("a.jsonl"))["toolOutputsPruned"]
        .as_u64()
        .unwrap();
    // The flat keys are replaced by the object's (the flat ones are left out here).
    let flat_free = |extra: &str| {
        let window = tokens * 100 / 84;
        format!(
            "{{ agents: {{ defaults: {{ contextWindow: {window}, compaction: {{ pruneToolOutputTokens: 1000, {extra} }} }} }} }}"
        )
    };
    let protect = Setup::new(&flat_free(
        "prune: { protectRecentTokens: 2000, pruneMinimumTokens: 500 }",
    ));
    let dry = protect.dry_run(&protect.session("a.jsonl"));
    assert_eq!(dry["toolOutputsPruned"].as_u64(), Some(pruned), "{dry}");
    let more = Setup::new(&flat_free(
        "prune: { protectRecentTokens: 30000, pruneMinimumTokens: 500 }",
    ));
    let dry = more.dry_run(&more.session("a.jsonl"));
    assert!(
        dry["toolOutputsPruned"].as_u64() < Some(pruned),
        "protecting more prunes less: {dry}"
    );
    let minimum = Setup::new(&flat_free(
        "prune: { protectRecentTokens: 2000, pruneMinimumTokens: 100000000 }",
    ));
    let dry = minimum.dry_run(&minimum.session("a.jsonl"));
    // Pruning would save less than the minimum: it does not run, and (the context being past
    // the threshold) the summarize layer does instead.
    assert_eq!(dry["layer"], "summarize", "{dry}");
    assert_eq!(dry["toolOutputsPruned"], 0, "{dry}");
}

#[test]
fn auto_threshold_percent_brings_compaction_forward() {
    let (default, _) = Setup::new("{}").replay();
    let (early, _) = Setup::new(&compaction("autoThresholdPercent: 50")).replay();
    assert_eq!(early["threshold"], 8000, "{early}");
    let first = |r: &Value| r["compactions"][0]["atMessage"].as_u64().unwrap();
    assert!(first(&early) < first(&default), "{early} vs {default}");
    assert!(compactions(&early) >= compactions(&default));
}

#[test]
fn preserve_recent_tokens_is_what_each_summary_keeps() {
    let (default, _) = Setup::new("{}").replay();
    let (small, _) = Setup::new(&compaction("preserveRecentTokens: 2000")).replay();
    assert_eq!(small["keepRecentTokens"], 2000, "{small}");
    let after = |r: &Value| r["compactions"][0]["tokensAfter"].as_u64().unwrap();
    assert!(after(&small) < after(&default), "{small} vs {default}");
}

#[test]
fn notify_before_auto_prints_a_notice_before_each_automatic_compaction() {
    let (report, quiet) = Setup::new("{}").replay();
    assert!(compactions(&report) > 0);
    assert!(
        !quiet.contains("automatic compaction of session"),
        "{quiet}"
    );
    let (report, told) = Setup::new(&compaction("notifyBeforeAuto: true")).replay();
    let notices = told
        .matches("notice: automatic compaction of session")
        .count();
    assert_eq!(notices, compactions(&report), "{told}");
    assert_eq!(report["autoNotices"].as_u64(), Some(notices as u64));
}

/// A chat-completions endpoint on 127.0.0.1 answering until `done` is set (or 60 s pass);
/// returns its base URL, the switch and the requests it saw.
fn model_server() -> (
    String,
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    std::thread::JoinHandle<Vec<String>>,
) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let stop = done.clone();
    let handle = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !stop.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
            let stream = match listener.accept() {
                Ok((stream, _)) => stream,
                Err(_) => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    continue;
                }
            };
            stream.set_nonblocking(false).unwrap();
            let (request, stream) = common::http::read_request(stream);
            seen.push(request);
            let body = common::http::completion("## Current task\n- model summary");
            common::http::respond(stream, 200, &body);
        }
        seen
    });
    (base, done, handle)
}

#[test]
fn the_model_block_names_a_provider_and_its_settings_reach_the_request() {
    // The provider implies the endpoint and the key variable.
    let setup = Setup::new(&compaction(
        "model: { provider: 'openrouter', modelName: 'meta-llama/llama-3.1-8b-instruct' }",
    ));
    let shown = json_of(&setup.run(&["config", "show", "--json"]));
    common::check_cli_schema("config-show", &shown);
    let value = |key: &str| setting(&shown, key);
    assert_eq!(
        value("agents.defaults.compaction.model.baseUrl")["value"],
        "https://openrouter.ai/api/v1"
    );
    assert_eq!(
        value("agents.defaults.compaction.model.apiKeyEnv")["value"],
        "OPENROUTER_API_KEY"
    );
    assert_eq!(
        value("agents.defaults.compaction.model.apiKey")["origin"]["variable"],
        "OPENROUTER_API_KEY"
    );

    // Overridden base URL and key variable; modelName, temperature and maxTokens go out.
    let (base, stop_server, server) = model_server();
    let setup = Setup::new(&compaction(&format!(
        "model: {{ provider: 'openrouter', baseUrl: '{base}', apiKeyEnv: 'CTXHOST_TEST_MODEL_KEY', modelName: 'small-model', temperature: 0.7, maxTokens: 321 }}"
    )));
    let session = setup.session("model.jsonl");
    let out = common::command(setup.home.path())
        .args([
            "compact",
            "--session",
            session.to_str().unwrap(),
            "--yes",
            "--json",
        ])
        .arg("--config")
        .arg(&setup.config)
        .env("CTXHOST_TEST_MODEL_KEY", "sk-test-123")
        .output()
        .unwrap();
    let done = json_of(&out);
    assert_eq!(done["compacted"], true, "{done}");
    assert_eq!(
        done["details"]["summarizer"], "openai-compatible:small-model",
        "{done}"
    );
    drop(setup);
    stop_server.store(true, std::sync::atomic::Ordering::SeqCst);
    let seen = server.join().unwrap();
    assert!(!seen.is_empty());
    let first = &seen[0];
    assert!(first.contains("Bearer sk-test-123"), "{first}");
    assert!(first.contains("\"model\":\"small-model\""), "{first}");
    assert!(first.contains("\"temperature\":0.7"), "{first}");
    assert!(first.contains("\"max_tokens\":321"), "{first}");
}

#[test]
fn notify_before_auto_reaches_a_serve_client_as_a_notification() {
    let setup = Setup::new(&compaction("notifyBeforeAuto: true"));
    let mut child = common::command(setup.home.path())
        .args(["serve", "--config"])
        .arg(&setup.config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let messages: Vec<Value> = setup
        .recorded
        .to_str()
        .map(|p| ctxhost_transcript::Transcript::load(Path::new(p)).unwrap())
        .map(|t| {
            t.context()
                .iter()
                .filter_map(|&i| serde_json::from_str(&t.entries()[i].message_json()).ok())
                .collect()
        })
        .unwrap();
    let count = messages.len();
    let key = "agent:main:notify";
    for (id, method, params) in [
        (1, "session.bootstrap", json!({ "sessionKey": key })),
        (
            2,
            "session.sync",
            json!({ "sessionKey": key, "from": 0, "messages": messages }),
        ),
        (
            3,
            "session.assemble",
            json!({ "sessionKey": key, "messageCount": count, "tokenBudget": 16000 }),
        ),
    ] {
        let line = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        writeln!(stdin, "{line}").unwrap();
    }
    drop(stdin);
    let lines: Vec<Value> = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    let _ = child.wait();
    let notice = lines
        .iter()
        .position(|l| l["method"] == "session.compactionPending")
        .unwrap_or_else(|| panic!("no notification in {lines:?}"));
    let assembled = lines.iter().position(|l| l["id"] == 3).unwrap();
    assert!(notice < assembled, "told before the answer");
    let params = &lines[notice]["params"];
    // As docs/serve-protocol.schema.json describes it.
    let schema: Value =
        serde_json::from_str(include_str!("../../docs/serve-protocol.schema.json")).unwrap();
    let validator =
        jsonschema::validator_for(&schema["notifications"]["session.compactionPending"]["params"])
            .unwrap();
    if let Err(error) = validator.validate(params) {
        panic!("the notification does not match the schema: {error}\n{params}");
    }
    assert!(
        lines[notice].get("id").is_none(),
        "a notification has no id"
    );
    assert_eq!(params["sessionKey"], key);
    assert_eq!(params["trigger"], "auto");
    assert!(params["contextTokens"].as_u64() > params["threshold"].as_u64());
    assert!(
        lines[assembled]["result"]["compaction"].is_object(),
        "{lines:?}"
    );
}

// ---- bad input: the message names the key, and nothing ran ----

/// Runs `replay --out` with a bad config: it must fail naming `needle`, writing nothing.
fn refused(config: &str, needles: &[&str]) {
    let setup = Setup::new(config);
    let out_file = setup.home.path().join("out.jsonl");
    let out = setup.run(&[
        "replay",
        setup.recorded.to_str().unwrap(),
        "--window",
        "16000",
        "--out",
        out_file.to_str().unwrap(),
    ]);
    assert!(!out.status.success(), "{config} was accepted");
    let err = stderr(&out);
    for needle in needles {
        assert!(err.contains(needle), "{needle} not in: {err}");
    }
    assert!(!out_file.exists(), "nothing ran");
    // doctor reports the same, as a failure.
    let doctor = setup.run(&["doctor"]);
    assert!(!doctor.status.success());
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(text.contains(needles[0]), "{text}");
}

#[test]
fn a_wrong_type_names_the_key_and_its_line() {
    refused(
        "{\n  agents: { defaults: { compaction: {\n    autoEnabled: 'no',\n  } } },\n}",
        &[
            "agents.defaults.compaction.autoEnabled",
            "ctxhost.json:3",
            "invalid type",
        ],
    );
    refused(
        &compaction("tokenCounter: 'o300k'"),
        &["agents.defaults.compaction.tokenCounter", "unknown variant"],
    );
}

#[test]
fn out_of_range_values_name_the_key_and_the_range() {
    refused(
        &compaction("autoThresholdPercent: 150"),
        &[
            "agents.defaults.compaction.autoThresholdPercent",
            "out of range (1 to 100)",
        ],
    );
    refused(
        &compaction("model: { provider: 'openrouter', modelName: 'm', temperature: 5 }"),
        &[
            "agents.defaults.compaction.model.temperature",
            "out of range",
        ],
    );
    refused(
        &compaction("summarizeAt: 88"),
        &["agents.defaults.compaction.summarizeAt", "out of range"],
    );
}

#[test]
fn a_bad_model_fails_once_at_load_with_its_path() {
    refused(
        &compaction("model: { provider: 'openruter', modelName: 'm' }"),
        &[
            "agents.defaults.compaction.model.provider",
            "did you mean `openrouter`",
        ],
    );
    refused(
        &compaction("model: 'gpt-4'"),
        &["agents.defaults.compaction.model", "unknown model `gpt-4`"],
    );
    refused(
        &compaction("prune: { enabled: true, protectRecentTokens: 10 }, pruneProtectTokens: 20"),
        &[
            "agents.defaults.compaction.prune.protectRecentTokens",
            "contradicts",
        ],
    );
}

#[test]
fn a_top_level_compaction_block_is_sent_under_agents_defaults() {
    refused(
        "{ compaction: { autoEnabled: false } }",
        &["move this under agents.defaults.compaction"],
    );
}

#[test]
fn unknown_and_misspelled_keys_are_doctor_warnings_with_suggestions() {
    let setup = Setup::new(
        "{\n  gateway: { port: 1 }, // OpenClaw's: not warned about\n  agents: { defaults: {\n    heartbeat: { every: '30m' },\n    compaction: {\n      mode: 'safeguard',\n      autoEnabeld: false,\n      frobnicate: 1,\n    },\n  } },\n}",
    );
    let doctor = setup.run(&["doctor", "--json"]);
    let report: Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let warnings: Vec<String> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] == "config keys")
        .map(|c| c["detail"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].contains(
            "`agents.defaults.compaction.autoEnabeld` (line 7): did you mean `autoEnabled`?"
        ),
        "{warnings:?}"
    );
    assert!(
        warnings[1]
            .contains("`agents.defaults.compaction.frobnicate` (line 8): ctxhost does not read it"),
        "{warnings:?}"
    );
    // The misspelled key did nothing: automatic compaction is still on, from the default.
    let shown = json_of(&setup.run(&["config", "show", "--json"]));
    let enabled = setting(&shown, "agents.defaults.compaction.enabled");
    assert_eq!(enabled["value"], true);
    assert_eq!(enabled["origin"]["kind"], "default");
    // Unknown keys (with their suggestions) are part of the documented shape too.
    common::check_cli_schema("config-show", &shown);
    assert_eq!(shown["unknownKeys"].as_array().unwrap().len(), 2);
}

#[test]
fn config_show_gives_each_value_its_origin() {
    let setup = Setup::new(
        "{\n  agents: { defaults: {\n    contextWindow: 64000,\n    compaction: {\n      autoEnabled: false,\n      prune: false,\n      preserveRecentTokens: 9000,\n    },\n  } },\n}",
    );
    let shown = json_of(&setup.run(&["config", "show", "--json"]));
    let find = |key: &str| setting(&shown, key);
    let window = find("agents.defaults.contextWindow");
    assert_eq!(window["value"], 64000);
    assert_eq!(window["origin"]["line"], 3);
    let enabled = find("agents.defaults.compaction.enabled");
    assert_eq!(enabled["value"], false);
    assert_eq!(
        enabled["origin"]["key"],
        "agents.defaults.compaction.autoEnabled"
    );
    assert_eq!(enabled["origin"]["line"], 5);
    assert_eq!(
        find("agents.defaults.compaction.prune.enabled")["value"],
        false
    );
    let keep = find("agents.defaults.compaction.summarizeKeepRecentTokens");
    assert_eq!(keep["value"], 9000);
    assert_eq!(keep["origin"]["line"], 7);
    let reserve = find("agents.defaults.compaction.reserveTokens");
    assert_eq!(reserve["value"], 16384);
    assert_eq!(reserve["origin"]["kind"], "default");
    let text = String::from_utf8_lossy(&setup.run(&["config", "show"]).stdout).into_owned();
    assert!(
        text.contains("agents.defaults.compaction.enabled"),
        "{text}"
    );
    assert!(
        text.contains("ctxhost.json:5 (agents.defaults.compaction.autoEnabled)"),
        "{text}"
    );
    assert!(text.contains("[default]"), "{text}");
}
