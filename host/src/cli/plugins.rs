//! `ctxhost plugins …`: list, install (copy or link), uninstall, enable, disable, use, new.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use ctxhost::Host;
use ctxhost::plugin_ops;
use ctxhost::plugins::{Capability, EngineSource};
use serde::Serialize;

use super::output::print_json;

#[derive(Subcommand)]
pub enum PluginsCommand {
    /// Every engine, bundled and installed, with its state and capabilities.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Validates a plugin package folder completely, then installs it.
    Install {
        /// The package folder (with ctxhost.plugin.json).
        path: PathBuf,
        /// Record the folder instead of copying it: rebuilds are picked up without reinstalling.
        #[arg(short = 'l', long)]
        link: bool,
        /// Replace an installed plugin of the same id.
        #[arg(long)]
        force: bool,
    },
    /// Removes an installed plugin (its state dir is kept unless --purge).
    Uninstall {
        id: String,
        /// Also delete $CTXHOST_HOME/state/<id>/.
        #[arg(long, conflicts_with = "keep_state")]
        purge: bool,
        /// Keep $CTXHOST_HOME/state/<id>/ (the default).
        #[arg(long)]
        keep_state: bool,
    },
    Enable {
        id: String,
    },
    Disable {
        id: String,
    },
    /// Selects the context engine (plugins.slots.contextEngine).
    Use {
        id: String,
    },
    /// Scaffolds a Rust engine project in ./NAME.
    New {
        name: String,
        /// Where ctxhost-sdk lives (default: the sdk/ this ctxhost was built from).
        #[arg(long, value_name = "PATH")]
        sdk: Option<PathBuf>,
    },
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Row {
    id: String,
    version: Option<String>,
    source: &'static str,
    path: Option<String>,
    enabled: bool,
    active: bool,
    contract: Result<String, String>,
    requested: Vec<&'static str>,
    granted: Vec<&'static str>,
}

pub async fn run(host: Host, command: PluginsCommand) -> anyhow::Result<ExitCode> {
    match command {
        PluginsCommand::List { json } => list(&host, json),
        PluginsCommand::Install { path, link, force } => {
            let path = std::fs::canonicalize(&path).unwrap_or(path);
            let package = plugin_ops::install(&host, &path, link, force).await?;
            let how = if link { "linked" } else { "installed" };
            println!(
                "{how} `{}` {} (contract {}) from {}",
                package.id,
                package.engine_version,
                package.contract_version,
                path.display()
            );
            println!("select it with: ctxhost plugins use {}", package.id);
            Ok(ExitCode::SUCCESS)
        }
        PluginsCommand::Uninstall { id, purge, .. } => {
            let done = plugin_ops::uninstall(&host, &id, purge)?;
            println!("uninstalled `{id}`");
            if done.slot_reset {
                println!("it was the active engine: plugins.slots.contextEngine is now `legacy`");
            }
            match &done.kept_state {
                Some(dir) => println!(
                    "its state is kept in {} (--purge deletes it)",
                    dir.display()
                ),
                None if purge => println!("its state was deleted"),
                None => {}
            }
            Ok(ExitCode::SUCCESS)
        }
        PluginsCommand::Enable { id } => {
            plugin_ops::set_enabled(&host, &id, true)?;
            println!("enabled `{id}`");
            Ok(ExitCode::SUCCESS)
        }
        PluginsCommand::Disable { id } => {
            plugin_ops::set_enabled(&host, &id, false)?;
            println!("disabled `{id}`");
            Ok(ExitCode::SUCCESS)
        }
        PluginsCommand::Use { id } => {
            plugin_ops::use_engine(&host, &id)?;
            println!(
                "context engine is now `{id}` (plugins.slots.contextEngine in {})",
                host.config().source.path().display()
            );
            Ok(ExitCode::SUCCESS)
        }
        PluginsCommand::New { name, sdk } => {
            let cwd = std::env::current_dir()?;
            let dir = ctxhost::plugins::scaffold(&cwd, &name, sdk.as_deref())?;
            println!("created {}", dir.display());
            println!(
                "next: cd {name} && cargo build --target wasm32-wasip2 --release && ctxhost plugins install -l ."
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn names(capabilities: impl IntoIterator<Item = Capability>) -> Vec<&'static str> {
    capabilities.into_iter().map(Capability::name).collect()
}

fn list(host: &Host, json: bool) -> anyhow::Result<ExitCode> {
    let active = host.config().active_engine();
    let rows: Vec<Row> = host
        .registry()
        .all()
        .map(|engine| {
            let requested = engine.capabilities().to_vec();
            let ungranted = host.ungranted(&engine.id, &requested);
            let granted = requested.iter().copied().filter(|c| !ungranted.contains(c));
            let contract = engine
                .component_bytes()
                .map_err(|e| e.to_string())
                .and_then(|bytes| {
                    host.runtime()
                        .contract_of(&engine.origin(), &bytes)
                        .map_err(|e| e.to_string())
                });
            Row {
                id: engine.id.clone(),
                version: engine
                    .manifest
                    .as_ref()
                    .and_then(|m| m.version.clone())
                    .or_else(|| {
                        engine
                            .is_bundled()
                            .then(|| env!("CARGO_PKG_VERSION").to_string())
                    }),
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
                active: engine.id == active,
                contract,
                granted: names(granted),
                requested: names(requested),
            }
        })
        .collect();
    if json {
        print_json(&serde_json::json!({
            "engines": rows,
            "broken": host.registry().broken.iter().map(|(folder, e)| {
                serde_json::json!({"folder": folder, "error": e.to_string()})
            }).collect::<Vec<_>>(),
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    for row in &rows {
        let marker = if row.active { "*" } else { " " };
        let contract = match &row.contract {
            Ok(version) => format!("contract {version}"),
            Err(e) => format!("BROKEN: {e}"),
        };
        println!(
            "{marker} {:<20} {:<8} {:<9} {:<8} {}{}",
            row.id,
            row.version.as_deref().unwrap_or("-"),
            row.source,
            if row.enabled { "enabled" } else { "disabled" },
            contract,
            row.path
                .as_ref()
                .map(|p| format!("  {p}"))
                .unwrap_or_default()
        );
        let missing: Vec<&str> = row
            .requested
            .iter()
            .copied()
            .filter(|c| !row.granted.contains(c))
            .collect();
        if !row.requested.is_empty() {
            println!(
                "    capabilities: requested {}; granted {}",
                row.requested.join(", "),
                if row.granted.is_empty() {
                    "none".into()
                } else {
                    row.granted.join(", ")
                }
            );
        }
        if !missing.is_empty() {
            println!(
                "    not granted: {} (grant in plugins.entries.{}.grants)",
                missing.join(", "),
                row.id
            );
        }
    }
    for (folder, error) in &host.registry().broken {
        println!("! {folder:<20} BROKEN: {error}");
    }
    Ok(ExitCode::SUCCESS)
}
