//! Shared fixtures of the integration tests: the guests this crate's build script built, a
//! scratch `CTXHOST_HOME`, generated transcripts, and the shared real transcript when present.

use std::path::{Path, PathBuf};

use ctxhost::Host;
use ctxhost::config::{Config, Home};

/// The example sliding-window engine, built for wasm32-wasip2.
pub const SLIDING_WINDOW_WASM: &str = concat!(env!("OUT_DIR"), "/sliding_window.wasm");

/// A component of contract `ctxhost:engine@0.9.0`, which this host must refuse.
pub const FUTURE_CONTRACT_WASM: &str = concat!(env!("OUT_DIR"), "/future_contract_engine.wasm");

/// A 0.1 engine (`tests/guests/contract-v0-1`) built against the frozen `wit/0.1.0` directly:
/// the legacy engine as it was before 0.2.
pub const CONTRACT_V0_1_WASM: &str = concat!(env!("OUT_DIR"), "/contract_v0_1_engine.wasm");

/// The 0.2 probe engine (`tests/guests/contract-v0-2`), built against `wit/0.2.0` directly.
pub const CONTRACT_V0_2_WASM: &str = concat!(env!("OUT_DIR"), "/contract_v0_2_engine.wasm");

/// A 0.3 engine (`tests/guests/contract-v0-3`) built against `wit/0.3.0` directly, frozen as
/// the SDK moved to 0.4: pass-through assemble, `echo` and `recall` tools.
pub const CONTRACT_V0_3_WASM: &str = concat!(env!("OUT_DIR"), "/contract_v0_3_engine.wasm");

/// The context-view test engine (`tests/guests/context-view`, SDK-built): its assemble inserts
/// the whole context as the SDK shows it.
pub const CONTEXT_VIEW_WASM: &str = concat!(env!("OUT_DIR"), "/context_view_engine.wasm");

/// The hostile test engine (`tests/guests/hostile`): the session key picks its attack.
pub const HOSTILE_WASM: &str = concat!(env!("OUT_DIR"), "/hostile_engine.wasm");

/// Opens `target` on `host` with the default options (the active engine, the config's
/// settings); a failure fails the test.
pub async fn open_session(host: &Host, target: ctxhost::SessionTarget) -> ctxhost::Session {
    host.open_session(&target, &ctxhost::SessionOptions::default())
        .await
        .unwrap_or_else(|e| panic!("open {target:?}: {e:#}"))
}

/// The session transcript's tokens, every entry counted.
pub fn transcript_tokens(session: &ctxhost::Session) -> u32 {
    session
        .transcript()
        .entries()
        .iter()
        .map(|e| e.tokens())
        .sum()
}

/// The index of the session's newest compaction entry, if any.
pub fn last_compaction(session: &ctxhost::Session) -> Option<usize> {
    session
        .transcript()
        .entries()
        .iter()
        .rposition(|e| e.entry_type() == "compaction")
}

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace")
        .to_path_buf()
}

/// A scratch `CTXHOST_HOME` with an optional config (JSON5 text).
pub struct Scratch {
    pub dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn home(&self) -> Home {
        Home::new(self.dir.path().join("home"))
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A host over this home with `config` (JSON5 text) as its config file.
    pub fn host(&self, config: &str) -> Host {
        let home = self.home();
        std::fs::create_dir_all(home.root()).expect("home dir");
        let path = home.default_config_path();
        std::fs::write(&path, config).expect("write config");
        let config = Config::from_str(config, &path).expect("valid test config");
        Host::new(home, config).expect("host starts")
    }

    /// Installs a package: its manifest and component under `plugins/<id>/`.
    pub fn install(&self, id: &str, wasm: &Path) {
        let dir = self.home().plugins_dir().join(id);
        std::fs::create_dir_all(&dir).expect("plugin dir");
        let file = format!("{}.wasm", id.replace('-', "_"));
        std::fs::copy(wasm, dir.join(&file)).expect("copy component");
        std::fs::write(
            dir.join("ctxhost.plugin.json"),
            serde_json::json!({
                "id": id, "name": id, "version": "0.1.0", "kind": "context-engine",
                "component": file, "capabilities": [], "configSchema": {}
            })
            .to_string(),
        )
        .expect("write manifest");
    }

    /// Writes a generated coding session of `messages` messages and returns its path.
    pub fn generated_transcript(&self, seed: u64, messages: usize) -> PathBuf {
        let path = self.path(&format!("generated-{seed}-{messages}.jsonl"));
        std::fs::write(
            &path,
            ctxhost::transcript::generate::coding_session(seed, messages),
        )
        .expect("write transcript");
        path
    }
}

impl Default for Scratch {
    fn default() -> Self {
        Self::new()
    }
}

/// The messages of a transcript's active branch, as AgentMessage values, in order: what a
/// runtime would append to replay it.
pub fn recorded_messages(path: &Path) -> Vec<serde_json::Value> {
    let transcript = ctxhost::transcript::Transcript::load(path).expect("a valid transcript");
    let entries = transcript.entries();
    transcript
        .active_branch()
        .into_iter()
        .filter(|&i| entries[i].entry_type() == "message")
        .map(|i| serde_json::from_str(&entries[i].message_json()).expect("message JSON"))
        .collect()
}

/// `../shared/data/pi-large-session.jsonl` when this checkout sits beside `shared/`; a user's
/// clone has no `shared/`, so tests that need it print why they skip and return.
pub fn shared_transcript(test: &str) -> Option<PathBuf> {
    let path = workspace()
        .parent()
        .map(|p| p.join("shared/data/pi-large-session.jsonl"))?;
    if path.is_file() {
        Some(path)
    } else {
        eprintln!(
            "skipped: {test} needs ../shared/data/pi-large-session.jsonl, which is absent in this checkout"
        );
        None
    }
}

/// A multi-threaded tokio runtime for a test body.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(future)
}
