//! The engine's knobs, read from `plugins.entries.lossless.config`.
//!
//! The host validates the operator's config against [`SCHEMA`] before the engine starts (the
//! same file, embedded by `plugins::bundled_schema`), so a value that reaches here is in range.
//! A host that did not validate must still not take the session down: an unreadable config is
//! logged and the defaults serve.

use serde::Deserialize;

/// The plugin's config schema: the one place the keys and their ranges are written.
pub const SCHEMA: &str = include_str!("../config.schema.json");

/// How the summary hierarchy is shaped and how the budget is shared.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct Config {
    /// A leaf covers at most this many messages.
    pub leaf_messages: u32,
    /// A leaf closes once its messages reach this many tokens (one huge tool output is a leaf
    /// of its own, so the open leaf stays small enough to keep verbatim).
    pub leaf_tokens: u32,
    /// A parent condenses this many children.
    pub fan_in: u32,
    /// At a re-cut, the share of its target for recent messages kept verbatim; summaries get
    /// the rest (between re-cuts, new messages are appended verbatim).
    pub recent_share: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            leaf_messages: 12,
            leaf_tokens: 4_000,
            fan_in: 4,
            recent_share: 0.5,
        }
    }
}

impl Config {
    /// The config the host handed over, or the defaults and why they serve instead.
    pub fn read() -> (Config, Option<String>) {
        match ctxhost_sdk::config::<Config>() {
            Ok(config) => match config.check() {
                Ok(()) => (config, None),
                Err(problem) => (
                    Config::default(),
                    Some(format!("{problem}; using defaults")),
                ),
            },
            Err(error) => (
                Config::default(),
                Some(format!("{}; using defaults", error.message())),
            ),
        }
    }

    /// The ranges of [`SCHEMA`], for a host that did not check them.
    fn check(&self) -> Result<(), String> {
        let in_range = |key: &str, value: f64| {
            let schema: ctxhost_sdk::serde_json::Value =
                ctxhost_sdk::serde_json::from_str(SCHEMA).expect("config.schema.json is JSON");
            let field = &schema["properties"][key];
            let min = field["minimum"].as_f64().unwrap_or(f64::MIN);
            let max = field["maximum"].as_f64().unwrap_or(f64::MAX);
            if (min..=max).contains(&value) {
                Ok(())
            } else {
                Err(format!(
                    "plugin config `{key}`: {value} is outside {min}..={max}"
                ))
            }
        };
        in_range("leafMessages", f64::from(self.leaf_messages))?;
        in_range("leafTokens", f64::from(self.leaf_tokens))?;
        in_range("fanIn", f64::from(self.fan_in))?;
        in_range("recentShare", self.recent_share)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxhost_sdk::serde_json::{Value, json};
    use ctxhost_sdk::testing::TestHost;

    #[test]
    fn the_schema_names_every_field_and_the_defaults_are_within_it() {
        let schema: Value = ctxhost_sdk::serde_json::from_str(SCHEMA).unwrap();
        let mut keys: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["fanIn", "leafMessages", "leafTokens", "recentShare"]);
        assert_eq!(Config::default().check(), Ok(()));
    }

    #[test]
    fn values_are_read_and_bad_ones_fall_back_to_the_defaults_naming_the_key() {
        let host = TestHost::new().config(json!({"leafMessages": 8, "recentShare": 0.3}));
        let (config, problem) = host.run(Config::read);
        assert_eq!(problem, None);
        assert_eq!((config.leaf_messages, config.recent_share), (8, 0.3));
        assert_eq!(config.fan_in, 4);

        let host = TestHost::new().config(json!({"fanIn": 1}));
        let (config, problem) = host.run(Config::read);
        assert_eq!(config, Config::default());
        assert!(problem.unwrap().contains("`fanIn`: 1 is outside 2..=16"));

        let host = TestHost::new().config(json!({"leafSize": 3}));
        let (config, problem) = host.run(Config::read);
        assert_eq!(config, Config::default());
        assert!(problem.unwrap().contains("leafSize"));
    }
}
