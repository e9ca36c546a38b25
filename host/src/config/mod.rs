//! Operator configuration: where it lives, how it is parsed (JSON5), and the typed view of the
//! keys ctxhost reads, checked once when it loads ([`compaction`] resolves and checks the
//! compaction keys). Unknown keys are kept in the raw document, so an `openclaw.json` is a
//! valid config and edits ([`edit`]) never drop what they do not own; [`keys`] reports the
//! ones ctxhost does not know, [`show`] the effective settings with their origins.

pub mod compaction;
pub mod edit;
mod error;
mod home;
pub mod keys;
pub mod locate;
mod settings;
pub mod show;
mod spelling;

pub use compaction::{CompactionSettings, MemoryFlushSettings, TokenCounterSetting};
pub use error::ConfigError;
pub use home::{ConfigSource, Home};
pub use settings::{
    AgentDefaults, AgentsSettings, EngineChoice, GrantsConfig, LimitsConfig, PluginEntry,
    PluginsSettings, RecallSettings, Settings, Slots,
};

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The engine used when the slot is empty.
pub const DEFAULT_ENGINE: &str = "legacy";

/// The parsed config: the raw document (kept whole) and the typed keys ctxhost reads.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the file was looked for.
    pub source: ConfigSource,
    /// False when the file did not exist and defaults apply.
    pub found: bool,
    /// The whole document as parsed, unknown keys included (edits keep them).
    pub raw: Value,
    /// The keys ctxhost reads, typed and checked.
    pub settings: Settings,
    /// The line of each key in the file, by dotted path.
    pub lines: std::collections::HashMap<String, usize>,
}

impl Config {
    /// Reads and checks the config at `source`. A missing file is defaults only when it is the home
    /// default; a named file must exist.
    pub fn load(source: ConfigSource) -> Result<Self, ConfigError> {
        let path = source.path().to_path_buf();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && source.missing_is_default() => {
                return Ok(Self {
                    source,
                    ..Self::empty()
                });
            }
            Err(source) => return Err(ConfigError::Read { path, source }),
        };
        let config = Self {
            source,
            ..Self::parse(&text, &path)?
        };
        // Never silent: every command logs what `doctor` warns about.
        for unknown in config.unknown_keys() {
            tracing::warn!("config {}: {unknown}", path.display());
        }
        Ok(config)
    }

    /// Defaults only, as if no file existed.
    pub fn defaults(home: &Home) -> Self {
        Self {
            source: ConfigSource::Home(home.default_config_path()),
            ..Self::empty()
        }
    }

    fn empty() -> Self {
        Self {
            source: ConfigSource::Home(PathBuf::new()),
            found: false,
            raw: Value::Object(Default::default()),
            settings: Settings::default(),
            lines: Default::default(),
        }
    }

    /// Parses a config document given as text (tests, embedding runtimes).
    pub fn from_str(text: &str, path: &Path) -> Result<Self, ConfigError> {
        Self::parse(text, path)
    }

    fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let raw = parse_json5(text, path)?;
        let lines = locate::key_lines(text);
        let settings = Settings::from_value(&raw, path).map_err(|mut e| {
            // Name the line too, when the key is written in the file.
            if let ConfigError::Field { field, line, .. } = &mut e {
                *line = lines.get(field.as_str()).copied();
            }
            e
        })?;
        Ok(Self {
            source: ConfigSource::Flag(path.to_path_buf()),
            found: true,
            raw,
            settings,
            lines,
        })
    }

    /// Keys under the sections ctxhost reads that it does not know (doctor warns about them).
    pub fn unknown_keys(&self) -> Vec<keys::UnknownKey> {
        keys::unknown_keys(&self.raw, &self.lines)
    }

    /// The compaction settings for the configured window.
    pub fn compaction_settings(&self) -> ctxhost_transcript::compaction::Settings {
        let defaults = &self.settings.agents.defaults;
        defaults.compaction.settings(defaults.context_window)
    }

    /// The engine the slot selects.
    pub fn active_engine(&self) -> &str {
        self.settings
            .plugins
            .slots
            .context_engine
            .as_deref()
            .unwrap_or(DEFAULT_ENGINE)
    }

    /// The engine for the session `session_key`: the `contextEngineByAgent` entry whose key is
    /// the longest run of the session key's leading `:`-separated segments (`agent:main`
    /// matches `agent:main:chat-1`, not `agent:mainframe:x`), else the slot.
    pub fn engine_for<'a>(&'a self, session_key: &str) -> EngineChoice<'a> {
        let slots = &self.settings.plugins.slots;
        let matched = slots
            .context_engine_by_agent
            .iter()
            .filter(|(agent, _)| leads(session_key, agent))
            .max_by_key(|(agent, _)| agent.len());
        match matched {
            Some((agent, engine)) => EngineChoice {
                engine,
                agent: Some(agent),
            },
            None => EngineChoice {
                engine: self.active_engine(),
                agent: None,
            },
        }
    }

    /// `plugins.entries.<id>`, when the config has one.
    pub fn plugin_entry(&self, id: &str) -> Option<&PluginEntry> {
        self.settings.plugins.entries.get(id)
    }
}

/// Whether `agent` is `session_key` or its leading `:`-separated segments.
fn leads(session_key: &str, agent: &str) -> bool {
    session_key
        .strip_prefix(agent)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(':'))
}

fn parse_json5(text: &str, path: &Path) -> Result<Value, ConfigError> {
    json5::from_str::<Value>(text).map_err(|e| {
        let (line, column) = e
            .position()
            .map(|p| (p.line + 1, p.column + 1))
            .unwrap_or((0, 0));
        let message = match e.code() {
            Some(code) => code.to_string(),
            None => e.to_string(),
        };
        ConfigError::Syntax {
            path: path.to_path_buf(),
            line,
            column,
            message,
        }
    })
}

#[cfg(test)]
mod tests;
