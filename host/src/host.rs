//! The library's entry point: config, the engines it can run, and sessions on them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ctxhost_transcript::Transcript;
use ctxhost_transcript::compaction::Settings;
use serde_json::Value;

use crate::config::{Config, Home};
use crate::error::{Error, Result};
use crate::model::ModelConfig;
use crate::plugins::{Capability, PluginError, Registry, validate_config};
use crate::runtime::{EngineSpec, Grants, Limits, PreparedEngine, Runtime, RuntimeOptions};
use crate::session::Session;

/// Which transcript a session uses.
#[derive(Debug, Clone)]
pub enum SessionTarget {
    /// A session key, stored as `$CTXHOST_HOME/sessions/<key>.jsonl`.
    Key(String),
    /// A transcript file anywhere; its key is the file stem.
    Path(PathBuf),
    /// A session key whose transcript lives at a given path (the `serve` mirror).
    KeyAt {
        /// The session key.
        key: String,
        /// The transcript file.
        path: PathBuf,
    },
    /// A scratch copy of a transcript (a dry run): its key is the original's file stem, and
    /// what loading it finds is not reported again, under the copy's name.
    Copy {
        /// The scratch copy the session writes.
        copy: PathBuf,
        /// The transcript it was copied from.
        original: PathBuf,
    },
}

/// How [`Host::open_session`] opens a session; the default serves what the config says.
#[derive(Clone, Default)]
pub struct SessionOptions {
    /// The engine that serves the session; default the one the config's slot selects
    /// ([`Host::active_engine`]).
    pub engine: Option<Arc<PreparedEngine>>,
    /// The compaction settings (and context window) the session is measured and compacted
    /// against; default the config's ([`Host::compaction_settings`]). A replay at another
    /// window sets them.
    pub settings: Option<Settings>,
    /// Open without an engine instance: it starts on the first call (or
    /// [`Session::resume`]). A server that limits how many sessions hold one opens them so.
    pub defer_instance: bool,
}

impl SessionOptions {
    /// On a given engine (e.g. one loaded with [`Host::active_engine_in`]).
    pub fn on(engine: Arc<PreparedEngine>) -> Self {
        Self {
            engine: Some(engine),
            ..Self::default()
        }
    }

    /// With these compaction settings instead of the config's.
    pub fn with_settings(mut self, settings: Settings) -> Self {
        self.settings = Some(settings);
        self
    }
}

/// What an embedding runtime holds for the life of its process: the operator's config, the
/// engines it can run (bundled and installed, each compiled and loaded once, on first use) and
/// the wasm runtime they share. Open a [`Session`] per conversation with
/// [`Host::open_session`]; one `Host` serves any number of sessions concurrently.
pub struct Host {
    home: Home,
    config: Config,
    registry: Registry,
    runtime: Runtime,
    loaded: tokio::sync::Mutex<HashMap<String, Arc<PreparedEngine>>>,
    quarantined: tokio::sync::Mutex<HashMap<String, String>>,
}

impl Host {
    /// A host with the default runtime: pooled instances and the component cache in the home.
    pub fn new(home: Home, config: Config) -> Result<Self> {
        let options = RuntimeOptions {
            cache_dir: Some(home.cache_dir()),
            ..RuntimeOptions::default()
        };
        Self::with_options(home, config, &options)
    }

    /// A host with explicit runtime options (instance pooling, the cache directory).
    pub fn with_options(home: Home, config: Config, options: &RuntimeOptions) -> Result<Self> {
        let registry = Registry::discover(&home.plugins_dir());
        Ok(Self {
            runtime: Runtime::new(options)?,
            home,
            config,
            registry,
            loaded: Default::default(),
            quarantined: Default::default(),
        })
    }

    /// `$CTXHOST_HOME`: sessions, plugins, engine state and the component cache.
    pub fn home(&self) -> &Home {
        &self.home
    }
    /// The operator's config, as loaded.
    pub fn config(&self) -> &Config {
        &self.config
    }
    /// The engines this host can serve: bundled, installed and linked.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
    /// The wasm runtime the engines share.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The engine the config's slot selects, loaded. When it cannot be served, that is an
    /// error naming it and the cause — unless `plugins.contextEngineFallback: "legacy"` opts into
    /// quarantining it for the life of the process and serving with legacy.
    pub async fn active_engine(&self) -> Result<Arc<PreparedEngine>> {
        let id = self.config.active_engine();
        let fallback = self
            .config
            .settings
            .plugins
            .context_engine_fallback
            .as_deref();
        let fallback = fallback.filter(|fallback| *fallback != id);
        let Some(fallback) = fallback else {
            return self.engine(id).await;
        };
        if self.quarantined.lock().await.contains_key(id) {
            return self.engine(fallback).await;
        }
        match self.engine(id).await {
            Ok(engine) => Ok(engine),
            Err(cause) => {
                tracing::warn!(
                    "context engine `{id}` quarantined for this process, `{fallback}` serves instead (plugins.contextEngineFallback): {}",
                    crate::error::chain(&cause)
                );
                self.quarantined
                    .lock()
                    .await
                    .insert(id.to_string(), crate::error::chain(&cause));
                self.engine(fallback).await
            }
        }
    }

    /// Engines quarantined by the fallback policy, with the cause.
    pub async fn quarantined(&self) -> Vec<(String, String)> {
        let quarantined = self.quarantined.lock().await;
        quarantined
            .iter()
            .map(|(id, cause)| (id.clone(), cause.clone()))
            .collect()
    }

    /// An engine by id when this host has loaded it (never loads one).
    pub async fn loaded_engine(&self, id: &str) -> Option<Arc<PreparedEngine>> {
        self.loaded.lock().await.get(id).cloned()
    }

    /// An engine by id, loaded once per host: it must exist, be enabled, have a config its
    /// schema accepts, and answer `info` with its own id.
    pub async fn engine(&self, id: &str) -> Result<Arc<PreparedEngine>> {
        let mut loaded = self.loaded.lock().await;
        if let Some(engine) = loaded.get(id) {
            return Ok(engine.clone());
        }
        let engine = self.load(id, self.home.state_dir(id)).await?;
        loaded.insert(id.to_string(), engine.clone());
        Ok(engine)
    }

    /// The engine the slot selects, loaded afresh with `state_dir` as its private directory
    /// instead of its own: a dry run (`context inspect`) must not change what the engine keeps.
    pub async fn active_engine_in(&self, state_dir: PathBuf) -> Result<Arc<PreparedEngine>> {
        self.load(self.config.active_engine(), state_dir).await
    }

    /// Loads an engine by id with its private directory at `state_dir`: it must exist, be
    /// enabled, have a config its schema accepts, and answer `info` with its own id.
    async fn load(&self, id: &str, state_dir: PathBuf) -> Result<Arc<PreparedEngine>> {
        let available = self.registry.resolve(id, self.config.source.path())?;
        let entry = self.config.plugin_entry(id);
        if entry.and_then(|e| e.enabled) == Some(false) {
            return Err(PluginError::Disabled { id: id.to_string() }.into());
        }
        let config = entry
            .and_then(|entry| entry.config.clone())
            .unwrap_or_else(|| Value::Object(Default::default()));
        validate_config(&available.config_schema(), &config).map_err(|(pointer, rule)| {
            PluginError::Config {
                id: id.to_string(),
                pointer,
                rule,
            }
        })?;
        let limits = entry
            .and_then(|entry| entry.limits.as_ref())
            .map_or_else(Limits::default, |overrides| {
                overrides.apply(Limits::default())
            });
        let spec = EngineSpec {
            id: id.to_string(),
            origin: available.origin(),
            state_dir,
            config_json: config.to_string(),
            limits,
            grants: self.grants(id, available.capabilities()),
        };
        let bytes = available.component_bytes()?;
        let engine = self.runtime.prepare(spec, &bytes).await?;
        if engine.info().id != id {
            return Err(PluginError::IdMismatch {
                id: id.to_string(),
                actual: engine.info().id.clone(),
            }
            .into());
        }
        Ok(engine)
    }

    /// What an engine may use: what its manifest asks for and the operator granted.
    pub fn grants(&self, id: &str, requested: &[Capability]) -> Grants {
        let granted = self
            .config
            .plugin_entry(id)
            .map(|e| e.grants.clone())
            .unwrap_or_default();
        Grants {
            llm: granted.llm && requested.contains(&Capability::Llm),
            workspace: granted
                .workspace_read
                .filter(|_| requested.contains(&Capability::WorkspaceRead)),
        }
    }

    /// Capabilities an engine asks for that the operator has not granted.
    pub fn ungranted(&self, id: &str, requested: &[Capability]) -> Vec<Capability> {
        let grants = self.grants(id, requested);
        requested
            .iter()
            .copied()
            .filter(|c| match c {
                Capability::Llm => !grants.llm,
                Capability::WorkspaceRead => grants.workspace.is_none(),
            })
            .collect()
    }

    /// Closes an engine's circuit breaker (the operator vouches for it again).
    pub async fn reset_engine(&self, id: &str) -> bool {
        match self.loaded.lock().await.get(id) {
            Some(engine) => {
                engine.reset_health();
                true
            }
            None => false,
        }
    }

    /// The transcript path of a session target.
    pub fn session_path(&self, target: &SessionTarget) -> Result<(String, PathBuf)> {
        match target {
            SessionTarget::Path(path) => {
                let key = path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "session".into());
                Ok((key, path.clone()))
            }
            SessionTarget::Copy { copy, original } => {
                let key = original
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "session".into());
                Ok((key, copy.clone()))
            }
            SessionTarget::KeyAt { key, path } => {
                encode_key(key)?;
                Ok((key.clone(), path.clone()))
            }
            SessionTarget::Key(key) => {
                let dir = self.home.sessions_dir();
                // Sessions written before keys were grouped by agent stay where they are.
                let flat = dir.join(format!("{}.jsonl", encode_key(key)?));
                let path = if flat.exists() {
                    flat
                } else {
                    session_file(&dir, key)?
                };
                Ok((key.clone(), path))
            }
        }
    }

    /// Opens the session's transcript (creating it when missing) and starts an engine instance
    /// for it, bootstrapped from the transcript (unless `options` defer it). `options` may name
    /// the engine and the compaction settings; by default the config decides both.
    pub async fn open_session(
        &self,
        target: &SessionTarget,
        options: &SessionOptions,
    ) -> Result<Session> {
        let engine = match &options.engine {
            Some(engine) => engine.clone(),
            None => self.active_engine().await?,
        };
        let settings = options
            .settings
            .clone()
            .unwrap_or_else(|| self.compaction_settings());
        let (key, path) = self.session_path(target)?;
        let compaction = &self.config.settings.agents.defaults.compaction;
        let report_load = !matches!(target, SessionTarget::Copy { .. });
        let mut session = Session::open(
            engine,
            &key,
            &path,
            settings,
            compaction.token_counter.counter(),
            compaction.model.clone(),
            report_load,
        )
        .await?;
        session.set_recall_tools(self.config.settings.recall.tools_enabled());
        if !options.defer_instance {
            session.resume().await?;
        }
        Ok(session)
    }

    /// The compaction settings of the config (`agents.defaults`), checked when it loaded.
    pub fn compaction_settings(&self) -> Settings {
        self.config.compaction_settings()
    }

    /// The operator's model (`agents.defaults.compaction.model`), checked when the config
    /// loaded: the summarizer compactions use and what the `complete` import asks.
    pub fn model_config(&self) -> &ModelConfig {
        &self.config.settings.agents.defaults.compaction.model
    }
}

/// Where a session key's transcript lives under `sessions/`: keys of the form
/// `agent:<agent>:...` (OpenClaw's) under `agents/<agent>/`, others directly; the key itself
/// `%`-encoded into the file name, or its short form when that would be too long (a prefix
/// and a hash of the key, which the transcript records whole).
pub fn session_file(sessions_dir: &Path, key: &str) -> Result<PathBuf> {
    let agent = key
        .strip_prefix("agent:")
        .and_then(|rest| rest.split_once(':'))
        .map(|(agent, _)| agent)
        .filter(|agent| !agent.is_empty());
    let dir = match agent {
        Some(agent) => sessions_dir.join("agents").join(file_stem(agent)?),
        None => sessions_dir.to_path_buf(),
    };
    let plain = format!("{}.jsonl", encode_key(key)?);
    let stem = file_stem(key)?;
    // A long name written before short forms existed stays where it is.
    if stem.len() + ".jsonl".len() != plain.len() && dir.join(&plain).exists() {
        return Ok(dir.join(plain));
    }
    Ok(dir.join(format!("{stem}.jsonl")))
}

/// The longest file stem a key is written as: with `.jsonl` and the longest suffix a sibling
/// file adds (`.recall.sqlite-journal`, `.torn-<time>`, `.tmp-<pid>-<n>`) it stays well under
/// the 255-byte name limit of common filesystems.
const MAX_STEM_BYTES: usize = 180;

/// How much of the encoded key a short form keeps, for people listing the directory.
const SHORT_PREFIX_BYTES: usize = 120;

/// Marks a short form: `~` is never part of an encoded key, so the two cannot collide.
const SHORT_FORM_MARK: char = '~';

/// A key as a file (or directory) name: [`encode_key`], or, when that is longer than
/// [`MAX_STEM_BYTES`] (percent-encoding triples each non-ASCII byte, so a 200-byte key can
/// need 600), a stable short form: the encoding's start, `~`, and 32 hex digits of the key's
/// BLAKE3 hash. The session records its full key inside (see [`KEY_RECORD`]).
pub(crate) fn file_stem(key: &str) -> Result<String> {
    let plain = encode_key(key)?;
    if plain.len() <= MAX_STEM_BYTES {
        return Ok(plain);
    }
    // Cut before a `%XX` triple rather than inside it.
    let mut cut = SHORT_PREFIX_BYTES;
    while cut > 0 && plain.as_bytes()[cut - 2..cut].contains(&b'%') {
        cut -= 1;
    }
    let hash = blake3::hash(key.as_bytes()).to_hex();
    Ok(format!("{}{SHORT_FORM_MARK}{}", &plain[..cut], &hash[..32]))
}

/// `customType` of the entry that records the full key of a session whose file name is a short
/// form, written first in the transcript.
pub(crate) const KEY_RECORD: &str = "ctxhost.sessionKey";

/// A new transcript for `key` at `path`: its header, and the full key recorded inside when the
/// file name is a short form of it (nothing else could tell which key the file belongs to).
pub fn new_transcript(id: &str, key: &str, path: &Path) -> Result<Transcript> {
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    let now = crate::timestamp::now_iso();
    let mut transcript = Transcript::new(id, &cwd, &now);
    let short = path
        .file_stem()
        .is_some_and(|stem| stem.to_string_lossy().contains(SHORT_FORM_MARK));
    if short {
        let record = serde_json::json!({ "customType": KEY_RECORD, "data": { "sessionKey": key } });
        transcript.append_other("custom", &record, &now)?;
    }
    Ok(transcript)
}

/// Session keys map to file names losslessly: `[A-Za-z0-9._-]` stay, other bytes become `%XX`.
pub fn encode_key(key: &str) -> Result<String> {
    let problem = if key.is_empty() {
        Some("it is empty")
    } else if key.len() > 200 {
        Some("it is longer than 200 bytes")
    } else if key == "." || key == ".." {
        Some("it names a directory")
    } else {
        None
    };
    if let Some(problem) = problem {
        return Err(Error::SessionKey {
            key: crate::error::excerpt(key, crate::error::QUOTE_BYTES).into_owned(),
            problem: problem.to_string(),
        });
    }
    let mut out = String::with_capacity(key.len());
    for byte in key.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_non_ascii_keys_get_a_stable_short_file_name() {
        let dir = Path::new("/h/sessions");
        for n in [20, 40, 48] {
            let key = format!("agent:{}:{}", "ü".repeat(n), "é".repeat(n));
            assert!(key.len() <= 200, "{}", key.len());
            let path = session_file(dir, &key).unwrap();
            for part in path.strip_prefix(dir).unwrap() {
                assert!(part.len() <= MAX_STEM_BYTES + 6, "{n}: {part:?}");
            }
            assert_eq!(path, session_file(dir, &key).unwrap(), "stable");
            let other = format!("{key}x");
            assert_ne!(path, session_file(dir, &other).unwrap());
        }
        // Short keys keep their plain, readable name.
        assert_eq!(
            session_file(dir, "agent:main:main").unwrap(),
            dir.join("agents/main/agent%3Amain%3Amain.jsonl")
        );
    }

    #[test]
    fn keys_encode_losslessly_and_never_escape_the_sessions_dir() {
        assert_eq!(
            encode_key("agent:main:main").unwrap(),
            "agent%3Amain%3Amain"
        );
        assert_eq!(encode_key("a_b").unwrap(), "a_b");
        assert_ne!(encode_key("a:b").unwrap(), encode_key("a_b").unwrap());
        assert_eq!(encode_key("../etc/passwd").unwrap(), "..%2Fetc%2Fpasswd");
        assert!(encode_key("").is_err());
        assert!(encode_key("..").is_err());
    }
}
