//! The engine's thresholds, read from `plugins.entries.checkpoint-manager.config`.
//!
//! A bad value must not take the engine down (it would leave the session without its safety
//! net), so each field falls back to its default on its own, and the caller logs why.

use ctxhost_sdk::serde_json::Value;

/// Thresholds and retention. JSON: `{"gaugePercent":70,"checkpointPercent":80,"retention":5,
/// "dedupePercent":5}`, every key optional; the ranges are those of the plugin's config schema
/// (percentages may be fractional).
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

/// The most checkpoints a session may keep.
pub const MAX_RETENTION: u32 = 100;

impl Config {
    /// Reads the config; returns it with one warning per value that was ignored.
    pub fn from_json(json: &Value) -> (Config, Vec<String>) {
        let defaults = Config::default();
        let mut warnings = Vec::new();
        let mut percent = |key: &str, zero_allowed: bool, default: f64| {
            let Some(value) = json.get(key).filter(|v| !v.is_null()) else {
                return default;
            };
            match value.as_f64() {
                Some(v) if (v > 0.0 || (zero_allowed && v == 0.0)) && v <= 100.0 => v,
                _ => {
                    let range = if zero_allowed { "0..=100" } else { "(0, 100]" };
                    warnings.push(format!(
                        "config: {key} must be a number in {range}, got {value}; using {default}"
                    ));
                    default
                }
            }
        };
        let gauge_percent = percent("gaugePercent", false, defaults.gauge_percent);
        let checkpoint_percent = percent("checkpointPercent", false, defaults.checkpoint_percent);
        let dedupe_percent = percent("dedupePercent", true, defaults.dedupe_percent);
        let retention = match json.get("retention").filter(|v| !v.is_null()) {
            None => defaults.retention,
            Some(value) => match value.as_u64().and_then(|v| u32::try_from(v).ok()) {
                Some(v) if (1..=MAX_RETENTION).contains(&v) => v,
                _ => {
                    warnings.push(format!(
                        "config: retention must be an integer in 1..={MAX_RETENTION}, got {value}; using {}",
                        defaults.retention
                    ));
                    defaults.retention
                }
            },
        };
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

        let (config, warnings) =
            Config::from_json(&json!({"gaugePercent": 90, "checkpointPercent": 85}));
        assert_eq!(config, Config::default());
        assert_eq!(warnings.len(), 1);
    }
}
