//! The library's entry point: config, the engines it can run, and sessions on them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ctxhost_transcript::compaction::Settings;
use serde_json::Value;

use crate::config::{Config, Home};
use crate::error::Result;
use crate::model::ModelConfig;
use crate::plugins::{AvailableEngine, Capability, PluginError, Registry};
use crate::session::Session;
use crate::session_file::{encode_key, session_file};
use ctxhost_runtime::{EngineSpec, Grants, Limits, PreparedEngine, Runtime, RuntimeOptions};

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
        self.serving(self.config.active_engine()).await
    }

    /// The engine for the session `key` (`plugins.slots.contextEngineByAgent`, else the slot),
    /// loaded, under the same fallback policy as [`Host::active_engine`].
    pub async fn engine_for_session(&self, key: &str) -> Result<Arc<PreparedEngine>> {
        self.serving(self.config.engine_for(key).engine).await
    }

    /// `id` loaded to serve sessions, or the fallback engine when it cannot be and the config
    /// opts into that.
    async fn serving(&self, id: &str) -> Result<Arc<PreparedEngine>> {
        let fallback = (self
            .config
            .settings
            .plugins
            .context_engine_fallback
            .as_deref())
        .filter(|fallback| *fallback != id);
        let Some(fallback) = fallback else {
            return self.engine(id).await;
        };
        if self.quarantined.lock().await.contains_key(id) {
            return self.engine(fallback).await;
        }
        match self.engine(id).await {
            Ok(engine) => Ok(engine),
            Err(cause) => {
                self.quarantine(id, fallback, &cause).await;
                self.engine(fallback).await
            }
        }
    }

    /// Puts `id`, which failed to load for `cause`, aside for this process: `fallback` serves.
    async fn quarantine(&self, id: &str, fallback: &str, cause: &crate::error::Error) {
        let cause = crate::error::chain(cause);
        tracing::warn!(
            "context engine `{id}` quarantined for this process, `{fallback}` serves instead (plugins.contextEngineFallback): {cause}"
        );
        self.quarantined.lock().await.insert(id.to_string(), cause);
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
        let spec = self.engine_spec(id, available, state_dir)?;
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

    /// How the engine `id` runs, as the config sets it: enabled, with a config its schema
    /// accepts, under its limits and grants.
    fn engine_spec(
        &self,
        id: &str,
        available: &AvailableEngine,
        state_dir: PathBuf,
    ) -> Result<EngineSpec> {
        let entry = self.config.plugin_entry(id);
        if entry.and_then(|e| e.enabled) == Some(false) {
            return Err(PluginError::Disabled { id: id.to_string() }.into());
        }
        let config = (entry.and_then(|entry| entry.config.clone()))
            .unwrap_or_else(|| Value::Object(Default::default()));
        available.check_config(&config).map_err(|(pointer, rule)| {
            let id = id.to_string();
            PluginError::Config { id, pointer, rule }
        })?;
        let limits = (entry.and_then(|entry| entry.limits.as_ref()))
            .map_or_else(Limits::default, |set| set.apply(Limits::default()));
        Ok(EngineSpec {
            id: id.to_string(),
            origin: available.origin(),
            state_dir,
            config_json: config.to_string(),
            limits,
            grants: self.grants(id, available.capabilities()),
        })
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
            SessionTarget::Path(path) => Ok((key_of_file(path), path.clone())),
            SessionTarget::Copy { copy, original } => Ok((key_of_file(original), copy.clone())),
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
        let (key, path) = self.session_path(target)?;
        let engine = match &options.engine {
            Some(engine) => engine.clone(),
            None => self.engine_for_session(&key).await?,
        };
        let settings = (options.settings.clone()).unwrap_or_else(|| self.compaction_settings());
        let compaction = &self.config.settings.agents.defaults.compaction;
        let counter = compaction.token_counter.counter();
        let model = compaction.model.clone();
        let report_load = !matches!(target, SessionTarget::Copy { .. });
        let mut session =
            Session::open(engine, &key, &path, settings, counter, model, report_load).await?;
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

/// The session key of a transcript file named for no key: its file stem.
fn key_of_file(path: &Path) -> String {
    (path.file_stem())
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "session".into())
}
