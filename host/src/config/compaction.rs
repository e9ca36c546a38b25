//! `agents.defaults.compaction`: read once, when the config loads, into typed settings — every
//! alias resolved, every range and the model checked — so a bad key fails there, with its
//! path, and nothing later falls back silently.
//!
//! How the keys combine (the README's config section says the same):
//! - `enabled` and `autoEnabled` are one switch (set both only to the same value). Off, no
//!   automatic or overflow compaction runs; `ctxhost compact` still does, and a request that
//!   overflows fails with the overflow error.
//! - `prune: false` skips Phase 1 (the summarize layer runs where prune would have);
//!   `prune: { enabled, protectRecentTokens, pruneMinimumTokens }` is the spec's spelling of
//!   `pruneProtectTokens` and `pruneMinimumTokens` (set one spelling, or both alike).
//! - `preserveRecentTokens` is the recent context every summarizing layer keeps verbatim: it
//!   sets `keepRecentTokens` and `summarizeKeepRecentTokens` (the full layer keeps its own
//!   smaller `fullKeepRecentTokens`, as it exists to free more room).
//! - `autoThresholdPercent` brings automatic compaction forward to that share of the window
//!   when that comes before the reserve threshold; the layer is still picked by
//!   `pruneAt` / `summarizeAt` / `fullAt`, and below `pruneAt` the run summarizes.

use std::ops::RangeInclusive;
use std::path::Path;
use std::time::Duration;

use ctxhost_transcript::compaction::{self, Policy};
use ctxhost_transcript::{Encoding, TokenCounter};
use serde::Deserialize;
use serde_json::Value;

use super::error::ConfigError;
use crate::model::{ModelConfig, OpenAiConfig};

/// Where these keys live.
pub const SECTION: &str = "agents.defaults.compaction";

/// `agents.defaults.compaction`, resolved.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CompactionSettings {
    /// Automatic compaction (pi's name)...
    pub enabled: Option<bool>,
    /// ...or the layered-compaction spec's; resolved into [`CompactionSettings::auto_enabled`].
    pub auto_enabled: Option<bool>,
    /// `reserveTokens`: the response reserve; the threshold is `contextWindow − max(reserveTokens,
    /// reserveTokensFloor)`. Default 16,384.
    pub reserve_tokens: u64,
    /// `reserveTokensFloor`: the least reserve whatever `reserveTokens` says. Default 20,000.
    pub reserve_tokens_floor: u64,
    /// `keepRecentTokens`: the recent context a summary leaves verbatim. Default 20,000.
    pub keep_recent_tokens: u64,
    /// `preserveRecentTokens`: the spec's name for what every summarizing layer keeps; when set it
    /// overrides `keepRecentTokens` and `summarizeKeepRecentTokens`.
    pub preserve_recent_tokens: Option<u64>,
    /// `autoThresholdPercent` (1–100): automatic compaction fires above this share of the window
    /// when that comes before the reserve threshold. None: the reserve threshold alone.
    pub auto_threshold_percent: Option<f64>,
    /// `notifyBeforeAuto`: the runtime is told before each automatic compaction (see
    /// [`crate::auto_compaction`]).
    pub notify_before_auto: bool,
    /// `false`, or `{ enabled, protectRecentTokens, pruneMinimumTokens }`.
    pub prune: Option<PruneSetting>,
    /// `tokenCounter`: how context is measured; chars/4 unless an exact BPE counter is named.
    pub token_counter: TokenCounterSetting,
    /// A name (`"extractive"`, `"openrouter/<model>"`) or an object; checked into
    /// [`CompactionSettings::model`].
    #[serde(rename = "model")]
    pub model_setting: Option<Value>,
    /// The pre-compaction memory-flush signal.
    pub memory_flush: MemoryFlushSettings,
    /// The layered policy, read from this same object (its keys are listed once, on
    /// [`Policy`]), with `prune` applied.
    #[serde(skip)]
    pub policy: Policy,
    /// The summarizer's model, checked.
    #[serde(skip)]
    pub model: ModelConfig,
}

impl Default for CompactionSettings {
    fn default() -> Self {
        Self {
            enabled: None,
            auto_enabled: None,
            reserve_tokens: 16_384,
            reserve_tokens_floor: 20_000,
            keep_recent_tokens: 20_000,
            preserve_recent_tokens: None,
            auto_threshold_percent: None,
            notify_before_auto: false,
            prune: None,
            token_counter: TokenCounterSetting::Chars,
            model_setting: None,
            memory_flush: MemoryFlushSettings::default(),
            policy: Policy::default(),
            model: ModelConfig::Extractive,
        }
    }
}

/// `prune`: a switch, or the spec's object.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum PruneSetting {
    /// `prune: true` or `false`: run Phase 1 or skip it.
    Switch(bool),
    /// The spec's object form.
    Object(PruneObject),
}

/// `prune: { enabled, protectRecentTokens, pruneMinimumTokens }`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PruneObject {
    /// `enabled`: the same switch as `prune: true/false`.
    pub enabled: Option<bool>,
    /// `protectRecentTokens`: the spec's spelling of `pruneProtectTokens`.
    pub protect_recent_tokens: Option<u64>,
    /// `pruneMinimumTokens`: pruning runs only when it would save this many tokens.
    pub prune_minimum_tokens: Option<u64>,
}

/// `tokenCounter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
pub enum TokenCounterSetting {
    /// chars / 4, the default.
    #[default]
    #[serde(rename = "chars")]
    Chars,
    /// OpenAI's `o200k_base` encoding (alias `o200k`).
    #[serde(rename = "o200k_base", alias = "o200k")]
    O200kBase,
    /// OpenAI's `cl100k_base` encoding (alias `cl100k`).
    #[serde(rename = "cl100k_base", alias = "cl100k")]
    Cl100kBase,
}

impl TokenCounterSetting {
    /// The exact counter (None: chars/4). Built at load, so its absence from a build without
    /// BPE vocabularies is reported there.
    pub fn counter(self) -> Option<TokenCounter> {
        let encoding = match self {
            TokenCounterSetting::Chars => return None,
            TokenCounterSetting::O200kBase => Encoding::O200k,
            TokenCounterSetting::Cl100kBase => Encoding::Cl100k,
        };
        TokenCounter::new(encoding)
    }

    /// The name as written in the config (`chars`, `o200k_base`, `cl100k_base`).
    pub fn as_str(self) -> &'static str {
        match self {
            TokenCounterSetting::Chars => "chars",
            TokenCounterSetting::O200kBase => "o200k_base",
            TokenCounterSetting::Cl100kBase => "cl100k_base",
        }
    }
}

/// `agents.defaults.compaction.memoryFlush`: before compaction forgets, the runtime may run a
/// turn that writes durable notes; the session reports once per cycle that one is due.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct MemoryFlushSettings {
    /// `enabled`: whether the session signals a due flush at all. Default true.
    pub enabled: bool,
    /// The signal fires this many tokens before the compaction threshold.
    pub soft_threshold_tokens: u64,
    /// `prompt`: the user message of the flush turn.
    pub prompt: String,
    /// `systemPrompt`: the system prompt of the flush turn.
    pub system_prompt: String,
}

impl Default for MemoryFlushSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            soft_threshold_tokens: 4_000,
            prompt: "Pre-compaction memory flush: the conversation is about to be compacted. \
                     Write anything worth keeping (decisions, open tasks, facts learned) to your \
                     memory files now. Reply with NO_REPLY when nothing needs storing."
                .into(),
            system_prompt: "The session is near its context limit; store durable memories now."
                .into(),
        }
    }
}

/// `model: { provider, modelName, ... }`. The key is never in the config: `apiKeyEnv` names
/// the environment variable that holds it (each provider implies one).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelObject {
    /// `provider`: a name from [`PROVIDERS`].
    pub provider: String,
    /// `baseUrl`: the OpenAI-compatible endpoint; None: the provider's own (required for
    /// `openai-compatible`).
    #[serde(default)]
    pub base_url: Option<String>,
    /// `modelName`: the model to ask, as the provider names it.
    #[serde(default)]
    pub model_name: Option<String>,
    /// `apiKeyEnv`: the environment variable holding the key; None: the provider's own.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// `temperature` (0–2); None: 0.2.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// `maxTokens` (1–1,000,000): the summary's length cap; None: 2,048.
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// `timeoutMs` (100–3,600,000): how long one request may take; None: 120,000.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// `retries` (0–10): how often a failed request is retried; None: 3.
    #[serde(default)]
    pub retries: Option<u32>,
}

/// An OpenAI-compatible provider a user would name: where it answers and which variable holds
/// its key (None: a local server without one). `baseUrl` and `apiKeyEnv` override both.
pub struct Provider {
    /// The name `model.provider` takes.
    pub name: &'static str,
    /// Its OpenAI-compatible endpoint; None when `baseUrl` must be given.
    pub base_url: Option<&'static str>,
    /// The environment variable holding its key; None for a local server.
    pub api_key_env: Option<&'static str>,
}

/// The providers `model.provider` may name. `openai-compatible` needs `baseUrl`.
pub const PROVIDERS: &[Provider] = &[
    Provider {
        name: "openai-compatible",
        base_url: None,
        api_key_env: None,
    },
    Provider {
        name: "openai",
        base_url: Some("https://api.openai.com/v1"),
        api_key_env: Some("OPENAI_API_KEY"),
    },
    Provider {
        name: "openrouter",
        base_url: Some("https://openrouter.ai/api/v1"),
        api_key_env: Some("OPENROUTER_API_KEY"),
    },
    Provider {
        name: "groq",
        base_url: Some("https://api.groq.com/openai/v1"),
        api_key_env: Some("GROQ_API_KEY"),
    },
    Provider {
        name: "together",
        base_url: Some("https://api.together.xyz/v1"),
        api_key_env: Some("TOGETHER_API_KEY"),
    },
    Provider {
        name: "mistral",
        base_url: Some("https://api.mistral.ai/v1"),
        api_key_env: Some("MISTRAL_API_KEY"),
    },
    Provider {
        name: "deepseek",
        base_url: Some("https://api.deepseek.com/v1"),
        api_key_env: Some("DEEPSEEK_API_KEY"),
    },
    Provider {
        name: "fireworks",
        base_url: Some("https://api.fireworks.ai/inference/v1"),
        api_key_env: Some("FIREWORKS_API_KEY"),
    },
    Provider {
        name: "xai",
        base_url: Some("https://api.x.ai/v1"),
        api_key_env: Some("XAI_API_KEY"),
    },
    Provider {
        name: "ollama",
        base_url: Some("http://127.0.0.1:11434/v1"),
        api_key_env: None,
    },
    Provider {
        name: "lmstudio",
        base_url: Some("http://127.0.0.1:1234/v1"),
        api_key_env: None,
    },
    Provider {
        name: "vllm",
        base_url: Some("http://127.0.0.1:8000/v1"),
        api_key_env: None,
    },
];

/// The provider called `name`, if ctxhost knows it.
pub fn provider(name: &str) -> Option<&'static Provider> {
    PROVIDERS.iter().find(|p| p.name == name)
}

/// A problem with one key, before the file path is attached.
struct Problem {
    field: String,
    message: String,
}

fn problem(field: impl Into<String>, message: impl Into<String>) -> Problem {
    Problem {
        field: format!("{SECTION}.{}", field.into()),
        message: message.into(),
    }
}

impl CompactionSettings {
    /// Resolves what serde read: the policy from the same object, the aliases, the ranges and
    /// the model. `object` is the raw `agents.defaults.compaction` (None: absent).
    pub(super) fn resolve(
        &mut self,
        object: Option<&Value>,
        path: &Path,
    ) -> Result<(), ConfigError> {
        self.resolve_inner(object).map_err(|p| ConfigError::Field {
            path: path.to_path_buf(),
            line: None,
            field: p.field,
            message: p.message,
        })
    }

    fn resolve_inner(&mut self, object: Option<&Value>) -> Result<(), Problem> {
        let empty = Value::Object(Default::default());
        let object = object.unwrap_or(&empty);
        self.policy = serde_path_to_error::deserialize(object).map_err(|e| Problem {
            field: format!("{SECTION}.{}", e.path()),
            message: e.inner().to_string(),
        })?;
        self.check_one_switch()?;
        self.resolve_prune(object)?;
        self.resolve_preserve_recent(object)?;
        self.check_ranges()?;
        self.check_token_counter()?;
        self.model = model_config(self.model_setting.as_ref())?;
        Ok(())
    }

    /// `enabled` and `autoEnabled` are one switch: both set, they must agree.
    fn check_one_switch(&self) -> Result<(), Problem> {
        match (self.enabled, self.auto_enabled) {
            (Some(a), Some(b)) if a != b => Err(problem(
                "autoEnabled",
                format!("contradicts `{SECTION}.enabled` ({a}); they are one switch, set one"),
            )),
            _ => Ok(()),
        }
    }

    /// `prune`: a switch, or the spec's object spelling of the flat prune keys.
    fn resolve_prune(&mut self, object: &Value) -> Result<(), Problem> {
        let prune = match &self.prune {
            None => return Ok(()),
            Some(PruneSetting::Switch(on)) => {
                self.policy.prune_enabled = *on;
                return Ok(());
            }
            Some(PruneSetting::Object(prune)) => prune.clone(),
        };
        self.policy.prune_enabled = prune.enabled.unwrap_or(true);
        let policy = &mut self.policy;
        if let Some(value) = prune.protect_recent_tokens {
            let (field, flat) = ("prune.protectRecentTokens", "pruneProtectTokens");
            set_alias(object, field, flat, value, &mut policy.prune_protect_tokens)?;
        }
        if let Some(value) = prune.prune_minimum_tokens {
            let (field, flat) = ("prune.pruneMinimumTokens", "pruneMinimumTokens");
            set_alias(object, field, flat, value, &mut policy.prune_minimum_tokens)?;
        }
        Ok(())
    }

    /// `preserveRecentTokens`: what every summarizing layer keeps verbatim.
    fn resolve_preserve_recent(&mut self, object: &Value) -> Result<(), Problem> {
        let Some(value) = self.preserve_recent_tokens else {
            return Ok(());
        };
        let field = "preserveRecentTokens";
        let keep = &mut self.keep_recent_tokens;
        set_alias(object, field, "keepRecentTokens", value, keep)?;
        let keep = &mut self.policy.summarize_keep_recent_tokens;
        set_alias(object, field, "summarizeKeepRecentTokens", value, keep)
    }

    fn check_ranges(&self) -> Result<(), Problem> {
        let p = &self.policy;
        for (key, value) in [
            ("pruneAt", p.prune_at),
            ("summarizeAt", p.summarize_at),
            ("fullAt", p.full_at),
        ] {
            if !(value > 0.0 && value <= 1.0) {
                return Err(problem(
                    key,
                    format!("{value} is out of range (a share of the window, above 0 up to 1)"),
                ));
            }
        }
        if self.preserve_recent_tokens == Some(0) {
            return Err(problem(
                "preserveRecentTokens",
                "0 is out of range (at least 1)",
            ));
        }
        check_range(
            "autoThresholdPercent",
            self.auto_threshold_percent,
            1.0..=100.0,
        )
    }

    /// A BPE counter needs the vocabularies compiled in.
    fn check_token_counter(&self) -> Result<(), Problem> {
        if self.token_counter != TokenCounterSetting::Chars
            && self.token_counter.counter().is_none()
        {
            return Err(problem(
                "tokenCounter",
                "this build has no BPE vocabularies (feature `bpe`); use \"chars\"",
            ));
        }
        Ok(())
    }

    /// Whether automatic compaction is on (`enabled` / `autoEnabled`, default true).
    pub fn auto_enabled(&self) -> bool {
        self.enabled.or(self.auto_enabled).unwrap_or(true)
    }

    /// The transcript crate's settings for a window.
    pub fn settings(&self, context_window: u64) -> compaction::Settings {
        compaction::Settings {
            context_window,
            reserve_tokens: self.reserve_tokens,
            reserve_tokens_floor: self.reserve_tokens_floor,
            keep_recent_tokens: self.keep_recent_tokens,
            auto_enabled: self.auto_enabled(),
            auto_threshold_ratio: self.auto_threshold_percent.map(|p| p / 100.0),
            notify_before_auto: self.notify_before_auto,
            policy: self.policy.clone(),
        }
    }
}

/// Sets `current`, the key `flat` of the object, to `value`, which `field` (another spelling
/// of it) gave; when the object sets `flat` too, the two must agree.
fn set_alias(
    object: &Value,
    field: &str,
    flat: &str,
    value: u64,
    current: &mut u64,
) -> Result<(), Problem> {
    if object.get(flat).is_some() && *current != value {
        return Err(problem(
            field,
            format!("{value} contradicts `{SECTION}.{flat}` ({current}); set one of them"),
        ));
    }
    *current = value;
    Ok(())
}

/// `value`, when set, within `range`.
fn check_range<T: PartialOrd + std::fmt::Display>(
    field: &str,
    value: Option<T>,
    range: RangeInclusive<T>,
) -> Result<(), Problem> {
    match value {
        Some(value) if !range.contains(&value) => Err(problem(
            field,
            format!(
                "{value} is out of range ({} to {})",
                range.start(),
                range.end()
            ),
        )),
        _ => Ok(()),
    }
}

/// `model` as written: None for the extractive summarizer (absent, `"extractive"`, or an object
/// naming it as its provider), else `"<provider>/<model name>"` or an object, read.
fn model_object(setting: Option<&Value>) -> Result<Option<ModelObject>, Problem> {
    let object = match setting {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(name)) if name == "extractive" => return Ok(None),
        Some(Value::String(name)) => model_named(name)?,
        Some(value @ Value::Object(_)) => serde_path_to_error::deserialize(value).map_err(|e| {
            let inner = e.path().to_string();
            Problem {
                field: match inner.as_str() {
                    "." => format!("{SECTION}.model"),
                    _ => format!("{SECTION}.model.{inner}"),
                },
                message: e.inner().to_string(),
            }
        })?,
        Some(other) => {
            return Err(problem(
                "model",
                format!("expected a string or an object, found {other}"),
            ));
        }
    };
    Ok(Some(object).filter(|object| object.provider != "extractive"))
}

/// `model: "<provider>/<model name>"`, as the object it abbreviates.
fn model_named(name: &str) -> Result<ModelObject, Problem> {
    let (provider_name, model_name) = name.split_once('/').ok_or_else(|| {
        problem(
            "model",
            format!(
                "unknown model `{name}`: use \"extractive\", \"<provider>/<model>\" (e.g. \"openrouter/meta-llama/llama-3.1-8b-instruct\") or an object with provider and modelName"
            ),
        )
    })?;
    Ok(ModelObject {
        provider: provider_name.to_string(),
        base_url: None,
        model_name: Some(model_name.to_string()),
        api_key_env: None,
        temperature: None,
        max_tokens: None,
        timeout_ms: None,
        retries: None,
    })
}

/// `model`, checked: `"extractive"`, `"<provider>/<model name>"`, or an object.
fn model_config(setting: Option<&Value>) -> Result<ModelConfig, Problem> {
    let Some(object) = model_object(setting)? else {
        return Ok(ModelConfig::Extractive);
    };
    let provider = known_provider(&object.provider)?;
    let base_url = base_url(&object, provider)?;
    let model_name = (object.model_name.clone())
        .filter(|m| !m.is_empty())
        .ok_or_else(|| problem("model.modelName", "is required"))?;
    check_model_ranges(&object)?;
    let defaults = OpenAiConfig::default();
    Ok(ModelConfig::OpenAiCompatible(OpenAiConfig {
        base_url,
        model_name,
        api_key_env: (object.api_key_env.clone())
            .or_else(|| provider.api_key_env.map(str::to_string)),
        temperature: object.temperature.or(defaults.temperature),
        max_tokens: object.max_tokens.unwrap_or(defaults.max_tokens),
        timeout: (object.timeout_ms).map_or(defaults.timeout, Duration::from_millis),
        retries: object.retries.unwrap_or(defaults.retries),
        ..defaults
    }))
}

/// The provider called `name`, or an error listing the known ones (the closest first).
fn known_provider(name: &str) -> Result<&'static Provider, Problem> {
    provider(name).ok_or_else(|| {
        let names: Vec<&str> = PROVIDERS.iter().map(|p| p.name).collect();
        let hint = super::spelling::closest(name, &names)
            .map(|n| format!("did you mean `{n}`? "))
            .unwrap_or_default();
        problem(
            "model.provider",
            format!(
                "unknown provider `{name}`: {hint}known: extractive, {}",
                names.join(", ")
            ),
        )
    })
}

/// The model's endpoint: its own `baseUrl`, else the provider's; an http(s) URL either way.
fn base_url(object: &ModelObject, provider: &Provider) -> Result<String, Problem> {
    let base_url = (object.base_url.clone())
        .or_else(|| provider.base_url.map(str::to_string))
        .ok_or_else(|| {
            problem(
                "model.baseUrl",
                format!("provider `{}` needs a baseUrl", provider.name),
            )
        })?;
    if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
        return Err(problem(
            "model.baseUrl",
            format!("`{base_url}` is not an http:// or https:// URL"),
        ));
    }
    Ok(base_url)
}

/// The model's numeric settings within their ranges.
fn check_model_ranges(object: &ModelObject) -> Result<(), Problem> {
    check_range("model.temperature", object.temperature, 0.0..=2.0)?;
    check_range("model.maxTokens", object.max_tokens, 1..=1_000_000)?;
    check_range("model.timeoutMs", object.timeout_ms, 100..=3_600_000)?;
    check_range("model.retries", object.retries, 0..=10)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn compaction(text: &str) -> Result<CompactionSettings, String> {
        Config::from_str(
            &format!("{{ agents: {{ defaults: {{ compaction: {{ {text} }} }} }} }}"),
            Path::new("/etc/ctxhost.json"),
        )
        .map(|c| c.settings.agents.defaults.compaction)
        .map_err(|e| e.to_string())
    }

    #[test]
    fn the_policy_is_read_from_the_same_object_once() {
        let c = compaction("pruneAt: 0.7, fullKeepRecentTokens: 1234, reserveTokens: 10").unwrap();
        assert_eq!(c.policy.prune_at, 0.7);
        assert_eq!(c.policy.full_keep_recent_tokens, 1234);
        assert_eq!(c.reserve_tokens, 10);
        assert_eq!(c.policy.summarize_at, Policy::default().summarize_at);
        let err = compaction("pruneAt: 'high'").unwrap_err();
        assert!(err.contains("agents.defaults.compaction.pruneAt"), "{err}");
    }

    #[test]
    fn aliases_resolve_and_contradictions_are_refused() {
        let c = compaction("autoEnabled: false, preserveRecentTokens: 7000").unwrap();
        assert!(!c.auto_enabled());
        assert_eq!(c.keep_recent_tokens, 7000);
        assert_eq!(c.policy.summarize_keep_recent_tokens, 7000);
        assert_eq!(
            c.policy.full_keep_recent_tokens, 15_000,
            "full keeps its own"
        );
        let err = compaction("enabled: true, autoEnabled: false").unwrap_err();
        assert!(err.contains("contradicts"), "{err}");
        let err = compaction("preserveRecentTokens: 7000, keepRecentTokens: 8000").unwrap_err();
        assert!(err.contains("preserveRecentTokens"), "{err}");
        let c = compaction("prune: false").unwrap();
        assert!(!c.policy.prune_enabled);
        let c = compaction("prune: { protectRecentTokens: 5, pruneMinimumTokens: 6 }").unwrap();
        assert!(c.policy.prune_enabled);
        assert_eq!(
            (c.policy.prune_protect_tokens, c.policy.prune_minimum_tokens),
            (5, 6)
        );
        let err = compaction("prune: 'yes'").unwrap_err();
        assert!(err.contains("agents.defaults.compaction.prune"), "{err}");
    }

    #[test]
    fn providers_imply_their_endpoint_and_key_variable() {
        let openai = |c: CompactionSettings| match c.model {
            ModelConfig::OpenAiCompatible(m) => m,
            other => panic!("{other:?}"),
        };
        let m = openai(compaction("model: 'openrouter/meta-llama/llama-3.1-8b-instruct'").unwrap());
        assert_eq!(m.base_url, "https://openrouter.ai/api/v1");
        assert_eq!(m.model_name, "meta-llama/llama-3.1-8b-instruct");
        assert_eq!(m.api_key_env.as_deref(), Some("OPENROUTER_API_KEY"));
        let m = openai(
            compaction(
                "model: { provider: 'ollama', modelName: 'qwen', maxTokens: 99, temperature: 0 }",
            )
            .unwrap(),
        );
        assert_eq!(m.base_url, "http://127.0.0.1:11434/v1");
        assert_eq!(m.api_key_env, None);
        assert_eq!((m.max_tokens, m.temperature), (99, Some(0.0)));
        let m = openai(
            compaction("model: { provider: 'groq', modelName: 'x', baseUrl: 'http://127.0.0.1:9/v1', apiKeyEnv: 'MY_KEY' }")
                .unwrap(),
        );
        assert_eq!(m.base_url, "http://127.0.0.1:9/v1");
        assert_eq!(m.api_key_env.as_deref(), Some("MY_KEY"));
        assert_eq!(
            compaction("model: 'extractive'").unwrap().model,
            ModelConfig::Extractive
        );
        let err =
            compaction("model: { provider: 'openai-compatible', modelName: 'x' }").unwrap_err();
        assert!(err.contains("model.baseUrl"), "{err}");
        let err =
            compaction("model: { provider: 'openai', modelName: 'x', apiKey: 'sk' }").unwrap_err();
        assert!(err.contains("unknown field `apiKey`"), "{err}");
        let err = compaction("model: { provider: 'openai' }").unwrap_err();
        assert!(err.contains("model.modelName"), "{err}");
    }
}
