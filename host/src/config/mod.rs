//! Operator configuration: where it lives, how it is parsed (JSON5), and the typed view of the
//! keys ctxhost reads, checked once when it loads ([`compaction`] resolves and checks the
//! compaction keys). Unknown keys are kept in the raw document, so an `openclaw.json` is a
//! valid config and edits ([`edit`]) never drop what they do not own; [`keys`] reports the
//! ones ctxhost does not know, [`show`] the effective settings with their origins.

pub mod compaction;
pub mod edit;
pub mod keys;
pub mod locate;
pub mod show;
mod spelling;

pub use compaction::{CompactionSettings, MemoryFlushSettings, TokenCounterSetting};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::runtime::{LIMIT_KEYS, LimitKey, Limits};
use serde::Deserialize;
use serde_json::Value;

/// The engine used when the slot is empty.
pub const DEFAULT_ENGINE: &str = "legacy";

/// A config that cannot be read or is not valid; every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but cannot be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// The config file.
        path: PathBuf,
        /// Why reading failed.
        source: std::io::Error,
    },
    /// The file is not JSON5.
    #[error("config {path}:{line}:{column}: {message}")]
    Syntax {
        /// The config file.
        path: PathBuf,
        /// The line of the syntax error, from 1 (0 when the parser gave none).
        line: usize,
        /// The column of the syntax error, from 1 (0 when the parser gave none).
        column: usize,
        /// What the parser found.
        message: String,
    },
    /// A key holds a value ctxhost cannot use.
    #[error(
        "config {}{}: `{field}`: {message}",
        path.display(),
        line.map(|l| format!(":{l}")).unwrap_or_default()
    )]
    Field {
        /// The config file.
        path: PathBuf,
        /// The line the key is written on, when it is.
        line: Option<usize>,
        /// The key's dotted path, e.g. `plugins.entries.lcm.limits.memoryMiB`.
        field: String,
        /// What is wrong with its value.
        message: String,
    },
    /// Neither `CTXHOST_HOME` nor `HOME` is set, so there is no default place for state.
    #[error(
        "no home directory: set CTXHOST_HOME (or HOME) so ctxhost knows where to keep its state"
    )]
    NoHome,
}

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
    fn missing_is_default(&self) -> bool {
        matches!(self, Self::Home(_))
    }
}

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

/// The keys ctxhost reads; names follow `openclaw.json` where they overlap.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    /// `plugins`: which engine serves, and each engine's settings.
    #[serde(default)]
    pub plugins: PluginsSettings,
    /// `agents`: the defaults of the agent the host serves.
    #[serde(default)]
    pub agents: AgentsSettings,
    /// `recall`: the host's recall tools over each session's whole history.
    #[serde(default)]
    pub recall: RecallSettings,
}

/// `recall`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecallSettings {
    /// `recall.tools`: offer `ctx_search` / `ctx_expand` to the agent in every session
    /// (default true). Off, the index is still kept and `ctxhost context search` still works.
    pub tools: Option<bool>,
}

impl RecallSettings {
    /// Whether sessions offer the host's recall tools.
    pub fn tools_enabled(&self) -> bool {
        self.tools.unwrap_or(true)
    }
}

impl Settings {
    fn from_value(raw: &Value, path: &Path) -> Result<Self, ConfigError> {
        if !raw.is_object() {
            return Err(ConfigError::Field {
                path: path.to_path_buf(),
                line: None,
                field: "(root)".into(),
                message: "the config must be an object".into(),
            });
        }
        if raw.get("compaction").is_some() {
            return Err(ConfigError::Field {
                path: path.to_path_buf(),
                line: None,
                field: "compaction".into(),
                message: "a top-level `compaction` block is not read: move this under agents.defaults.compaction".into(),
            });
        }
        let mut settings: Self =
            serde_path_to_error::deserialize(raw).map_err(|e| ConfigError::Field {
                path: path.to_path_buf(),
                line: None,
                field: e.path().to_string(),
                message: e.inner().to_string(),
            })?;
        settings
            .agents
            .defaults
            .compaction
            .resolve(raw.pointer("/agents/defaults/compaction"), path)?;
        settings.check_ranges(path)?;
        Ok(settings)
    }

    fn check_ranges(&self, path: &Path) -> Result<(), ConfigError> {
        for (id, entry) in &self.plugins.entries {
            let Some(limits) = &entry.limits else {
                continue;
            };
            if let Err((key, message)) = limits.check() {
                return Err(ConfigError::Field {
                    path: path.to_path_buf(),
                    line: None,
                    field: format!("plugins.entries.{id}.limits.{key}"),
                    message,
                });
            }
        }
        Ok(())
    }
}

/// `plugins`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginsSettings {
    /// `plugins.slots`: which plugin fills each slot.
    #[serde(default)]
    pub slots: Slots,
    /// `plugins.entries`: settings per engine id.
    #[serde(default)]
    pub entries: BTreeMap<String, PluginEntry>,
    /// `"legacy"` opts into serving with legacy when the selected engine cannot load.
    pub context_engine_fallback: Option<String>,
}

/// Whether `agent` is `session_key` or its leading `:`-separated segments.
fn leads(session_key: &str, agent: &str) -> bool {
    session_key
        .strip_prefix(agent)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(':'))
}

/// `plugins.slots`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Slots {
    /// `contextEngine`: the engine id that serves sessions; None: [`DEFAULT_ENGINE`].
    pub context_engine: Option<String>,
    /// `contextEngineByAgent`: an engine per agent beside the slot, keyed by the start of the
    /// session key the agent's bridge uses (`agent:<id>` for an OpenClaw agent, `pi`,
    /// `hermes`); see [`Config::engine_for`].
    #[serde(default)]
    pub context_engine_by_agent: BTreeMap<String, String>,
}

/// Which engine serves a session, and which setting chose it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineChoice<'a> {
    /// The engine id.
    pub engine: &'a str,
    /// The `plugins.slots.contextEngineByAgent` key that matched the session; None: the slot
    /// (or its default) chose.
    pub agent: Option<&'a str>,
}

/// `plugins.entries.<id>`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginEntry {
    /// `enabled`: false refuses the engine; None counts as enabled.
    pub enabled: Option<bool>,
    /// The engine's own settings, handed to it by the `config` import.
    pub config: Option<Value>,
    /// Overrides of the engine's resource limits.
    pub limits: Option<LimitsConfig>,
    /// Capabilities the operator grants (the manifest asks; both must agree).
    #[serde(default)]
    pub grants: GrantsConfig,
}

/// `plugins.entries.<id>.grants`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrantsConfig {
    /// Completion / summarization through the operator's model.
    #[serde(default)]
    pub llm: bool,
    /// A directory the engine may read, mounted read-only at `/workspace`.
    pub workspace_read: Option<PathBuf>,
}

/// `plugins.entries.<id>.limits`: overrides of the engine's resource limits, each key one of
/// [`crate::runtime::LIMIT_KEYS`] (which holds their units and ranges), checked when the config
/// loads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(transparent)]
pub struct LimitsConfig(BTreeMap<String, u64>);

impl LimitsConfig {
    /// The value set for `key`, if any.
    pub fn get(&self, key: &str) -> Option<u64> {
        self.0.get(key).copied()
    }

    /// The first key that is not a limit or is set out of its range: `(key, what is wrong)`.
    fn check(&self) -> Result<(), (String, String)> {
        for (key, &value) in &self.0 {
            let Some(limit) = LimitKey::named(key) else {
                let known: Vec<&str> = LIMIT_KEYS.iter().map(|k| k.key).collect();
                let hint = match spelling::closest(key, &known) {
                    Some(meant) => format!("did you mean `{meant}`?"),
                    None => format!("the limits are {}", known.join(", ")),
                };
                return Err((key.clone(), format!("unknown limit: {hint}")));
            };
            if !(limit.min..=limit.max).contains(&value) {
                let (min, max) = (limit.min, limit.max);
                return Err((
                    key.clone(),
                    format!("{value} is out of range ({min} to {max})"),
                ));
            }
        }
        Ok(())
    }

    /// The defaults with these overrides applied (values already checked).
    pub fn apply(&self, mut limits: Limits) -> Limits {
        for (key, &value) in &self.0 {
            if let Some(limit) = LimitKey::named(key) {
                limit.set(&mut limits, value);
            }
        }
        limits
    }
}

/// `agents`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentsSettings {
    /// `agents.defaults`.
    #[serde(default)]
    pub defaults: AgentDefaults,
}

/// `agents.defaults`: the model's window, compaction, and what the host builds around the engine's
/// messages.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AgentDefaults {
    /// The model's context window in tokens.
    pub context_window: u64,
    /// `compaction`: see [`CompactionSettings`].
    pub compaction: CompactionSettings,
    /// The agent's workspace: bootstrap files, skills.
    pub workspace: Option<PathBuf>,
    /// Cap per bootstrap file, in characters.
    pub bootstrap_max_chars: usize,
    /// Extra bootstrap files (relative to the workspace), after the standard ones.
    pub bootstrap_files: Vec<String>,
    /// Appended to the system prompt.
    pub extra_system_prompt: Option<String>,
    /// `provider/model`, for the runtime section of the system prompt.
    pub model: Option<String>,
}

impl Default for AgentDefaults {
    fn default() -> Self {
        Self {
            context_window: 200_000,
            compaction: CompactionSettings::default(),
            workspace: None,
            bootstrap_max_chars: 20_000,
            bootstrap_files: Vec::new(),
            extra_system_prompt: None,
            model: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_str(text, Path::new("/etc/ctxhost.json"))
    }

    #[test]
    fn empty_object_selects_legacy() {
        let config = parse("{}").unwrap();
        assert_eq!(config.active_engine(), "legacy");
        assert_eq!(config.settings.agents.defaults.context_window, 200_000);
    }

    #[test]
    fn json5_with_comments_and_unknown_keys() {
        let config = parse(
            "{ // openclaw keys we do not own survive\n gateway: { port: 1 },\n plugins: { slots: { contextEngine: 'sliding-window' }, entries: { 'sliding-window': { config: { maxTokens: 100, } } } } }",
        )
        .unwrap();
        assert_eq!(config.active_engine(), "sliding-window");
        assert_eq!(config.raw["gateway"]["port"], 1);
        let entry = config.plugin_entry("sliding-window").unwrap();
        assert_eq!(entry.config.as_ref().unwrap()["maxTokens"], 100);
    }

    #[test]
    fn an_engine_per_agent_by_the_leading_segments_of_the_session_key() {
        let config = parse(
            "{ plugins: { slots: { contextEngine: 'legacy', contextEngineByAgent: {
                'agent:main': 'lossless', 'agent:main:review': 'checkpoint-manager', pi: 'sliding-window' } } } }",
        )
        .unwrap();
        let choice = |key: &str| {
            let c = config.engine_for(key);
            (c.engine, c.agent)
        };
        assert_eq!(
            choice("agent:main:chat-1"),
            ("lossless", Some("agent:main"))
        );
        assert_eq!(
            choice("agent:main:review:x"),
            ("checkpoint-manager", Some("agent:main:review")),
            "the longest key wins"
        );
        assert_eq!(
            choice("agent:mainframe:x"),
            ("legacy", None),
            "whole segments only"
        );
        assert_eq!(choice("pi:0193-abc"), ("sliding-window", Some("pi")));
        assert_eq!(choice("hermes:s1"), ("legacy", None), "the slot otherwise");
        assert!(
            config.unknown_keys().is_empty(),
            "{:?}",
            config.unknown_keys()
        );
    }

    #[test]
    fn syntax_error_names_line_and_column() {
        let err =
            parse("{\n  plugins: {\n    slots: { contextEngine: 'x' ,, }\n  }\n}").unwrap_err();
        match &err {
            ConfigError::Syntax { line, column, .. } => {
                assert_eq!(*line, 3);
                assert!(*column > 1, "column {column}");
            }
            other => panic!("expected a syntax error, got {other:?}"),
        }
        assert!(err.to_string().starts_with("config /etc/ctxhost.json:3:"));
    }

    #[test]
    fn wrong_type_names_the_field_path() {
        let err = parse("{ agents: { defaults: { compaction: { reserveTokens: 'lots' } } } }")
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("agents.defaults.compaction.reserveTokens"),
            "{text}"
        );
    }

    #[test]
    fn limits_are_range_checked_and_applied() {
        let config = parse(
            "{ plugins: { entries: { e: { limits: { memoryMiB: 64, callTimeoutMs: 300 } } } } }",
        )
        .unwrap();
        let limits = config.plugin_entry("e").unwrap().limits.as_ref().unwrap();
        let applied = limits.apply(crate::runtime::Limits::default());
        assert_eq!(applied.memory_bytes, 64 << 20);
        assert_eq!(applied.call_timeout, std::time::Duration::from_millis(300));

        let err = parse("{ plugins: { entries: { e: { limits: { memoryMiB: 0 } } } } }")
            .unwrap_err()
            .to_string();
        assert!(err.contains("plugins.entries.e.limits.memoryMiB"), "{err}");
        assert!(err.contains("out of range"), "{err}");
        let err = parse("{ plugins: { entries: { e: { limits: { memoryMb: 10 } } } } }")
            .unwrap_err()
            .to_string();
        assert!(err.contains("memoryMb"), "{err}");
    }

    #[test]
    fn host_side_limits_and_the_quota_are_configurable() {
        let config = parse(
            "{ plugins: { entries: { e: { limits: { importBytesPerCall: 4096, importCallsPerCall: 10, slowImportsPerCall: 2, wallTimeoutMs: 1500, stateDirQuotaMiB: 8 } } } } }",
        )
        .unwrap();
        let limits = config.plugin_entry("e").unwrap().limits.as_ref().unwrap();
        let applied = limits.apply(crate::runtime::Limits::default());
        assert_eq!(applied.import_bytes_per_call, 4096);
        assert_eq!(applied.import_calls_per_call, 10);
        assert_eq!(applied.slow_imports_per_call, 2);
        assert_eq!(applied.wall_timeout, std::time::Duration::from_millis(1500));
        assert_eq!(applied.state_dir_quota_bytes, 8 << 20);
        assert_eq!(
            crate::runtime::Limits::default().state_dir_quota_bytes,
            256 << 20
        );
        let err = parse("{ plugins: { entries: { e: { limits: { stateDirQuotaMiB: 0 } } } } }")
            .unwrap_err()
            .to_string();
        assert!(err.contains("limits.stateDirQuotaMiB"), "{err}");
    }

    #[test]
    fn an_unknown_limit_is_an_error_that_names_the_one_meant() {
        let err = parse("{ plugins: { entries: { e: { limits: { callTimeoutMS: 10 } } } } }")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("plugins.entries.e.limits.callTimeoutMS"),
            "{err}"
        );
        assert!(err.contains("did you mean `callTimeoutMs`"), "{err}");
        let err = parse("{ plugins: { entries: { e: { limits: { cpus: 2 } } } } }")
            .unwrap_err()
            .to_string();
        assert!(err.contains("the limits are memoryMiB, "), "{err}");
        let err = parse("{ plugins: { entries: { e: { limits: { memoryMiB: '64' } } } } }")
            .unwrap_err()
            .to_string();
        assert!(err.contains("plugins.entries.e.limits"), "{err}");
    }

    /// The README's table of limits is written by hand: it must list every key with its default.
    #[test]
    fn the_readme_lists_every_limit_with_its_default() {
        let readme = include_str!("../../../README.md");
        let defaults = crate::runtime::Limits::default();
        for limit in crate::runtime::LIMIT_KEYS {
            let row = readme
                .lines()
                .find(|l| l.starts_with(&format!("| `{}` |", limit.key)))
                .unwrap_or_else(|| panic!("README.md has no row for `{}`", limit.key));
            let default = limit.get(&defaults).to_string();
            let written: String = row
                .split('|')
                .nth(2)
                .unwrap()
                .chars()
                .filter(char::is_ascii_digit)
                .collect();
            assert!(
                written.starts_with(&default),
                "{row}: the default is {default}"
            );
        }
    }

    #[test]
    fn missing_home_config_is_defaults_but_missing_flag_path_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path());
        let config = Config::load(ConfigSource::Home(home.default_config_path())).unwrap();
        assert!(!config.found);
        let err = Config::load(ConfigSource::Flag(dir.path().join("nope.json"))).unwrap_err();
        assert!(matches!(err, ConfigError::Read { .. }), "{err}");
    }
}
