//! Where ctxhost keeps its state (`$CTXHOST_HOME`) and which config file a run reads.

use std::path::{Path, PathBuf};

use super::error::ConfigError;

/// The directory tree ctxhost owns (`$CTXHOST_HOME`, default `~/.ctxhost`).
#[derive(Debug, Clone)]
pub struct Home {
    root: PathBuf,
}

impl Home {
    /// A home rooted at `root`; nothing is created until something is written there.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// `$CTXHOST_HOME`, else `$HOME/.ctxhost`.
    pub fn from_env() -> Result<Self, ConfigError> {
        if let Some(dir) = std::env::var_os("CTXHOST_HOME").filter(|v| !v.is_empty()) {
            return Ok(Self::new(dir));
        }
        let home = std::env::var_os("HOME")
            .filter(|v| !v.is_empty())
            .ok_or(ConfigError::NoHome)?;
        Ok(Self::new(PathBuf::from(home).join(".ctxhost")))
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }
    /// `ctxhost.json` in the root: the config read when neither `--config` nor `$CTXHOST_CONFIG`
    /// names one.
    pub fn default_config_path(&self) -> PathBuf {
        self.root.join("ctxhost.json")
    }
    /// `plugins/`: installed engine packages, one directory per id.
    pub fn plugins_dir(&self) -> PathBuf {
        self.root.join("plugins")
    }
    /// The private directory of one engine, preopened into its sandbox.
    pub fn state_dir(&self, engine_id: &str) -> PathBuf {
        self.root.join("state").join(engine_id)
    }
    /// `sessions/`: transcripts of sessions opened by key.
    pub fn sessions_dir(&self) -> PathBuf {
        self.root.join("sessions")
    }
    /// `cache/`: compiled engines, keyed by the component's hash and wasmtime's settings.
    pub fn cache_dir(&self) -> PathBuf {
        self.root.join("cache")
    }
}

/// Where the config came from, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// `--config PATH`
    Flag(PathBuf),
    /// `$CTXHOST_CONFIG`
    Env(PathBuf),
    /// `$CTXHOST_HOME/ctxhost.json`
    Home(PathBuf),
}

impl ConfigSource {
    /// Resolves the config path: the flag, else `$CTXHOST_CONFIG`, else the home default.
    pub fn resolve(flag: Option<&Path>, home: &Home) -> Self {
        if let Some(path) = flag {
            return Self::Flag(path.to_path_buf());
        }
        if let Some(path) = std::env::var_os("CTXHOST_CONFIG").filter(|v| !v.is_empty()) {
            return Self::Env(PathBuf::from(path));
        }
        Self::Home(home.default_config_path())
    }

    /// The config file's path, whichever way it was chosen.
    pub fn path(&self) -> &Path {
        match self {
            Self::Flag(p) | Self::Env(p) | Self::Home(p) => p,
        }
    }

    /// A missing file means defaults only at the home location; a path the operator named
    /// explicitly must exist.
    pub(super) fn missing_is_default(&self) -> bool {
        matches!(self, Self::Home(_))
    }
}
