//! `plugins list`: every engine with its state, as lines or typed JSON.

use std::process::ExitCode;

use ctxhost::Host;
use ctxhost::plugins::{Capability, EngineSource};
use schemars::JsonSchema;
use serde::Serialize;

use crate::cli::output::print_json;
use crate::cli::output::stdout_line;

/// `ctxhost plugins list --json` (docs/cli-json/plugins-list.schema.json). Every output
/// type denies unknown fields, so its schema does too: a field added without the schema
/// fails the output's validation test.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PluginsList {
    /// Every engine the registry holds, bundled first.
    engines: Vec<Row>,
    /// Plugin folders that could not be read as a package, with why.
    broken: Vec<BrokenFolder>,
}

/// One engine and its state.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Row {
    id: String,
    /// The manifest's version (a bundled engine's is the binary's); null when it has none.
    version: Option<String>,
    /// `bundled`, `installed` or `linked`.
    source: &'static str,
    /// The package folder; null for a bundled engine.
    path: Option<String>,
    enabled: bool,
    /// The engine the config's slot selects.
    active: bool,
    /// The contract version its component implements; null when it cannot be read (`error`).
    contract: Option<String>,
    /// Why its component cannot be loaded; null when it can.
    error: Option<String>,
    /// Capabilities its manifest asks for.
    requested: Vec<&'static str>,
    /// Those of them the operator granted.
    granted: Vec<&'static str>,
}

/// A plugin folder the registry could not read.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct BrokenFolder {
    folder: String,
    error: String,
}

fn names(capabilities: impl IntoIterator<Item = Capability>) -> Vec<&'static str> {
    capabilities.into_iter().map(Capability::name).collect()
}

pub(super) fn list(host: &Host, json: bool) -> anyhow::Result<ExitCode> {
    let rows: Vec<Row> = host.registry().all().map(|e| row_of(host, e)).collect();
    if json {
        let broken = (host.registry().broken.iter())
            .map(|(folder, e)| BrokenFolder {
                folder: folder.to_string(),
                error: e.to_string(),
            })
            .collect();
        print_json(&PluginsList {
            engines: rows,
            broken,
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    rows.iter().for_each(print_row);
    for (folder, error) in &host.registry().broken {
        stdout_line!("! {folder:<20} BROKEN: {error}");
    }
    Ok(ExitCode::SUCCESS)
}

/// One engine's state as `plugins list` reports it (its component read, not compiled).
fn row_of(host: &Host, engine: &ctxhost::plugins::AvailableEngine) -> Row {
    let requested = engine.capabilities().to_vec();
    let ungranted = host.ungranted(&engine.id, &requested);
    let granted = requested.iter().copied().filter(|c| !ungranted.contains(c));
    let contract = engine
        .component_bytes()
        .map_err(|e| e.to_string())
        .and_then(|bytes| {
            host.runtime()
                .contract_of(&engine.origin(), &bytes)
                .map_err(|e| ctxhost::error::chain(&e))
        });
    let (contract, error) = match contract {
        Ok(version) => (Some(version), None),
        Err(e) => (None, Some(e)),
    };
    let bundled_version = || {
        engine
            .is_bundled()
            .then(|| env!("CARGO_PKG_VERSION").to_string())
    };
    Row {
        id: engine.id.clone(),
        version: (engine.manifest.as_ref())
            .and_then(|m| m.version.clone())
            .or_else(bundled_version),
        source: engine.kind(),
        path: match &engine.source {
            EngineSource::Bundled(_) => None,
            EngineSource::Installed { dir } | EngineSource::Linked { dir } => {
                Some(dir.display().to_string())
            }
        },
        enabled: host
            .config()
            .plugin_entry(&engine.id)
            .and_then(|e| e.enabled)
            != Some(false),
        active: engine.id == host.config().active_engine(),
        contract,
        error,
        granted: names(granted),
        requested: names(requested),
    }
}

/// One engine's lines of the terminal listing.
fn print_row(row: &Row) {
    let marker = if row.active { "*" } else { " " };
    let contract = match (&row.contract, &row.error) {
        (Some(version), _) => format!("contract {version}"),
        (None, e) => format!("BROKEN: {}", e.as_deref().unwrap_or("unreadable")),
    };
    let path = row.path.as_ref().map(|p| format!("  {p}"));
    stdout_line!(
        "{marker} {:<20} {:<8} {:<9} {:<8} {}{}",
        row.id,
        row.version.as_deref().unwrap_or("-"),
        row.source,
        if row.enabled { "enabled" } else { "disabled" },
        contract,
        path.unwrap_or_default()
    );
    if !row.requested.is_empty() {
        let granted = match row.granted.is_empty() {
            true => "none".to_string(),
            false => row.granted.join(", "),
        };
        stdout_line!(
            "    capabilities: requested {}; granted {granted}",
            row.requested.join(", ")
        );
    }
    let missing: Vec<&str> = (row.requested.iter().copied())
        .filter(|c| !row.granted.contains(c))
        .collect();
    if !missing.is_empty() {
        stdout_line!(
            "    not granted: {} (grant in plugins.entries.{}.grants)",
            missing.join(", "),
            row.id
        );
    }
}
