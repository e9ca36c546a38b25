//! `ctxhost config show`: the settings ctxhost will use, after defaults, each with where its
//! value came from — the default, a line of the config file, or the environment.

use serde::Serialize;
use serde_json::{Value, json};

use super::compaction::{CompactionSettings, SECTION};
use super::keys::UnknownKey;
use super::settings::PluginEntry;
use super::{Config, ConfigSource};
use crate::model::{ModelConfig, OpenAiConfig};
use ctxhost_runtime::{LIMIT_KEYS, Limits};
use ctxhost_transcript::compaction::Policy;

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Origin {
    /// Nothing set it: ctxhost's default.
    Default,
    /// Written in the config file (the key that set it: an alias may have).
    File {
        /// The config file.
        path: String,
        /// The line the key is on, from 1.
        line: usize,
        /// The key as written.
        key: String,
    },
    /// Set by an environment variable.
    Environment {
        /// The variable's name.
        variable: String,
    },
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Default => f.write_str("default"),
            Origin::File { path, line, key } => write!(f, "{path}:{line} ({key})"),
            Origin::Environment { variable } => write!(f, "environment ${variable}"),
        }
    }
}

/// One effective setting.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Shown {
    /// The dotted key, e.g. `agents.defaults.compaction.reserveTokens`.
    pub key: String,
    /// The value ctxhost will use.
    pub value: Value,
    /// Where that value came from.
    pub origin: Origin,
}

/// Everything `config show` prints (its `--json` shape: docs/cli-json/config-show.schema.json).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Effective {
    /// The config file's path.
    pub config: String,
    /// How the file was chosen: `--config`, `$CTXHOST_CONFIG`, or the home default.
    pub config_origin: String,
    /// False when the file does not exist and defaults apply.
    pub found: bool,
    /// Every setting ctxhost reads, in a stable order.
    pub settings: Vec<Shown>,
    /// The context size automatic compaction fires above, at the configured window.
    pub auto_threshold_tokens: u64,
    /// Keys in the file ctxhost does not read (a typo, or another tool's key).
    pub unknown_keys: Vec<UnknownKey>,
}

impl Config {
    /// The effective settings with their origins.
    pub fn effective(&self) -> Effective {
        let mut shown = Shower {
            config: self,
            file: self.source.path().display().to_string(),
            shown: Vec::new(),
        };
        shown.plugins();
        shown.agent_defaults();
        shown.compaction();
        let config_origin = match &self.source {
            ConfigSource::Flag(_) => "--config",
            ConfigSource::Env(_) => "environment $CTXHOST_CONFIG",
            ConfigSource::Home(_) => "default ($CTXHOST_HOME/ctxhost.json)",
        }
        .to_string();
        Effective {
            config: shown.file,
            config_origin,
            found: self.found,
            settings: shown.shown,
            auto_threshold_tokens: self.compaction_settings().auto_threshold(),
            unknown_keys: self.unknown_keys(),
        }
    }
}

/// Collects the settings `config show` prints, section by section, in a stable order.
struct Shower<'a> {
    config: &'a Config,
    file: String,
    shown: Vec<Shown>,
}

impl Shower<'_> {
    /// Shows `value` under `key`; the first of `keys` written in the file gave it (an alias may
    /// come before the key itself), else it is the default.
    fn add(&mut self, key: &str, value: Value, keys: &[&str]) {
        let origin = keys
            .iter()
            .find_map(|k| {
                self.config.lines.get(*k).map(|line| Origin::File {
                    path: self.file.clone(),
                    line: *line,
                    key: (*k).to_string(),
                })
            })
            .unwrap_or(Origin::Default);
        self.shown.push(Shown {
            key: key.to_string(),
            value,
            origin,
        });
    }

    /// Shows `value` under `key`, set by that key alone.
    fn add_own(&mut self, key: &str, value: Value) {
        self.add(key, value, &[key]);
    }

    /// The active engine, the fallback, and each configured engine's switches and limits.
    fn plugins(&mut self) {
        let plugins = &self.config.settings.plugins;
        self.add_own(
            "plugins.slots.contextEngine",
            self.config.active_engine().into(),
        );
        for (agent, engine) in &plugins.slots.context_engine_by_agent {
            let key = format!("plugins.slots.contextEngineByAgent.{agent}");
            self.add_own(&key, engine.as_str().into());
        }
        self.add_own(
            "plugins.contextEngineFallback",
            json!(plugins.context_engine_fallback),
        );
        for (id, entry) in &plugins.entries {
            self.plugin_entry(id, entry);
        }
    }

    /// One configured engine's switch, grants, and every limit, set or not: what the engine
    /// will run under.
    fn plugin_entry(&mut self, id: &str, entry: &PluginEntry) {
        let at = format!("plugins.entries.{id}");
        self.add_own(
            &format!("{at}.enabled"),
            entry.enabled.unwrap_or(true).into(),
        );
        self.add_own(&format!("{at}.grants.llm"), entry.grants.llm.into());
        if let Some(dir) = &entry.grants.workspace_read {
            let key = format!("{at}.grants.workspaceRead");
            self.add_own(&key, dir.display().to_string().into());
        }
        let limits = (entry.limits.as_ref())
            .map_or_else(Limits::default, |set| set.apply(Limits::default()));
        for limit in LIMIT_KEYS {
            let key = format!("{at}.limits.{}", limit.key);
            self.add_own(&key, limit.get(&limits).into());
        }
    }

    /// `agents.defaults` outside `compaction`.
    fn agent_defaults(&mut self) {
        let d = &self.config.settings.agents.defaults;
        let at = |k: &str| format!("agents.defaults.{k}");
        self.add_own(&at("contextWindow"), d.context_window.into());
        self.add_own(&at("model"), json!(d.model));
        self.add_own(
            &at("workspace"),
            json!(d.workspace.as_ref().map(|w| w.display().to_string())),
        );
        self.add_own(&at("bootstrapMaxChars"), d.bootstrap_max_chars.into());
        self.add_own(&at("bootstrapFiles"), json!(d.bootstrap_files));
        self.add_own(&at("extraSystemPrompt"), json!(d.extra_system_prompt));
    }

    /// `agents.defaults.compaction`: thresholds, the layered policy, the summarizer's model and
    /// the memory flush.
    fn compaction(&mut self) {
        let c = &self.config.settings.agents.defaults.compaction;
        self.compaction_thresholds(c);
        self.compaction_policy(&c.policy);
        self.add_own(&in_section("tokenCounter"), c.token_counter.as_str().into());
        self.add_own(&in_section("model"), c.model.name().into());
        if let ModelConfig::OpenAiCompatible(m) = &c.model {
            self.summarizer_model(m);
        }
        let flush = &c.memory_flush;
        for (name, value) in [
            ("enabled", json!(flush.enabled)),
            ("softThresholdTokens", json!(flush.soft_threshold_tokens)),
        ] {
            self.add_own(&in_section(&format!("memoryFlush.{name}")), value);
        }
    }

    /// When automatic compaction runs, and what it keeps.
    fn compaction_thresholds(&mut self, c: &CompactionSettings) {
        self.add_compaction(
            "enabled",
            json!(c.auto_enabled()),
            &["enabled", "autoEnabled"],
        );
        self.add_compaction_own("reserveTokens", json!(c.reserve_tokens));
        self.add_compaction_own("reserveTokensFloor", json!(c.reserve_tokens_floor));
        let keep = ["preserveRecentTokens", "keepRecentTokens"];
        self.add_compaction("keepRecentTokens", json!(c.keep_recent_tokens), &keep);
        self.add_compaction_own("autoThresholdPercent", json!(c.auto_threshold_percent));
        self.add_compaction_own("notifyBeforeAuto", json!(c.notify_before_auto));
        let prune = ["prune.enabled", "prune"];
        self.add_compaction("prune.enabled", json!(c.policy.prune_enabled), &prune);
    }

    /// Shows `value` under the compaction key `name`, set by that key alone.
    fn add_compaction_own(&mut self, name: &str, value: Value) {
        self.add_compaction(name, value, &[name]);
    }

    /// Shows `value` under the compaction key `name`, set by the compaction keys `set_by`.
    fn add_compaction(&mut self, name: &str, value: Value, set_by: &[&str]) {
        let keys: Vec<String> = set_by.iter().map(|k| in_section(k)).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        self.add(&in_section(name), value, &keys);
    }

    /// The layered policy's keys, as the policy names them (with the aliases that can set them
    /// first).
    fn compaction_policy(&mut self, policy: &Policy) {
        let Value::Object(policy) = serde_json::to_value(policy).unwrap_or_default() else {
            return;
        };
        for (name, value) in policy {
            let mut keys = match name.as_str() {
                "pruneProtectTokens" => vec![in_section("prune.protectRecentTokens")],
                "pruneMinimumTokens" => vec![in_section("prune.pruneMinimumTokens")],
                "summarizeKeepRecentTokens" => vec![in_section("preserveRecentTokens")],
                _ => Vec::new(),
            };
            keys.push(in_section(&name));
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            self.add(&in_section(&name), value, &keys);
        }
    }

    /// `compaction.model` when it is an OpenAI-compatible endpoint, and whether its key is set.
    fn summarizer_model(&mut self, m: &OpenAiConfig) {
        for (name, value) in [
            ("baseUrl", json!(m.base_url)),
            ("modelName", json!(m.model_name)),
            ("apiKeyEnv", json!(m.api_key_env)),
            ("temperature", json!(m.temperature)),
            ("maxTokens", json!(m.max_tokens)),
            ("timeoutMs", json!(m.timeout.as_millis() as u64)),
            ("retries", json!(m.retries)),
        ] {
            let key = in_section(&format!("model.{name}"));
            // The endpoint and the key variable are implied by the provider when not written,
            // the model name by the `"<provider>/<model>"` form; the other values are
            // ctxhost's defaults.
            let (provider, string_form) = (in_section("model.provider"), in_section("model"));
            let keys: &[&str] = match name {
                "baseUrl" | "apiKeyEnv" => &[&key, &provider, &string_form],
                "modelName" => &[&key, &string_form],
                _ => &[&key],
            };
            self.add(&key, value, keys);
        }
        if let Some(variable) = &m.api_key_env {
            self.summarizer_key(variable);
        }
    }

    /// Whether the summarizer's key is in `variable`.
    fn summarizer_key(&mut self, variable: &str) {
        let set = std::env::var_os(variable).is_some_and(|v| !v.is_empty());
        self.shown.push(Shown {
            key: in_section("model.apiKey"),
            value: if set { "set" } else { "not set" }.into(),
            origin: Origin::Environment {
                variable: variable.to_string(),
            },
        });
    }
}

/// `name`'s key in the compaction section.
fn in_section(name: &str) -> String {
    format!("{SECTION}.{name}")
}
