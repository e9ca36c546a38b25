//! `plugins install`: finding a package's component (where its manifest says, or where cargo
//! put it) and installing the package.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::anyhow;
use ctxhost::Host;
use ctxhost::plugins::{Lang, MANIFEST, Manifest};

use crate::cli::output::stdout_line;

/// `plugins install`: copies (or links) a package folder into the plugins directory, from a
/// staged copy when its component was built elsewhere.
pub(super) async fn install(
    host: &Host,
    path: PathBuf,
    link: bool,
    force: bool,
) -> anyhow::Result<ExitCode> {
    let path = std::fs::canonicalize(&path).unwrap_or(path);
    // A component cargo put elsewhere (CARGO_TARGET_DIR, a workspace) is installed
    // from a staged copy of the package that names it, or linked with its path.
    let (staged, built_elsewhere) = match locate_component(&path)? {
        Located::AsNamed => (None, None),
        Located::Elsewhere { found, .. } if link => (None, Some(found)),
        Located::Elsewhere { manifest, found } => (Some(stage(&manifest, &found)?), None),
    };
    let source = staged.as_ref().map_or(path.as_path(), |s| s.path());
    super::imports::refuse_known_unprovided_imports(source)?;
    let installing = match &built_elsewhere {
        Some(found) => ctxhost::plugin_ops::link_built(host, &path, found, force).await,
        None => ctxhost::plugin_ops::install(host, source, link, force).await,
    };
    let package = installing.map_err(|e| super::imports::with_import_hint(e.into()))?;
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
    super::cache::collect_cache(host, false);
    Ok(ExitCode::SUCCESS)
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
