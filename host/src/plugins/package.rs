//! Plugin packages on disk: reading one (copied or linked), installing, uninstalling. Every
//! change is prepared beside its destination and renamed into place, so a failure leaves the
//! plugins directory as it was.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{AvailableEngine, EngineSource, Manifest, PluginError};

/// The file a linked package's folder holds instead of a copy.
pub const LINK: &str = "ctxhost.link.json";

#[derive(Serialize, Deserialize)]
struct Link {
    path: PathBuf,
    /// The component, when cargo built it outside the package folder (`CARGO_TARGET_DIR`, an
    /// enclosing workspace): read from there on every load, so a rebuild is picked up as a
    /// rebuild inside the folder would be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    component: Option<PathBuf>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> PluginError + '_ {
    move |source| PluginError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn package_json(path: &Path) -> impl FnOnce(serde_json::Error) -> PluginError + '_ {
    move |cause| PluginError::PackageJson {
        path: path.to_path_buf(),
        cause,
    }
}

/// Reads the package in `plugins/<folder>/`: a copy, or a link to a folder elsewhere.
pub(super) fn read(folder: &str, dir: &Path) -> Result<AvailableEngine, PluginError> {
    let link_file = dir.join(LINK);
    if link_file.is_file() {
        return read_link(folder, &link_file);
    }
    let manifest = Manifest::read(dir)?;
    Ok(AvailableEngine {
        id: manifest.id.clone(),
        source: EngineSource::Installed {
            dir: dir.to_path_buf(),
        },
        manifest: Some(manifest),
    })
}

/// The package `link_file` (in `plugins/<folder>/`) points to.
fn read_link(folder: &str, link_file: &Path) -> Result<AvailableEngine, PluginError> {
    let text = std::fs::read_to_string(link_file).map_err(io(link_file))?;
    let link: Link = serde_json::from_str(&text).map_err(|e| PluginError::Manifest {
        path: link_file.to_path_buf(),
        problem: e.to_string(),
    })?;
    if !link.path.is_dir() {
        return Err(PluginError::LinkGone {
            id: folder.to_string(),
            path: link.path,
        });
    }
    let mut manifest = Manifest::read(&link.path)?;
    if let Some(component) = link.component {
        // Absolute, so `component_path` of the folder is this file.
        manifest.component = component.to_string_lossy().into_owned();
    }
    Ok(AvailableEngine {
        id: manifest.id.clone(),
        source: EngineSource::Linked { dir: link.path },
        manifest: Some(manifest),
    })
}

/// Stores a validated package: copies its manifest and component into `plugins/<id>/` (or
/// records a link to `source` when `link`). `replace` allows replacing an installed package of
/// the same id.
pub(crate) fn store(
    plugins_dir: &Path,
    source: &Path,
    manifest: &Manifest,
    link: bool,
    replace: bool,
) -> Result<PathBuf, PluginError> {
    let dest = plugins_dir.join(&manifest.id);
    if dest.exists() && !replace {
        return Err(PluginError::Taken {
            id: manifest.id.clone(),
            what: format!("installed at {}", dest.display()),
            fix: "pass --force to replace it".into(),
        });
    }
    std::fs::create_dir_all(plugins_dir).map_err(io(plugins_dir))?;
    let staging = tempfile::Builder::new()
        .prefix(&format!(".staging-{}-", manifest.id))
        .tempdir_in(plugins_dir)
        .map_err(io(plugins_dir))?;
    if link {
        stage_link(staging.path(), source, manifest)?;
    } else {
        stage_copy(staging.path(), source, manifest)?;
    }
    swap_in(plugins_dir, staging.keep(), dest, &manifest.id)
}

/// Writes into `staging` a link to the package folder `source`.
fn stage_link(staging: &Path, source: &Path, manifest: &Manifest) -> Result<(), PluginError> {
    let absolute = std::fs::canonicalize(source).map_err(io(source))?;
    // A manifest naming an absolute component is one `link_built` pointed elsewhere.
    let component = Path::new(&manifest.component)
        .is_absolute()
        .then(|| PathBuf::from(&manifest.component));
    let file = staging.join(LINK);
    let text = serde_json::to_string_pretty(&Link {
        path: absolute,
        component,
    })
    .map_err(package_json(&file))?;
    std::fs::write(&file, text).map_err(io(&file))
}

/// Copies into `staging` the component of the package in `source`, and its manifest naming it.
fn stage_copy(staging: &Path, source: &Path, manifest: &Manifest) -> Result<(), PluginError> {
    let component = manifest.component_path(source);
    let file_name = component
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| format!("{}.wasm", manifest.id));
    let copy = staging.join(&file_name);
    std::fs::copy(&component, &copy).map_err(io(&component))?;
    let installed = Manifest {
        component: file_name,
        ..manifest.clone()
    };
    let file = staging.join(super::MANIFEST);
    let text = serde_json::to_string_pretty(&installed).map_err(package_json(&file))?;
    std::fs::write(&file, text).map_err(io(&file))
}

/// Puts the `staged` package of `id` at `dest`. The old package is moved aside first, so a
/// failed rename can be undone.
fn swap_in(
    plugins_dir: &Path,
    staged: PathBuf,
    dest: PathBuf,
    id: &str,
) -> Result<PathBuf, PluginError> {
    let aside = plugins_dir.join(format!(".replaced-{id}"));
    if dest.exists() {
        let _ = std::fs::remove_dir_all(&aside);
        std::fs::rename(&dest, &aside).map_err(io(&dest))?;
    }
    if let Err(source) = std::fs::rename(&staged, &dest) {
        if aside.exists() {
            let _ = std::fs::rename(&aside, &dest);
        }
        let _ = std::fs::remove_dir_all(&staged);
        return Err(PluginError::Io { path: dest, source });
    }
    let _ = std::fs::remove_dir_all(&aside);
    Ok(dest)
}

/// Removes `plugins/<id>/`; with `purge`, the engine's state dir too.
pub(crate) fn remove(
    plugins_dir: &Path,
    state_dir: &Path,
    id: &str,
    purge: bool,
) -> Result<(), PluginError> {
    let dir = plugins_dir.join(id);
    std::fs::remove_dir_all(&dir).map_err(io(&dir))?;
    if purge && state_dir.exists() {
        std::fs::remove_dir_all(state_dir).map_err(io(state_dir))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn package(dir: &Path, id: &str) -> Manifest {
        std::fs::create_dir_all(dir.join("target")).unwrap();
        std::fs::write(dir.join("target/e.wasm"), b"\0asm component bytes").unwrap();
        let manifest = serde_json::json!({"id": id, "kind": "context-engine",
            "component": "target/e.wasm", "configSchema": {}});
        std::fs::write(dir.join(super::super::MANIFEST), manifest.to_string()).unwrap();
        Manifest::read(dir).unwrap()
    }

    #[test]
    fn install_copies_link_records_and_force_replaces() {
        let home = tempfile::tempdir().unwrap();
        let plugins = home.path().join("plugins");
        let src = tempfile::tempdir().unwrap();
        let manifest = package(src.path(), "e");

        let dest = store(&plugins, src.path(), &manifest, false, false).unwrap();
        let copied = read("e", &dest).unwrap();
        assert_eq!(copied.kind(), "installed");
        assert_eq!(copied.manifest.as_ref().unwrap().component, "e.wasm");
        assert_eq!(
            copied.component_bytes().unwrap().as_ref(),
            b"\0asm component bytes"
        );

        let err = store(&plugins, src.path(), &manifest, true, false).unwrap_err();
        assert!(err.to_string().contains("--force"), "{err}");

        store(&plugins, src.path(), &manifest, true, true).unwrap();
        let linked = read("e", &dest).unwrap();
        assert_eq!(linked.kind(), "linked");
        // The development loop: a rebuilt component is picked up without reinstalling.
        std::fs::write(src.path().join("target/e.wasm"), b"rebuilt").unwrap();
        assert_eq!(linked.component_bytes().unwrap().as_ref(), b"rebuilt");

        let leftovers: Vec<_> = std::fs::read_dir(&plugins)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(leftovers, ["e"]);
    }

    #[test]
    fn a_link_records_a_component_built_outside_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("src");
        let plugins = dir.path().join("plugins");
        let manifest = package(&source, "elsewhere");
        let built = dir.path().join("target/elsewhere.wasm");
        std::fs::create_dir_all(built.parent().unwrap()).unwrap();
        std::fs::write(&built, b"\0asm built").unwrap();
        let pointed = Manifest {
            component: built.to_string_lossy().into_owned(),
            ..manifest
        };
        store(&plugins, &source, &pointed, true, false).unwrap();
        let engine = read("elsewhere", &plugins.join("elsewhere")).unwrap();
        assert_eq!(engine.kind(), "linked");
        assert_eq!(engine.origin(), built.display().to_string());
        assert_eq!(&*engine.component_bytes().unwrap(), b"\0asm built");
    }

    #[test]
    fn a_link_whose_target_disappeared_is_reported() {
        let home = tempfile::tempdir().unwrap();
        let plugins = home.path().join("plugins");
        let src = tempfile::tempdir().unwrap();
        let manifest = package(src.path(), "gone");
        let dest = store(&plugins, src.path(), &manifest, true, false).unwrap();
        let src_path = src.path().to_path_buf();
        drop(src);
        let err = read("gone", &dest).unwrap_err();
        assert!(matches!(err, PluginError::LinkGone { .. }), "{err}");
        assert!(err.to_string().contains(&src_path.display().to_string()));
    }

    #[test]
    fn uninstall_keeps_state_unless_purged() {
        let home = tempfile::tempdir().unwrap();
        let plugins = home.path().join("plugins");
        let state = home.path().join("state/e");
        std::fs::create_dir_all(&state).unwrap();
        let src = tempfile::tempdir().unwrap();
        let manifest = package(src.path(), "e");
        store(&plugins, src.path(), &manifest, false, false).unwrap();
        remove(&plugins, &state, "e", false).unwrap();
        assert!(!plugins.join("e").exists());
        assert!(state.exists());
        store(&plugins, src.path(), &manifest, false, false).unwrap();
        remove(&plugins, &state, "e", true).unwrap();
        assert!(!state.exists());
    }
}
