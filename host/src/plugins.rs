//! The engines an operator can select: the bundled ones (embedded in this binary) and the
//! plugin packages under `$CTXHOST_HOME/plugins/<id>/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The legacy engine, built from `engines/legacy` by the build script.
pub const LEGACY_WASM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/ctxhost_legacy.wasm"));

/// The checkpoint-manager engine, built from `engines/checkpoint-manager` by the build script.
pub const CHECKPOINT_MANAGER_WASM: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/ctxhost_checkpoint_manager.wasm"));

/// Engines embedded in this binary, by id.
pub const BUNDLED: &[(&str, &[u8])] = &[
    ("legacy", LEGACY_WASM),
    ("checkpoint-manager", CHECKPOINT_MANAGER_WASM),
];

/// The manifest file of a plugin package.
pub const MANIFEST: &str = "ctxhost.plugin.json";

#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error(
        "context engine `{id}` (selected by plugins.slots.contextEngine in {config}) does not exist; available: {available}"
    )]
    Unknown {
        id: String,
        config: String,
        available: String,
    },
    #[error("plugin manifest {path}: {problem}")]
    Manifest { path: PathBuf, problem: String },
    #[error("plugin `{id}`: cannot read its component {path}: {source}")]
    Component {
        id: String,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Where an engine's component comes from.
#[derive(Debug, Clone)]
pub enum EngineSource {
    Bundled(&'static [u8]),
    /// A package folder under the plugins directory.
    Installed {
        dir: PathBuf,
        component: PathBuf,
    },
}

#[derive(Debug, Clone)]
pub struct AvailableEngine {
    pub id: String,
    pub source: EngineSource,
}

impl AvailableEngine {
    /// Where it came from, for messages.
    pub fn origin(&self) -> String {
        match &self.source {
            EngineSource::Bundled(_) => format!("bundled:{}", self.id),
            EngineSource::Installed { component, .. } => component.display().to_string(),
        }
    }

    pub fn component_bytes(&self) -> Result<std::borrow::Cow<'static, [u8]>, PluginError> {
        match &self.source {
            EngineSource::Bundled(bytes) => Ok(std::borrow::Cow::Borrowed(bytes)),
            EngineSource::Installed { component, .. } => std::fs::read(component)
                .map(std::borrow::Cow::Owned)
                .map_err(|source| PluginError::Component {
                    id: self.id.clone(),
                    path: component.clone(),
                    source,
                }),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    id: String,
    component: String,
}

/// Every engine that can be selected, by id.
#[derive(Debug)]
pub struct Registry {
    engines: BTreeMap<String, AvailableEngine>,
    /// Packages that could not be read, kept for `doctor`.
    pub broken: Vec<PluginError>,
}

impl Registry {
    pub fn discover(plugins_dir: &Path) -> Self {
        let mut engines: BTreeMap<String, AvailableEngine> = BUNDLED
            .iter()
            .map(|(id, bytes)| {
                let engine = AvailableEngine {
                    id: id.to_string(),
                    source: EngineSource::Bundled(bytes),
                };
                (id.to_string(), engine)
            })
            .collect();
        let mut broken = Vec::new();
        if let Ok(dirs) = std::fs::read_dir(plugins_dir) {
            let mut dirs: Vec<PathBuf> = dirs.flatten().map(|d| d.path()).collect();
            dirs.sort();
            for dir in dirs.into_iter().filter(|d| d.join(MANIFEST).is_file()) {
                match read_package(&dir) {
                    Ok(engine) if engines.contains_key(&engine.id) => {
                        broken.push(PluginError::Manifest {
                            path: dir.join(MANIFEST),
                            problem: format!("id `{}` is already taken", engine.id),
                        })
                    }
                    Ok(engine) => {
                        engines.insert(engine.id.clone(), engine);
                    }
                    Err(e) => broken.push(e),
                }
            }
        }
        Self { engines, broken }
    }

    pub fn get(&self, id: &str) -> Option<&AvailableEngine> {
        self.engines.get(id)
    }

    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.engines.keys().map(String::as_str)
    }

    /// The engine with this id, or an error naming it and listing the available ones.
    pub fn resolve(&self, id: &str, config: &Path) -> Result<&AvailableEngine, PluginError> {
        self.get(id).ok_or_else(|| PluginError::Unknown {
            id: id.to_string(),
            config: config.display().to_string(),
            available: self.ids().collect::<Vec<_>>().join(", "),
        })
    }
}

fn read_package(dir: &Path) -> Result<AvailableEngine, PluginError> {
    let path = dir.join(MANIFEST);
    let manifest_error = |problem: String| PluginError::Manifest {
        path: path.clone(),
        problem,
    };
    let text = std::fs::read_to_string(&path).map_err(|e| manifest_error(e.to_string()))?;
    let manifest: Manifest =
        serde_json::from_str(&text).map_err(|e| manifest_error(e.to_string()))?;
    let component = dir.join(&manifest.component);
    Ok(AvailableEngine {
        id: manifest.id,
        source: EngineSource::Installed {
            dir: dir.to_path_buf(),
            component,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_is_always_available_and_unknown_ids_list_the_choices() {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::discover(&dir.path().join("plugins"));
        assert!(registry.get("legacy").is_some());
        let err = registry
            .resolve("nope", Path::new("/x/ctxhost.json"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("`nope`"), "{err}");
        assert!(
            err.contains("available: checkpoint-manager, legacy"),
            "{err}"
        );
        assert!(LEGACY_WASM.starts_with(b"\0asm"));
    }

    #[test]
    fn installed_packages_are_found_and_bad_manifests_reported() {
        let dir = tempfile::tempdir().unwrap();
        let plugins = dir.path().join("plugins");
        std::fs::create_dir_all(plugins.join("good")).unwrap();
        std::fs::write(
            plugins.join("good").join(MANIFEST),
            r#"{"id":"good","component":"good.wasm"}"#,
        )
        .unwrap();
        std::fs::create_dir_all(plugins.join("bad")).unwrap();
        std::fs::write(plugins.join("bad").join(MANIFEST), "{not json").unwrap();
        let registry = Registry::discover(&plugins);
        assert_eq!(
            registry.ids().collect::<Vec<_>>(),
            ["checkpoint-manager", "good", "legacy"]
        );
        assert_eq!(registry.broken.len(), 1);
        assert!(registry.broken[0].to_string().contains("bad"));
    }
}
