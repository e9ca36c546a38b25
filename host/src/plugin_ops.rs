//! What `ctxhost plugins …` does, as library calls on a [`Host`]: validate a package
//! completely before touching anything, then install / link / uninstall it (the files are
//! `package`'s business) and edit the config atomically.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::config::ConfigSource;
use crate::config::edit::ConfigEditor;
use crate::error::{Error, Result};
use crate::host::Host;
use crate::plugins::{Manifest, PluginError, package};
use ctxhost_runtime::{EngineSpec, Grants, Limits};

/// A package that passed every check.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ValidatedPackage {
    /// The package folder.
    #[serde(skip)]
    pub dir: PathBuf,
    /// Its manifest, checked.
    #[serde(skip)]
    pub manifest: Manifest,
    /// The engine id.
    pub id: String,
    /// The contract version the component implements, e.g. `0.2.0`.
    pub contract_version: String,
    /// The version the engine reports in `info`.
    pub engine_version: String,
}

/// Checks a package folder: manifest, a component of a supported contract that instantiates
/// within the default limits and answers `info` with the manifest's id.
pub async fn validate(host: &Host, dir: &Path) -> Result<ValidatedPackage> {
    validate_manifest(host, dir, Manifest::read(dir)?).await
}

async fn validate_manifest(
    host: &Host,
    dir: &Path,
    manifest: Manifest,
) -> Result<ValidatedPackage> {
    let component = manifest.component_path(dir);
    let bytes = std::fs::read(&component).map_err(|source| PluginError::Component {
        id: manifest.id.clone(),
        path: component.clone(),
        source,
    })?;
    // A scratch state dir: validation must not leave anything behind.
    let scratch = tempfile::tempdir().map_err(|source| Error::Io {
        path: std::env::temp_dir(),
        source,
    })?;
    let spec = default_spec(&manifest.id, &component, scratch.path());
    let engine = host.runtime().prepare(spec, &bytes).await?;
    if engine.info().id != manifest.id {
        return Err(PluginError::IdMismatch {
            id: manifest.id.clone(),
            actual: engine.info().id.clone(),
        }
        .into());
    }
    Ok(ValidatedPackage {
        dir: dir.to_path_buf(),
        id: manifest.id.clone(),
        contract_version: engine.contract_version().to_string(),
        engine_version: engine.info().version.clone(),
        manifest,
    })
}

/// The engine `id` of `component` as a package runs before any config: the default limits,
/// no grants, an empty config.
fn default_spec(id: &str, component: &Path, state_dir: &Path) -> EngineSpec {
    EngineSpec {
        id: id.to_string(),
        origin: component.display().to_string(),
        state_dir: state_dir.to_path_buf(),
        config_json: "{}".into(),
        limits: Limits::default(),
        grants: Grants::default(),
    }
}

/// Validates, then installs (copies, or links with `link`). `force` replaces an installed
/// package of the same id; a bundled id can never be taken.
pub async fn install(host: &Host, dir: &Path, link: bool, force: bool) -> Result<ValidatedPackage> {
    let manifest = Manifest::read(dir)?;
    store_validated(host, dir, manifest, link, force).await
}

/// Links the package folder `dir` whose component cargo built outside it, at `component`
/// (`CARGO_TARGET_DIR`, an enclosing workspace): the link records that path, so a rebuild is
/// picked up as with any link. `force` as for `install`.
pub async fn link_built(
    host: &Host,
    dir: &Path,
    component: &Path,
    force: bool,
) -> Result<ValidatedPackage> {
    let component = std::fs::canonicalize(component).map_err(|source| Error::Io {
        path: component.to_path_buf(),
        source,
    })?;
    let manifest = Manifest {
        component: component.to_string_lossy().into_owned(),
        ..Manifest::read(dir)?
    };
    store_validated(host, dir, manifest, true, force).await
}

async fn store_validated(
    host: &Host,
    dir: &Path,
    manifest: Manifest,
    link: bool,
    force: bool,
) -> Result<ValidatedPackage> {
    // The id is checked first: a collision is the answer, whatever the component holds.
    check_id_free(host, &manifest.id, force)?;
    let package = validate_manifest(host, dir, manifest).await?;
    let plugins_dir = host.home().plugins_dir();
    package::store(&plugins_dir, dir, &package.manifest, link, force)?;
    Ok(package)
}

/// Whether a package may take `id`: never a bundled engine's, an installed one's only with
/// `force`.
fn check_id_free(host: &Host, id: &str, force: bool) -> Result<()> {
    if host.registry().get(id).is_some_and(|e| e.is_bundled()) {
        return Err(PluginError::Taken {
            id: id.to_string(),
            what: "bundled with ctxhost".into(),
            fix: "choose another id in ctxhost.plugin.json".into(),
        }
        .into());
    }
    let installed = host.home().plugins_dir().join(id);
    if installed.exists() && !force {
        return Err(PluginError::Taken {
            id: id.to_string(),
            what: format!("installed at {}", installed.display()),
            fix: "pass --force to replace it".into(),
        }
        .into());
    }
    Ok(())
}

/// What `uninstall` did, for the operator.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Uninstalled {
    /// The engine's id.
    pub id: String,
    /// True when it was the active engine and the slot went back to `legacy`.
    pub slot_reset: bool,
    /// The state dir, when kept.
    pub kept_state: Option<PathBuf>,
}

/// Removes the installed or linked package `id`, resetting the slot to `legacy` when it was active;
/// `purge` also deletes its state dir. Bundled engines cannot be removed.
pub fn uninstall(host: &Host, id: &str, purge: bool) -> Result<Uninstalled> {
    // The id becomes a path below: `..` would name the plugins folder's parent.
    crate::plugins::manifest::check_id(id)?;
    if host.registry().get(id).is_some_and(|e| e.is_bundled()) {
        return Err(PluginError::Bundled { id: id.to_string() }.into());
    }
    let plugins_dir = host.home().plugins_dir();
    if !plugins_dir.join(id).is_dir() {
        host.registry().find(id)?;
        return Err(PluginError::NotFound {
            id: id.to_string(),
            available: host.registry().ids().collect::<Vec<_>>().join(", "),
        }
        .into());
    }
    let state_dir = host.home().state_dir(id);
    let slot_reset = host.config().active_engine() == id;
    if slot_reset {
        reset_slot(host)?;
    }
    package::remove(&plugins_dir, &state_dir, id, purge)?;
    Ok(Uninstalled {
        id: id.to_string(),
        slot_reset,
        kept_state: (!purge && state_dir.exists()).then_some(state_dir),
    })
}

/// Points the slot back at the default engine.
fn reset_slot(host: &Host) -> Result<()> {
    let slot = ["plugins", "slots", "contextEngine"];
    edit(&host.config().source, |e| {
        e.set(&slot, crate::config::DEFAULT_ENGINE.into())
    })
}

/// Sets `plugins.entries.<id>.enabled`.
pub fn set_enabled(host: &Host, id: &str, enabled: bool) -> Result<()> {
    host.registry().find(id)?;
    if !enabled && host.config().active_engine() == id {
        tracing::warn!(
            "`{id}` is the active engine; sessions will fail until another is selected with `ctxhost plugins use`"
        );
    }
    edit(&host.config().source, |e| {
        e.set(&["plugins", "entries", id, "enabled"], enabled.into())
    })
}

/// Selects the engine for the slot; refuses an unknown or disabled one.
pub fn use_engine(host: &Host, id: &str) -> Result<()> {
    host.registry().find(id)?;
    if host.config().plugin_entry(id).and_then(|e| e.enabled) == Some(false) {
        return Err(PluginError::Disabled { id: id.to_string() }.into());
    }
    edit(&host.config().source, |e| {
        e.set(&["plugins", "slots", "contextEngine"], id.into())
    })
}

fn edit(source: &ConfigSource, change: impl FnOnce(&mut ConfigEditor)) -> Result<()> {
    let mut editor = ConfigEditor::open(source)?;
    change(&mut editor);
    editor.save()?;
    Ok(())
}
