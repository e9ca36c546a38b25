//! The typed view of the keys ctxhost reads (names follow `openclaw.json` where they overlap),
//! each checked when the config loads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::compaction::CompactionSettings;
use super::error::ConfigError;
use super::spelling;
use ctxhost_runtime::{LIMIT_KEYS, LimitKey, Limits};

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

/// A problem with `field` of the config at `path` (its line found later, when there is one).
fn field_error(path: &Path, field: String, message: String) -> ConfigError {
    ConfigError::Field {
        path: path.to_path_buf(),
        line: None,
        field,
        message,
    }
}

impl Settings {
    pub(super) fn from_value(raw: &Value, path: &Path) -> Result<Self, ConfigError> {
        if !raw.is_object() {
            let message = "the config must be an object";
            return Err(field_error(path, "(root)".into(), message.into()));
        }
        if raw.get("compaction").is_some() {
            let message = "a top-level `compaction` block is not read: move this under agents.defaults.compaction";
            return Err(field_error(path, "compaction".into(), message.into()));
        }
        let mut settings: Self = serde_path_to_error::deserialize(raw)
            .map_err(|e| field_error(path, e.path().to_string(), e.inner().to_string()))?;
        let compaction = raw.pointer("/agents/defaults/compaction");
        (settings.agents.defaults.compaction).resolve(compaction, path)?;
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

/// `plugins.slots`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Slots {
    /// `contextEngine`: the engine id that serves sessions; None: [`DEFAULT_ENGINE`](super::DEFAULT_ENGINE).
    pub context_engine: Option<String>,
    /// `contextEngineByAgent`: an engine per agent beside the slot, keyed by the start of the
    /// session key the agent's bridge uses (`agent:<id>` for an OpenClaw agent, `pi`,
    /// `hermes`); see [`Config::engine_for`](super::Config::engine_for).
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
