//! The engine's thresholds, read from `plugins.entries.checkpoint-manager.config`.
//!
//! A bad value must not take the engine down (it would leave the session without its safety
//! net), so each field falls back to its default on its own, and the caller logs why.

use ctxhost_sdk::serde_json::Value;

/// The plugin's config schema: the one place the keys, their types and their ranges are
/// written. The host validates an operator's config against it (`plugins::bundled_schema`
/// embeds the same file), and [`Config::from_json`] reads its ranges, so the two cannot drift.
pub const SCHEMA: &str = include_str!("../config.schema.json");

/// Thresholds and retention. JSON: `{"gaugePercent":70,"checkpointPercent":80,"retention":5,
/// "dedupePercent":5}`, every key optional, each within its range in [`SCHEMA`] (percentages
/// may be fractional).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Config {
    /// Utilisation (percent of the window) from which the gauge line is shown.
    pub gauge_percent: f64,
    /// Utilisation from which `assemble` writes an `auto-80pct` checkpoint.
    pub checkpoint_percent: f64,
    /// Checkpoints kept per session; older ones are deleted.
    pub retention: u32,
    /// A repeated automatic checkpoint is skipped while the input tokens moved less than this
    /// percentage since the previous one.
    pub dedupe_percent: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            gauge_percent: 70.0,
            checkpoint_percent: 80.0,
            retention: 5,
            dedupe_percent: 5.0,
        }
    }
}

/// One key's type and bounds, as [`SCHEMA`] states them.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Range {
    integer: bool,
    min: f64,
    min_exclusive: bool,
    max: f64,
}

impl Range {
    /// The range of `key` in [`SCHEMA`]. The schema is part of this crate and a unit test reads
    /// every key, so a missing or malformed one is a bug here, not bad input.
    fn of(schema: &Value, key: &str) -> Range {
        let field = &schema["properties"][key];
        let bound = |name: &str| field.get(name).and_then(Value::as_f64);
        let (min, min_exclusive) = match (bound("exclusiveMinimum"), bound("minimum")) {
            (Some(min), _) => (min, true),
            (None, min) => (min.unwrap_or(f64::MIN), false),
        };
        Range {
            integer: field["type"] == "integer",
            min,
            min_exclusive,
            max: bound("maximum").unwrap_or(f64::MAX),
        }
    }

    fn contains(&self, v: f64) -> bool {
        let above = if self.min_exclusive {
            v > self.min
        } else {
            v >= self.min
        };
        above && v <= self.max && (!self.integer || v.fract() == 0.0)
    }

    /// `a number in (0, 100]`, `an integer in 1..=100`.
    fn describe(&self) -> String {
        let kind = if self.integer {
            "an integer"
        } else {
            "a number"
        };
        if self.min_exclusive {
            format!("{kind} in ({}, {}]", self.min, self.max)
        } else {
            format!("{kind} in {}..={}", self.min, self.max)
        }
    }
}

impl Config {
    /// Reads the config; returns it with one warning per value that was ignored.
    pub fn from_json(json: &Value) -> (Config, Vec<String>) {
        let schema: Value =
            ctxhost_sdk::serde_json::from_str(SCHEMA).expect("config.schema.json is valid JSON");
        let defaults = Config::default();
        let mut warnings = Vec::new();
        let mut read = |key: &str, default: f64| {
            let Some(value) = json.get(key).filter(|v| !v.is_null()) else {
                return default;
            };
            let range = Range::of(&schema, key);
            match value.as_f64() {
                Some(v) if range.contains(v) => v,
                _ => {
                    warnings.push(format!(
                        "config: {key} must be {}, got {value}; using {default}",
                        range.describe()
                    ));
                    default
                }
            }
        };
        let gauge_percent = read("gaugePercent", defaults.gauge_percent);
        let checkpoint_percent = read("checkpointPercent", defaults.checkpoint_percent);
        let dedupe_percent = read("dedupePercent", defaults.dedupe_percent);
        // An integer within the schema's range, so the cast is exact.
        let retention = read("retention", f64::from(defaults.retention)) as u32;
        let mut config = Config {
            gauge_percent,
            checkpoint_percent,
            retention,
            dedupe_percent,
        };
        if config.gauge_percent > config.checkpoint_percent {
            warnings.push(format!(
                "config: gaugePercent ({}) is above checkpointPercent ({}); using {} and {}",
                config.gauge_percent,
                config.checkpoint_percent,
                defaults.gauge_percent,
                defaults.checkpoint_percent
            ));
            config.gauge_percent = defaults.gauge_percent;
            config.checkpoint_percent = defaults.checkpoint_percent;
        }
        (config, warnings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxhost_sdk::serde_json::json;

    #[test]
    fn every_key_the_schema_states_has_a_range_and_a_default_within_it() {
        let schema: Value = ctxhost_sdk::serde_json::from_str(SCHEMA).unwrap();
        let mut keys: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "checkpointPercent",
                "dedupePercent",
                "gaugePercent",
                "retention"
            ]
        );
        let d = Config::default();
        for (key, default) in [
            ("gaugePercent", d.gauge_percent),
            ("checkpointPercent", d.checkpoint_percent),
            ("retention", f64::from(d.retention)),
            ("dedupePercent", d.dedupe_percent),
        ] {
            let range = Range::of(&schema, key);
            assert!(
                range.max < f64::MAX && range.min > f64::MIN,
                "{key}: {range:?}"
            );
            assert!(
                range.contains(default),
                "{key}: {default} outside {range:?}"
            );
        }
    }

    #[test]
    fn defaults_overrides_and_bad_values() {
        assert_eq!(Config::from_json(&json!({})), (Config::default(), vec![]));
        let (config, warnings) = Config::from_json(&json!({
            "gaugePercent": 50, "checkpointPercent": 62.5, "retention": 2, "dedupePercent": 0
        }));
        assert!(warnings.is_empty());
        assert_eq!(
            config,
            Config {
                gauge_percent: 50.0,
                checkpoint_percent: 62.5,
                retention: 2,
                dedupe_percent: 0.0
            }
        );

        let (config, warnings) = Config::from_json(&json!({
            "gaugePercent": "high", "checkpointPercent": 101, "retention": 101, "dedupePercent": -1
        }));
        assert_eq!(config, Config::default());
        assert_eq!(warnings.len(), 4, "{warnings:?}");
        assert!(Config::from_json(&json!({"gaugePercent": 0})).1.len() == 1);
        assert!(Config::from_json(&json!({"retention": 0})).1.len() == 1);
        assert!(warnings[0].contains("gaugePercent"), "{warnings:?}");
        assert!(
            warnings[0].contains("a number in (0, 100]")
                && warnings[3].contains("retention must be an integer in 1..=100"),
            "the ranges are the schema's: {warnings:?}"
        );
        assert_eq!(Config::from_json(&json!({"retention": 2.5})).1.len(), 1);

        let (config, warnings) =
            Config::from_json(&json!({"gaugePercent": 90, "checkpointPercent": 85}));
        assert_eq!(config, Config::default());
        assert_eq!(warnings.len(), 1);
    }
}
