//! `ctxhost plugins …`: list, install (copy or link), uninstall, enable, disable, use, new.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::anyhow;
use clap::{Subcommand, ValueEnum};
use ctxhost::Host;
use ctxhost::plugins::{Capability, EngineSource, Lang, MANIFEST, Manifest};
use schemars::JsonSchema;
use serde::Serialize;

use super::output::print_json;
use super::output::stdout_line;

#[derive(Subcommand)]
pub(super) enum PluginsCommand {
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
    /// Removes compiled components from the cache that no bundled or installed engine uses.
    Gc {
        /// Only report what would be removed.
        #[arg(long)]
        dry_run: bool,
    },
    /// Scaffolds an engine project in ./NAME that builds with one command and installs as is.
    New {
        name: String,
        /// The engine's language.
        #[arg(long, value_enum, default_value_t = LangArg::Rust)]
        lang: LangArg,
        /// Rust only: depend on this ctxhost-sdk folder instead of the copy this ctxhost
        /// carries (vendored into the project).
        #[arg(long, value_name = "PATH")]
        sdk: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
pub enum LangArg {
    Rust,
    Python,
    #[value(alias = "js")]
    Javascript,
}

impl From<LangArg> for Lang {
    fn from(lang: LangArg) -> Self {
        match lang {
            LangArg::Rust => Lang::Rust,
            LangArg::Python => Lang::Python,
            LangArg::Javascript => Lang::JavaScript,
        }
    }
}

/// `ctxhost plugins list --json` (docs/cli-json/plugins-list.schema.json). Every output
/// type denies unknown fields, so its schema does too: a field added without the schema
/// fails the output's validation test.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct PluginsList {
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

pub(super) async fn run(host: Host, command: PluginsCommand) -> anyhow::Result<ExitCode> {
    match command {
        PluginsCommand::List { json } => list(&host, json),
        PluginsCommand::Install { path, link, force } => {
            let path = std::fs::canonicalize(&path).unwrap_or(path);
            // A component cargo put elsewhere (CARGO_TARGET_DIR, a workspace) is installed
            // from a staged copy of the package that names it, or linked with its path.
            let (staged, built_elsewhere) = match locate_component(&path)? {
                Located::AsNamed => (None, None),
                Located::Elsewhere { found, .. } if link => (None, Some(found)),
                Located::Elsewhere { manifest, found } => (Some(stage(&manifest, &found)?), None),
            };
            let source = staged.as_ref().map_or(path.as_path(), |s| s.path());
            refuse_known_unprovided_imports(source)?;
            let installing = match &built_elsewhere {
                Some(found) => ctxhost::plugins::link_built(&host, &path, found, force).await,
                None => ctxhost::plugins::install(&host, source, link, force).await,
            };
            let package = installing.map_err(|e| with_import_hint(e.into()))?;
            let how = if link { "linked" } else { "installed" };
            stdout_line!(
                "{how} `{}` {} (contract {}) from {}",
                package.id,
                package.engine_version,
                package.contract_version,
                path.display()
            );
            stdout_line!("select it with: ctxhost plugins use {}", package.id);
            // A replaced or rebuilt component leaves its compiled form behind (~35 MB for
            // Python or JavaScript): drop what nothing uses any more.
            collect_cache(&host, false);
            Ok(ExitCode::SUCCESS)
        }
        PluginsCommand::Uninstall { id, purge, .. } => {
            let done = ctxhost::plugins::uninstall(&host, &id, purge)?;
            stdout_line!("uninstalled `{id}`");
            if done.slot_reset {
                stdout_line!(
                    "it was the active engine: plugins.slots.contextEngine is now `legacy`"
                );
            }
            match &done.kept_state {
                Some(dir) => stdout_line!(
                    "its state is kept in {} (--purge deletes it)",
                    dir.display()
                ),
                None if purge => stdout_line!("its state was deleted"),
                None => {}
            }
            collect_cache(&host, false);
            Ok(ExitCode::SUCCESS)
        }
        PluginsCommand::Enable { id } => {
            ctxhost::plugins::set_enabled(&host, &id, true)?;
            stdout_line!("enabled `{id}`");
            Ok(ExitCode::SUCCESS)
        }
        PluginsCommand::Disable { id } => {
            ctxhost::plugins::set_enabled(&host, &id, false)?;
            stdout_line!("disabled `{id}`");
            Ok(ExitCode::SUCCESS)
        }
        PluginsCommand::Use { id } => {
            ctxhost::plugins::use_engine(&host, &id)?;
            stdout_line!(
                "context engine is now `{id}` (plugins.slots.contextEngine in {})",
                host.config().source.path().display()
            );
            Ok(ExitCode::SUCCESS)
        }
        PluginsCommand::Gc { dry_run } => {
            let gc = collect_cache(&host, dry_run);
            let verb = if dry_run { "would remove" } else { "removed" };
            stdout_line!(
                "{verb} {} cached component(s), {:.1} MiB; {:.1} MiB kept in {}",
                gc.removed,
                mib(gc.removed_bytes),
                mib(gc.kept_bytes),
                host.home().cache_dir().display()
            );
            Ok(ExitCode::SUCCESS)
        }
        PluginsCommand::New { name, lang, sdk } => {
            let lang = Lang::from(lang);
            if sdk.is_some() && lang != Lang::Rust {
                anyhow::bail!("--sdk is for Rust projects; a {lang:?} project carries its WIT");
            }
            let cwd = std::env::current_dir()?;
            let dir = ctxhost::plugins::scaffold_lang(&cwd, &name, lang, sdk.as_deref())?;
            stdout_line!("created {}", dir.display());
            let setup = match lang {
                Lang::Rust => "",
                Lang::Python => "pip install componentize-py && ",
                Lang::JavaScript => "npm install && ",
            };
            stdout_line!(
                "next: cd {name} && {setup}{} && ctxhost plugins install .",
                lang.build_command()
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

#[derive(Default)]
struct Collected {
    removed: usize,
    removed_bytes: u64,
    kept_bytes: u64,
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Removes cache entries (`<content hash>-<engine hash>.cwasm` and the files beside it with the
/// same stem, e.g. `.check`) of components no engine of the plugins directory uses now, and, of
/// several for one component, all but the newest (older ones were compiled by an earlier
/// wasmtime). Best effort: a failure only leaves a file.
fn collect_cache(host: &Host, dry_run: bool) -> Collected {
    #[derive(Default)]
    struct Entry {
        modified: Option<std::time::SystemTime>,
        bytes: u64,
        files: Vec<PathBuf>,
    }
    let registry = ctxhost::plugins::Registry::discover(&host.home().plugins_dir());
    let used: std::collections::HashSet<String> = registry
        .all()
        .filter_map(|engine| engine.component_bytes().ok())
        .map(|bytes| blake3::hash(&bytes).to_hex()[..32].to_string())
        .collect();
    // (content hash, stem) -> its files; a BTreeMap keeps one component's entries together.
    let mut entries: std::collections::BTreeMap<(String, String), Entry> = Default::default();
    for file in std::fs::read_dir(host.home().cache_dir())
        .into_iter()
        .flatten()
        .flatten()
    {
        let path = file.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some((stem, extension)) = name.split_once('.') else {
            continue;
        };
        let Some((content, engine)) = stem.split_once('-') else {
            continue;
        };
        if content.len() != 32
            || engine.is_empty()
            || !content.bytes().all(|b| b.is_ascii_hexdigit())
        {
            continue;
        }
        let Ok(meta) = file.metadata() else {
            continue;
        };
        let entry = entries
            .entry((content.to_string(), stem.to_string()))
            .or_default();
        if extension == "cwasm" {
            entry.modified = meta.modified().ok();
        }
        entry.bytes += meta.len();
        entry.files.push(path);
    }
    let mut newest: std::collections::HashMap<&str, (&str, Option<std::time::SystemTime>)> =
        Default::default();
    for ((content, stem), entry) in &entries {
        let best = newest.entry(content).or_insert((stem, entry.modified));
        if entry.modified > best.1 {
            *best = (stem, entry.modified);
        }
    }
    let mut collected = Collected::default();
    for ((content, stem), entry) in &entries {
        let keep =
            used.contains(content) && newest.get(content.as_str()).is_some_and(|(s, _)| s == stem);
        if keep {
            collected.kept_bytes += entry.bytes;
            continue;
        }
        if !dry_run {
            for file in &entry.files {
                let _ = std::fs::remove_file(file);
            }
        }
        collected.removed += 1;
        collected.removed_bytes += entry.bytes;
    }
    collected
}

enum Located {
    /// At the manifest's `component` path (or the manifest is unreadable: install says why).
    AsNamed,
    /// Built by cargo into a target directory outside the package folder.
    Elsewhere {
        manifest: Box<Manifest>,
        found: PathBuf,
    },
}

/// Finds the package's component: where its manifest says, else, for a Rust crate, where cargo
/// put it. Not found is an error listing every place looked at, once.
fn locate_component(dir: &Path) -> anyhow::Result<Located> {
    let Ok(manifest) = Manifest::read(dir) else {
        return Ok(Located::AsNamed);
    };
    let named = manifest.component_path(dir);
    if named.is_file() {
        return Ok(Located::AsNamed);
    }
    let mut looked = vec![format!("{} (`component` in {MANIFEST})", named.display())];
    let mut hint = build_hint(dir);
    if dir.join("Cargo.toml").is_file() {
        match cargo_artifacts(dir) {
            Ok((release, debug)) => {
                if release.is_file() {
                    return Ok(Located::Elsewhere {
                        manifest: Box::new(manifest),
                        found: release,
                    });
                }
                if release == named {
                    looked[0] = format!(
                        "{} (`component` in {MANIFEST}, where cargo's release build for wasm32-wasip2 goes)",
                        named.display()
                    );
                } else {
                    looked.push(format!(
                        "{} (cargo's release build for wasm32-wasip2)",
                        release.display()
                    ));
                }
                if debug.is_file() {
                    hint = format!(
                        "only a debug build exists ({}); build with: {}",
                        debug.display(),
                        Lang::Rust.build_command()
                    );
                }
            }
            Err(e) => looked.push(format!("(cargo's target directory unknown: {e})")),
        }
    }
    Err(anyhow!(
        "plugin `{}`: no component found. Looked at:\n  {}\n{hint}",
        manifest.id,
        looked.join("\n  ")
    ))
}

/// The command that builds a package of this folder's language.
fn build_hint(dir: &Path) -> String {
    let lang = if dir.join("Cargo.toml").is_file() {
        Lang::Rust
    } else if dir.join("app.py").is_file() {
        Lang::Python
    } else if dir.join("package.json").is_file() {
        Lang::JavaScript
    } else {
        return "build the engine first, then install the folder".into();
    };
    format!("build it with: {}", lang.build_command())
}

/// The release and debug component paths of the crate in `dir`, from `cargo metadata` (which
/// knows CARGO_TARGET_DIR, config and the enclosing workspace).
fn cargo_artifacts(dir: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .arg("--manifest-path")
        .arg(dir.join("Cargo.toml"))
        .current_dir(dir)
        .output()
        .map_err(|e| anyhow!("cannot run cargo: {e}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        anyhow::bail!("cargo metadata failed: {}", stderr.trim());
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let target = metadata["target_directory"]
        .as_str()
        .ok_or_else(|| anyhow!("cargo metadata has no target_directory"))?;
    let manifest_path = std::fs::canonicalize(dir.join("Cargo.toml"))?;
    let package = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| {
            p["manifest_path"]
                .as_str()
                .and_then(|m| std::fs::canonicalize(m).ok())
                .is_some_and(|m| m == manifest_path)
        })
        .ok_or_else(|| anyhow!("cargo metadata does not list {}", manifest_path.display()))?;
    let lib = package["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| {
            t["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "cdylib"))
        })
        .and_then(|t| t["name"].as_str())
        .ok_or_else(|| {
            anyhow!(
                "{}: no cdylib target (crate-type = [\"cdylib\"])",
                manifest_path.display()
            )
        })?;
    let file = format!("{}.wasm", lib.replace('-', "_"));
    let out = Path::new(target).join("wasm32-wasip2");
    Ok((
        out.join("release").join(&file),
        out.join("debug").join(file),
    ))
}

/// A package folder with the manifest and the component found elsewhere, for a copy install.
fn stage(manifest: &Manifest, component: &Path) -> anyhow::Result<tempfile::TempDir> {
    let staging = tempfile::tempdir()?;
    let name = format!("{}.wasm", manifest.id);
    std::fs::copy(component, staging.path().join(&name))
        .map_err(|e| anyhow!("cannot copy {}: {e}", component.display()))?;
    let staged = Manifest {
        component: name,
        ..manifest.clone()
    };
    std::fs::write(
        staging.path().join(MANIFEST),
        serde_json::to_string_pretty(&staged)?,
    )?;
    Ok(staging)
}

/// Refuses a component importing `wasi:http` before the runtime spends seconds compiling it
/// (a JavaScript engine takes ~25 s), with the fix. Anything unreadable is left to the runtime.
fn refuse_known_unprovided_imports(dir: &Path) -> anyhow::Result<()> {
    let Ok(manifest) = Manifest::read(dir) else {
        return Ok(());
    };
    let Ok(bytes) = std::fs::read(manifest.component_path(dir)) else {
        return Ok(());
    };
    let imports = component_imports(&bytes).unwrap_or_default();
    match imports.iter().find(|name| name.starts_with("wasi:http/")) {
        Some(import) => Err(with_import_hint(anyhow!(
            "{}: cannot link the component: it imports `{import}`",
            manifest.component_path(dir).display()
        ))),
        None => Ok(()),
    }
}

/// The names a component imports at its top level, read from the binary without compiling it;
/// `None` where the binary is not a component this reader understands.
fn component_imports(bytes: &[u8]) -> Option<Vec<String>> {
    fn leb(input: &mut &[u8]) -> Option<u32> {
        let mut value: u64 = 0;
        for shift in (0..35).step_by(7) {
            let (&byte, rest) = input.split_first()?;
            *input = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return u32::try_from(value).ok();
            }
        }
        None
    }
    fn take<'a>(input: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        (input.len() >= n).then(|| {
            let (head, rest) = input.split_at(n);
            *input = rest;
            head
        })
    }
    // Magic, then version 0x0d and layer 1: a component, not a core module.
    let mut rest = bytes.strip_prefix(b"\0asm\x0d\x00\x01\x00")?;
    let mut names = Vec::new();
    while let Some((&id, tail)) = rest.split_first() {
        rest = tail;
        let size = leb(&mut rest)? as usize;
        let mut section = take(&mut rest, size)?;
        if id != 10 {
            continue;
        }
        for _ in 0..leb(&mut section)? {
            // importname': 0x00 (or 0x01 in older binaries), then the name as a string.
            if *take(&mut section, 1)?.first()? > 0x01 {
                return None;
            }
            let len = leb(&mut section)? as usize;
            names.push(String::from_utf8(take(&mut section, len)?.to_vec()).ok()?);
            // externdesc: a kind byte, then one index or bound (core modules: 0x11 and an index).
            match *take(&mut section, 1)?.first()? {
                0x00 => {
                    take(&mut section, 1)?;
                    leb(&mut section)?;
                }
                0x01 | 0x04 | 0x05 => {
                    leb(&mut section)?;
                }
                0x02 => {
                    take(&mut section, 1)?;
                    leb(&mut section)?;
                }
                0x03 => {
                    if *take(&mut section, 1)?.first()? == 0x00 {
                        leb(&mut section)?;
                    }
                }
                _ => return None,
            }
        }
    }
    Some(names)
}

/// Adds how to remove an import ctxhost does not provide, where the toolchain is known.
fn with_import_hint(error: anyhow::Error) -> anyhow::Error {
    // The import is named by wasmtime, in the error's sources.
    let text = format!("{error:#}");
    let Some(import) = text
        .split('`')
        .skip(1)
        .step_by(2)
        .find(|name| name.starts_with("wasi:") || (name.contains(':') && name.contains('/')))
        .filter(|_| text.contains("cannot link"))
    else {
        return error;
    };
    let fix = if import.starts_with("wasi:http") {
        "componentize-js adds it by default: build with `componentize-js … --disable http fetch-event` \
         (the JavaScript template's `npm run build` does)"
            .to_string()
    } else {
        format!(
            "ctxhost provides `ctxhost:engine/host` and the WASI basics (cli, clocks, random, \
             filesystem, io); remove what imports `{import}` from the engine"
        )
    };
    anyhow!("{text}\nfix: the component imports `{import}`, which ctxhost does not provide; {fix}")
}

fn names(capabilities: impl IntoIterator<Item = Capability>) -> Vec<&'static str> {
    capabilities.into_iter().map(Capability::name).collect()
}

fn list(host: &Host, json: bool) -> anyhow::Result<ExitCode> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_components_imports_are_read_without_compiling_it() {
        let imports = component_imports(ctxhost::plugins::LEGACY_WASM).unwrap();
        assert!(
            imports
                .iter()
                .any(|i| i.starts_with("ctxhost:engine/host@")),
            "{imports:?}"
        );
        assert!(imports.iter().all(|i| !i.starts_with("wasi:http")));
        assert_eq!(component_imports(b"\0asm\x01\0\0\0"), None, "a core module");
        let mut truncated = ctxhost::plugins::LEGACY_WASM.to_vec();
        truncated.truncate(40);
        assert_eq!(component_imports(&truncated), None);
    }

    #[test]
    fn the_hint_names_the_import_and_the_flag() {
        let error = with_import_hint(anyhow!(
            "x.wasm: cannot link the component: component imports instance `wasi:http/types@0.2.10`, but …"
        ));
        let text = error.to_string();
        assert!(
            text.contains("fix: the component imports `wasi:http/types@0.2.10`"),
            "{text}"
        );
        assert!(text.contains("--disable http fetch-event"), "{text}");
        let other = with_import_hint(anyhow!(
            "x.wasm: cannot link the component: component imports instance `acme:db/query`, but …"
        ))
        .to_string();
        assert!(
            other.contains("remove what imports `acme:db/query`"),
            "{other}"
        );
        let unrelated = with_import_hint(anyhow!("engine `x` failed")).to_string();
        assert_eq!(unrelated, "engine `x` failed");
    }
}
