//! `ctxhost config show`: the settings ctxhost will use, after defaults, each with where its
//! value came from — the default, a line of the config file, or the environment.

use serde::Serialize;
use serde_json::{Value, json};

use super::compaction::SECTION;
use super::keys::UnknownKey;
use super::{Config, ConfigSource};
use crate::model::ModelConfig;

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
#[derive(Debug, Clone, Serialize)]
pub struct Shown {
    /// The dotted key, e.g. `agents.defaults.compaction.reserveTokens`.
    pub key: String,
    /// The value ctxhost will use.
    pub value: Value,
    /// Where that value came from.
    pub origin: Origin,
}

/// Everything `config show` prints.
#[derive(Debug, Clone, Serialize)]
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
        let file = self.source.path().display().to_string();
        let mut shown = Vec::new();
        // The first of `keys` written in the file gave the value; else the default.
        let add = |shown: &mut Vec<Shown>, key: &str, value: Value, keys: &[&str]| {
            let origin = keys
                .iter()
                .find_map(|k| {
                    self.lines.get(*k).map(|line| Origin::File {
                        path: file.clone(),
                        line: *line,
                        key: (*k).to_string(),
                    })
                })
                .unwrap_or(Origin::Default);
            shown.push(Shown {
                key: key.to_string(),
                value,
                origin,
            });
        };
        let s = &self.settings;
        add(
            &mut shown,
            "plugins.slots.contextEngine",
            self.active_engine().into(),
            &["plugins.slots.contextEngine"],
        );
        add(
            &mut shown,
            "plugins.contextEngineFallback",
            json!(s.plugins.context_engine_fallback),
            &["plugins.contextEngineFallback"],
        );
        for (id, entry) in &s.plugins.entries {
            let at = format!("plugins.entries.{id}");
            add(
                &mut shown,
                &format!("{at}.enabled"),
                entry.enabled.unwrap_or(true).into(),
                &[&format!("{at}.enabled")],
            );
            add(
                &mut shown,
                &format!("{at}.grants.llm"),
                entry.grants.llm.into(),
                &[&format!("{at}.grants.llm")],
            );
            if let Some(dir) = &entry.grants.workspace_read {
                let key = format!("{at}.grants.workspaceRead");
                add(&mut shown, &key, dir.display().to_string().into(), &[&key]);
            }
            if let Some(Value::Object(limits)) =
                self.raw.pointer(&format!("/plugins/entries/{id}/limits"))
            {
                for (name, value) in limits {
                    let key = format!("{at}.limits.{name}");
                    add(&mut shown, &key, value.clone(), &[&key]);
                }
            }
        }
        let d = &s.agents.defaults;
        let at = |k: &str| format!("agents.defaults.{k}");
        add(
            &mut shown,
            &at("contextWindow"),
            d.context_window.into(),
            &[&at("contextWindow")],
        );
        add(&mut shown, &at("model"), json!(d.model), &[&at("model")]);
        add(
            &mut shown,
            &at("workspace"),
            json!(d.workspace.as_ref().map(|w| w.display().to_string())),
            &[&at("workspace")],
        );
        add(
            &mut shown,
            &at("bootstrapMaxChars"),
            d.bootstrap_max_chars.into(),
            &[&at("bootstrapMaxChars")],
        );
        add(
            &mut shown,
            &at("bootstrapFiles"),
            json!(d.bootstrap_files),
            &[&at("bootstrapFiles")],
        );
        add(
            &mut shown,
            &at("extraSystemPrompt"),
            json!(d.extra_system_prompt),
            &[&at("extraSystemPrompt")],
        );

        let c = &d.compaction;
        let k = |name: &str| format!("{SECTION}.{name}");
        add(
            &mut shown,
            &k("enabled"),
            c.auto_enabled().into(),
            &[&k("enabled"), &k("autoEnabled")],
        );
        add(
            &mut shown,
            &k("reserveTokens"),
            c.reserve_tokens.into(),
            &[&k("reserveTokens")],
        );
        add(
            &mut shown,
            &k("reserveTokensFloor"),
            c.reserve_tokens_floor.into(),
            &[&k("reserveTokensFloor")],
        );
        add(
            &mut shown,
            &k("keepRecentTokens"),
            c.keep_recent_tokens.into(),
            &[&k("preserveRecentTokens"), &k("keepRecentTokens")],
        );
        add(
            &mut shown,
            &k("autoThresholdPercent"),
            json!(c.auto_threshold_percent),
            &[&k("autoThresholdPercent")],
        );
        add(
            &mut shown,
            &k("notifyBeforeAuto"),
            c.notify_before_auto.into(),
            &[&k("notifyBeforeAuto")],
        );
        add(
            &mut shown,
            &k("prune.enabled"),
            c.policy.prune_enabled.into(),
            &[&k("prune.enabled"), &k("prune")],
        );
        // The layered policy's keys, as the policy names them (aliases that can set them first).
        if let Value::Object(policy) = serde_json::to_value(&c.policy).unwrap_or_default() {
            for (name, value) in policy {
                let mut keys = match name.as_str() {
                    "pruneProtectTokens" => vec![k("prune.protectRecentTokens")],
                    "pruneMinimumTokens" => vec![k("prune.pruneMinimumTokens")],
                    "summarizeKeepRecentTokens" => vec![k("preserveRecentTokens")],
                    _ => Vec::new(),
                };
                keys.push(k(&name));
                let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                add(&mut shown, &k(&name), value, &keys);
            }
        }
        add(
            &mut shown,
            &k("tokenCounter"),
            c.token_counter.as_str().into(),
            &[&k("tokenCounter")],
        );
        add(
            &mut shown,
            &k("model"),
            c.model.name().into(),
            &[&k("model")],
        );
        if let ModelConfig::OpenAiCompatible(m) = &c.model {
            for (name, value) in [
                ("baseUrl", json!(m.base_url)),
                ("modelName", json!(m.model_name)),
                ("apiKeyEnv", json!(m.api_key_env)),
                ("temperature", json!(m.temperature)),
                ("maxTokens", json!(m.max_tokens)),
                ("timeoutMs", json!(m.timeout.as_millis() as u64)),
                ("retries", json!(m.retries)),
            ] {
                let key = k(&format!("model.{name}"));
                // The endpoint and the key variable are implied by the provider when not
                // written, the model name by the `"<provider>/<model>"` form; the other values
                // are ctxhost's defaults.
                let (provider, string_form) = (k("model.provider"), k("model"));
                let keys: &[&str] = match name {
                    "baseUrl" | "apiKeyEnv" => &[&key, &provider, &string_form],
                    "modelName" => &[&key, &string_form],
                    _ => &[&key],
                };
                add(&mut shown, &key, value, keys);
            }
            if let Some(variable) = &m.api_key_env {
                let set = std::env::var_os(variable).is_some_and(|v| !v.is_empty());
                shown.push(Shown {
                    key: k("model.apiKey"),
                    value: if set { "set" } else { "not set" }.into(),
                    origin: Origin::Environment {
                        variable: variable.clone(),
                    },
                });
            }
        }
        let flush = &c.memory_flush;
        for (name, value) in [
            ("enabled", json!(flush.enabled)),
            ("softThresholdTokens", json!(flush.soft_threshold_tokens)),
        ] {
            let key = k(&format!("memoryFlush.{name}"));
            add(&mut shown, &key, value, &[&key]);
        }
        let config_origin = match &self.source {
            ConfigSource::Flag(_) => "--config",
            ConfigSource::Env(_) => "environment $CTXHOST_CONFIG",
            ConfigSource::Home(_) => "default ($CTXHOST_HOME/ctxhost.json)",
        }
        .to_string();
        Effective {
            config: file,
            config_origin,
            found: self.found,
            settings: shown,
            auto_threshold_tokens: self.compaction_settings().auto_threshold(),
            unknown_keys: self.unknown_keys(),
        }
    }
}
