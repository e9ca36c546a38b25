//! The engine's configuration, typed.

use crate::error::{Error, Result};
use crate::host;

/// The engine's configuration (`plugins.entries.<id>.config`) as `T`. The host validated it
/// against the plugin's `configSchema` already; a mismatch with `T` names the field:
///
/// ```no_run
/// #[derive(serde::Deserialize)]
/// struct Config {
///     #[serde(default = "fifty")]
///     keep: usize,
/// }
/// fn fifty() -> usize { 50 }
/// # fn f() -> ctxhost_sdk::Result<()> {
/// let config: Config = ctxhost_sdk::config()?;
/// # Ok(()) }
/// ```
pub fn config<T: serde::de::DeserializeOwned>() -> Result<T> {
    parse_config(&host::config_json())
}

fn parse_config<T: serde::de::DeserializeOwned>(text: &str) -> Result<T> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        let mut message = error.into_inner().to_string();
        // The position is in the host's one-line rendering, meaningless to the operator.
        if let Some(at) = message.find(" at line ") {
            message.truncate(at);
        }
        if path == "." {
            Error::msg(format!("plugin config: {message}"))
        } else {
            Error::msg(format!("plugin config `{path}`: {message}"))
        }
    })
}

#[cfg(test)]
mod tests {
    #[derive(Debug, serde::Deserialize, PartialEq)]
    #[serde(rename_all = "camelCase")]
    struct Config {
        #[serde(default)]
        keep_last: u32,
        labels: Option<Vec<String>>,
    }

    #[test]
    fn typed_config_reads_fields_and_names_the_bad_one() {
        let test_host = crate::testing::TestHost::new()
            .config(serde_json::json!({"keepLast": 3, "labels": ["a"]}));
        let config: Config = test_host.run(crate::config::config).unwrap();
        assert_eq!(config.keep_last, 3);
        let empty: Config = super::parse_config("{}").unwrap();
        assert_eq!(
            empty,
            Config {
                keep_last: 0,
                labels: None
            }
        );
        let error = super::parse_config::<Config>(r#"{"labels": ["a", 7]}"#).unwrap_err();
        assert_eq!(
            error.message(),
            "plugin config `labels[1]`: invalid type: integer `7`, expected a string"
        );
        let error = super::parse_config::<Config>("[1]").unwrap_err();
        assert!(
            error.message().starts_with("plugin config: invalid"),
            "{error:?}"
        );
    }
}
