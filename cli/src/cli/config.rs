//! `ctxhost config show [--json]`: the effective settings after defaults, each with where its
//! value came from, and the keys ctxhost does not know.

use std::process::ExitCode;

use ctxhost::config::Config;
use serde_json::Value;

use super::output::{Out, print_json};

#[derive(clap::Subcommand)]
pub(super) enum ConfigCommand {
    /// The effective settings and where each value came from (default, file:line, environment).
    Show {
        #[arg(long)]
        json: bool,
    },
}

pub(super) fn run(config: &Config, command: ConfigCommand) -> anyhow::Result<ExitCode> {
    match command {
        ConfigCommand::Show { json } => show(config, json),
    }
}

fn show(config: &Config, json: bool) -> anyhow::Result<ExitCode> {
    let effective = config.effective();
    if json {
        print_json(&effective)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = Out::new();
    out.line(format!(
        "config  {} ({}{})",
        effective.config,
        effective.config_origin,
        if effective.found {
            ""
        } else {
            "; not found, defaults apply"
        }
    ));
    let width = effective
        .settings
        .iter()
        .map(|s| s.key.len())
        .max()
        .unwrap_or(0);
    for shown in &effective.settings {
        let value = match &shown.value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        out.line(format!(
            "{:<width$}  {value}  [{}]",
            shown.key, shown.origin
        ));
    }
    out.line(format!(
        "automatic compaction fires above {} tokens of the configured window",
        effective.auto_threshold_tokens
    ));
    for unknown in &effective.unknown_keys {
        out.line(format!("warning: {unknown}"));
    }
    Ok(ExitCode::SUCCESS)
}
