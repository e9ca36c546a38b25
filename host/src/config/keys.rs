//! No silent keys: every key under a section ctxhost reads is either one it knows, one it
//! deliberately leaves to OpenClaw ([`OPENCLAW_KEYS`], the one list of them), or reported with
//! its path and, when it looks like a known key, the likely intended one.
//!
//! The known keys of a section are the fields of the struct that reads it (asked of serde, so
//! the list cannot drift from the code).

use serde::Deserialize;
use serde::de::{self, Visitor};
use serde_json::Value;

use super::compaction::{CompactionSettings, PruneObject};
use super::settings::{
    AgentDefaults, AgentsSettings, PluginEntry, PluginsSettings, RecallSettings, Settings, Slots,
};
use super::spelling::closest;
use ctxhost_transcript::compaction::Policy;

/// Keys that belong to OpenClaw (or another runtime sharing `openclaw.json`), by section
/// (`*` stands for any one key, e.g. a plugin id). ctxhost leaves them to the runtime and does
/// not warn about them.
pub const OPENCLAW_KEYS: &[(&str, &[&str])] = &[
    (
        "",
        &[
            "$schema",
            "meta",
            "env",
            "wizard",
            "logging",
            "update",
            "browser",
            "ui",
            "auth",
            "models",
            "messages",
            "commands",
            "session",
            "channels",
            "gateway",
            "hooks",
            "skills",
            "tools",
            "cron",
            "web",
            "discovery",
            "talk",
            "bindings",
            "broadcast",
            "audio",
            "canvasHost",
            "diagnostics",
            "approvals",
            "secrets",
            "memory",
            "acp",
            "nodeHost",
            "media",
        ],
    ),
    ("plugins", &["enabled", "allow", "deny", "load", "installs"]),
    ("plugins.slots", &["memory"]),
    ("plugins.entries.*", &["hooks", "apiKey", "env"]),
    ("agents", &["list"]),
    (
        "agents.defaults",
        &[
            "models",
            "imageModel",
            "heartbeat",
            "contextPruning",
            "contextTokens",
            "blockStreamingDefault",
            "blockStreamingBreak",
            "blockStreamingChunk",
            "blockStreamingCoalesce",
            "typingMode",
            "typingIntervalSeconds",
            "sandbox",
            "subagents",
            "thinkingDefault",
            "verboseDefault",
            "elevatedDefault",
            "timeoutSeconds",
            "mediaMaxMb",
            "userTimezone",
            "timeFormat",
            "skipBootstrap",
            "humanDelay",
            "maxConcurrent",
            "memorySearch",
            "cliBackends",
            "repoRoot",
            "envelopeTimezone",
            "envelopeTimestamp",
            "envelopeElapsed",
            "bootstrapTotalMaxChars",
            "params",
        ],
    ),
    (
        "agents.defaults.compaction",
        &[
            "mode",
            "identifierPolicy",
            "identifierInstructions",
            "timeoutSeconds",
            "customInstructions",
            "qualityGuard",
            "postCompactionSections",
        ],
    ),
];

/// A key ctxhost does not know, in a section it reads.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnknownKey {
    /// Its dotted path, e.g. `agents.defaults.compaction.autoEnabeld`.
    pub path: String,
    /// The known key it most likely means, when one is close.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub did_you_mean: Option<String>,
    /// The line it is written on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
}

impl std::fmt::Display for UnknownKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown key `{}`", self.path)?;
        if let Some(line) = self.line {
            write!(f, " (line {line})")?;
        }
        match &self.did_you_mean {
            Some(known) => write!(f, ": did you mean `{known}`?"),
            None => write!(f, ": ctxhost does not read it"),
        }
    }
}

/// The field names serde reads for `T` (a derived struct), asked by a probe deserializer.
pub fn fields_of<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    struct Probe(Option<&'static [&'static str]>);
    impl<'de> de::Deserializer<'de> for &mut Probe {
        type Error = de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("probe"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            self.0 = Some(fields);
            Err(de::Error::custom("probe"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }
    let mut probe = Probe(None);
    let _ = T::deserialize(&mut probe);
    probe.0.unwrap_or(&[])
}

/// The sections ctxhost reads, each with the keys it knows there.
fn sections() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut compaction = fields_of::<CompactionSettings>().to_vec();
    compaction.extend_from_slice(fields_of::<Policy>());
    vec![
        ("", fields_of::<Settings>().to_vec()),
        ("plugins", fields_of::<PluginsSettings>().to_vec()),
        ("plugins.slots", fields_of::<Slots>().to_vec()),
        ("plugins.entries.*", fields_of::<PluginEntry>().to_vec()),
        ("agents", fields_of::<AgentsSettings>().to_vec()),
        ("recall", fields_of::<RecallSettings>().to_vec()),
        ("agents.defaults", fields_of::<AgentDefaults>().to_vec()),
        ("agents.defaults.compaction", compaction),
        (
            "agents.defaults.compaction.prune",
            fields_of::<PruneObject>().to_vec(),
        ),
    ]
}

/// Every key under the sections ctxhost reads that it neither knows nor leaves to OpenClaw.
/// `lines` locates them (see [`super::locate::key_lines`]).
pub fn unknown_keys(
    raw: &Value,
    lines: &std::collections::HashMap<String, usize>,
) -> Vec<UnknownKey> {
    let mut out = Vec::new();
    for (section, known) in sections() {
        let openclaw = openclaw_keys(section);
        for (path, object) in objects_at(raw, section) {
            let unknown = (object.keys())
                .filter(|key| !known.contains(&key.as_str()) && !openclaw.contains(&key.as_str()));
            for key in unknown {
                let path = joined(&path, key);
                out.push(UnknownKey {
                    line: lines.get(&path).copied(),
                    did_you_mean: closest(key, &known),
                    path,
                });
            }
        }
    }
    out
}

/// The keys of `section` that OpenClaw reads and ctxhost leaves alone.
fn openclaw_keys(section: &str) -> &'static [&'static str] {
    (OPENCLAW_KEYS.iter())
        .find(|(s, _)| *s == section)
        .map_or(&[], |(_, keys)| keys)
}

/// `key` under the dotted `path` (the root's path is empty).
fn joined(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The objects a section pattern names in `raw`, with their concrete paths.
fn objects_at<'a>(
    raw: &'a Value,
    section: &str,
) -> Vec<(String, &'a serde_json::Map<String, Value>)> {
    let mut found = vec![(String::new(), raw)];
    for part in section.split('.').filter(|p| !p.is_empty()) {
        found = (found.into_iter())
            .flat_map(|(path, value)| members(&path, value, part))
            .collect();
    }
    found
        .into_iter()
        .filter_map(|(path, value)| value.as_object().map(|map| (path, map)))
        .collect()
}

/// The members of `value` (at `path`) that `part` of a section pattern names: the one called
/// `part`, or every member for `*`.
fn members<'a>(path: &str, value: &'a Value, part: &str) -> Vec<(String, &'a Value)> {
    let Some(map) = value.as_object() else {
        return Vec::new();
    };
    match part {
        "*" => map.iter().map(|(k, v)| (joined(path, k), v)).collect(),
        key => (map.get(key).map(|v| (joined(path, key), v)).into_iter()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_keys_come_from_the_structs() {
        let compaction = fields_of::<CompactionSettings>();
        assert!(compaction.contains(&"autoEnabled"), "{compaction:?}");
        assert!(fields_of::<Policy>().contains(&"pruneAt"));
        assert!(
            !fields_of::<Policy>().contains(&"parts"),
            "not an operator key"
        );
        assert_eq!(fields_of::<Settings>(), &["plugins", "agents", "recall"]);
    }
}
