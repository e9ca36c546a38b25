//! The engines an operator can select: the bundled ones (embedded in this binary) and plugin
//! packages under `$CTXHOST_HOME/plugins/<id>/`, copied there or linked to a folder elsewhere.

pub(crate) mod manifest;
pub(crate) mod package;
mod scaffold;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

pub use manifest::{Capability, MANIFEST, Manifest, check_schema, valid_id, validate_config};
pub use package::LINK;
pub use scaffold::{Lang, scaffold, scaffold_lang};

/// The legacy engine, built from `engines/legacy` by the build script.
pub const LEGACY_WASM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/ctxhost_legacy.wasm"));

/// The checkpoint-manager engine, built from `engines/checkpoint-manager` by the build script.
pub const CHECKPOINT_MANAGER_WASM: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/ctxhost_checkpoint_manager.wasm"));

/// The lossless engine, built from `engines/lossless` by the build script.
pub const LOSSLESS_WASM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/ctxhost_lossless.wasm"));

/// Engines embedded in this binary, by id.
pub const BUNDLED: &[(&str, &[u8])] = &[
    ("legacy", LEGACY_WASM),
    ("checkpoint-manager", CHECKPOINT_MANAGER_WASM),
    ("lossless", LOSSLESS_WASM),
];

/// What a bundled engine can use when the operator grants it. Optional by design: each works
/// without them (`lossless` summarizes extractively until `llm` is granted).
fn bundled_capabilities(id: &str) -> &'static [Capability] {
    match id {
        "lossless" => &[Capability::Llm],
        _ => &[],
    }
}

/// The config schema of a bundled engine.
fn bundled_schema(id: &str) -> Value {
    match id {
        // The engine reads its ranges from the same file (one place for them).
        "checkpoint-manager" => serde_json::from_str(include_str!(
            "../../../engines/checkpoint-manager/config.schema.json"
        ))
        .expect("the bundled checkpoint-manager schema is valid JSON"),
        "lossless" => {
            serde_json::from_str(include_str!("../../../engines/lossless/config.schema.json"))
                .expect("the bundled lossless schema is valid JSON")
        }
        _ => json!({"type": "object"}),
    }
}

/// Why an engine package cannot be found, installed, selected or scaffolded.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The configured engine does not exist.
    #[error(
        "context engine `{id}` (selected by plugins.slots.contextEngine in {config}) does not exist; available: {available}"
    )]
    Unknown {
        /// The id the slot names.
        id: String,
        /// The config file that names it.
        config: String,
        /// The ids that do exist, comma-separated.
        available: String,
    },
    /// No engine has this id.
    #[error("no engine `{id}`; available: {available}")]
    NotFound {
        /// The id asked for.
        id: String,
        /// The ids that do exist, comma-separated.
        available: String,
    },
    /// The manifest is missing or invalid.
    #[error("plugin manifest {path}: {problem}")]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// The package's component file cannot be read.
    #[error("plugin `{id}`: cannot read its component {path}: {source}")]
    Component {
        /// The engine's id.
        id: String,
        /// The component file.
        path: PathBuf,
        /// Why reading failed.
        source: std::io::Error,
    },
    /// A linked package's folder is gone.
    #[error(
        "plugin `{id}` is linked to {path}, which no longer exists; relink it (ctxhost plugins install -l PATH --force) or uninstall it"
    )]
    LinkGone {
        /// The engine's id.
        id: String,
        /// The folder the link recorded.
        path: PathBuf,
    },
    /// The operator disabled the engine.
    #[error(
        "engine `{id}` is disabled (plugins.entries.{id}.enabled = false); enable it with: ctxhost plugins enable {id}"
    )]
    Disabled {
        /// The engine's id.
        id: String,
    },
    /// `plugins.entries.<id>.config` fails the engine's config schema.
    #[error("plugin `{id}`: config plugins.entries.{id}.config{pointer} is invalid: {rule}")]
    Config {
        /// The engine's id.
        id: String,
        /// Where in the config it fails, as a JSON pointer (empty for the whole object).
        pointer: String,
        /// The schema rule it breaks.
        rule: String,
    },
    /// The component's `info` answers another id than its manifest.
    #[error(
        "plugin `{id}`: the component says its id is `{actual}`; the manifest and the engine's info() must agree"
    )]
    IdMismatch {
        /// The manifest's id.
        id: String,
        /// The id the component reports.
        actual: String,
    },
    /// The id is already in use.
    #[error("an engine with id `{id}` is already {what}; {fix}")]
    Taken {
        /// The id.
        id: String,
        /// What uses it, e.g. `bundled with ctxhost`.
        what: String,
        /// What the operator can do about it.
        fix: String,
    },
    /// Bundled engines cannot be uninstalled.
    #[error("`{id}` is bundled with ctxhost and cannot be uninstalled")]
    Bundled {
        /// The engine's id.
        id: String,
    },
    /// A file of the package or the plugins directory failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
    /// From the one check of an engine id (`plugins::manifest::check_id`).
    #[error(
        "\"{name}\" must match [a-z0-9][a-z0-9._-]* (lowercase letters, digits, '.', '_', '-'; at most {max} bytes, e.g. my-engine): an engine id names folders and config keys",
        max = manifest::MAX_ID
    )]
    InvalidId {
        /// The name given.
        name: String,
    },
    /// `plugins new` would overwrite an existing path.
    #[error("{} already exists; choose another name or remove it", path.display())]
    ScaffoldExists {
        /// The path that exists.
        path: PathBuf,
    },
    /// A file the binary should carry for `plugins new` is missing from this build.
    #[error("this ctxhost was built without {path}; rebuild it")]
    NotCarried {
        /// The file's path in the repository.
        path: String,
    },
    /// This build carries no WIT of the contract the templates implement.
    #[error("this ctxhost carries no WIT of contract {contract}, which the templates implement")]
    NoTemplateWit {
        /// The contract version, e.g. `0.2.0`.
        contract: String,
    },
    /// `--sdk` does not name an SDK folder.
    #[error(
        "--sdk {}: pass the sdk/ folder of a ctxhost checkout, or leave --sdk out to use the SDK this ctxhost carries",
        path.display()
    )]
    SdkPath {
        /// The path given.
        path: PathBuf,
        /// Why it cannot be read.
        #[source]
        cause: std::io::Error,
    },
    /// The SDK's Cargo.toml inherits a key its workspace does not define.
    #[error(
        "sdk/Cargo.toml [{section}] `{key}` inherits from the workspace, but the workspace Cargo.toml has no such key"
    )]
    SdkManifest {
        /// The Cargo.toml section, e.g. `package`.
        section: String,
        /// The key.
        key: String,
    },
    /// The new package's JSON cannot be written.
    #[error("{}: cannot write the package's JSON", path.display())]
    PackageJson {
        /// The file.
        path: PathBuf,
        /// Why serialization failed.
        #[source]
        cause: serde_json::Error,
    },
}

/// Where an engine's component comes from.
#[derive(Debug, Clone)]
pub enum EngineSource {
    /// Embedded in this binary: the component's bytes.
    Bundled(&'static [u8]),
    /// A package copied under the plugins directory.
    Installed {
        /// The package folder.
        dir: PathBuf,
    },
    /// A package folder elsewhere, recorded by `install --link` (the development loop).
    Linked {
        /// The package folder.
        dir: PathBuf,
    },
}

/// An engine that can be selected: its id, where its component comes from and its manifest.
#[derive(Debug, Clone)]
pub struct AvailableEngine {
    /// The engine id.
    pub id: String,
    /// Where its component comes from.
    pub source: EngineSource,
    /// `None` for bundled engines.
    pub manifest: Option<Manifest>,
}

impl AvailableEngine {
    /// Where it came from, for messages.
    pub fn origin(&self) -> String {
        match (&self.source, &self.manifest) {
            (EngineSource::Bundled(_), _) => format!("bundled:{}", self.id),
            (EngineSource::Installed { dir } | EngineSource::Linked { dir }, Some(m)) => {
                m.component_path(dir).display().to_string()
            }
            (EngineSource::Installed { dir } | EngineSource::Linked { dir }, None) => {
                dir.display().to_string()
            }
        }
    }

    /// `bundled`, `installed` or `linked`.
    pub fn kind(&self) -> &'static str {
        match self.source {
            EngineSource::Bundled(_) => "bundled",
            EngineSource::Installed { .. } => "installed",
            EngineSource::Linked { .. } => "linked",
        }
    }

    /// Whether it is embedded in this binary (bundled engines cannot be uninstalled).
    pub fn is_bundled(&self) -> bool {
        matches!(self.source, EngineSource::Bundled(_))
    }

    /// Checks the config the operator set for it against its schema: `Err((json pointer,
    /// rule broken))`. A bundled engine's schema accepts an empty config (a test holds each to
    /// it), so an operator who set nothing has nothing to check, and the sidecar's first answer
    /// does not wait on compiling the schema and its meta-schema (about 1 ms).
    pub fn check_config(&self, config: &Value) -> Result<(), (String, String)> {
        let unset = config.as_object().is_some_and(|fields| fields.is_empty());
        if self.is_bundled() && unset {
            return Ok(());
        }
        validate_config(&self.config_schema(), config)
    }

    /// The JSON Schema its config must satisfy.
    pub fn config_schema(&self) -> Value {
        match &self.manifest {
            Some(manifest) => manifest.config_schema.clone(),
            None => bundled_schema(&self.id),
        }
    }

    /// The capabilities its manifest asks for; for a bundled engine, the optional ones it
    /// uses when granted.
    pub fn capabilities(&self) -> &[Capability] {
        match &self.manifest {
            Some(manifest) => manifest.capabilities.as_slice(),
            None => bundled_capabilities(&self.id),
        }
    }

    /// The component's bytes: borrowed for a bundled engine, read from the package otherwise.
    pub fn component_bytes(&self) -> Result<std::borrow::Cow<'static, [u8]>, PluginError> {
        match (&self.source, &self.manifest) {
            (EngineSource::Bundled(bytes), _) => Ok(std::borrow::Cow::Borrowed(bytes)),
            (EngineSource::Installed { dir } | EngineSource::Linked { dir }, Some(manifest)) => {
                let path = manifest.component_path(dir);
                std::fs::read(&path)
                    .map(std::borrow::Cow::Owned)
                    .map_err(|source| PluginError::Component {
                        id: self.id.clone(),
                        path,
                        source,
                    })
            }
            (_, None) => Err(PluginError::Manifest {
                path: PathBuf::from(&self.id),
                problem: "no manifest".into(),
            }),
        }
    }
}

/// Every engine that can be selected, by id.
#[derive(Debug)]
pub struct Registry {
    engines: BTreeMap<String, AvailableEngine>,
    /// Packages that could not be read, kept for `doctor` and `plugins list`.
    pub broken: Vec<(String, PluginError)>,
}

impl Registry {
    /// The bundled engines and every package under `plugins_dir`; a package that cannot be read
    /// goes to [`Registry::broken`] and the rest still load.
    pub fn discover(plugins_dir: &Path) -> Self {
        let mut registry = Self {
            engines: (BUNDLED.iter())
                .map(|(id, bytes)| {
                    let engine = AvailableEngine {
                        id: id.to_string(),
                        source: EngineSource::Bundled(bytes),
                        manifest: None,
                    };
                    (id.to_string(), engine)
                })
                .collect(),
            broken: Vec::new(),
        };
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(plugins_dir)
            .map(|dirs| dirs.flatten().map(|d| d.path()).collect())
            .unwrap_or_default();
        dirs.sort();
        for dir in dirs.into_iter().filter(|d| d.is_dir()) {
            registry.add_package(&dir);
        }
        registry
    }

    /// The package in `dir`, or why it cannot be selected: unreadable, named for another
    /// folder, or taking a bundled engine's id.
    fn add_package(&mut self, dir: &Path) {
        let folder = (dir.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let problem = match package::read(&folder, dir) {
            Ok(engine) if engine.id != folder => PluginError::Manifest {
                path: dir.join(MANIFEST),
                problem: format!(
                    "id `{}` does not match its folder plugins/{folder}",
                    engine.id
                ),
            },
            Ok(engine) if self.engines.contains_key(&engine.id) => PluginError::Taken {
                id: engine.id.clone(),
                what: "bundled".into(),
                fix: "a plugin cannot replace a bundled engine".into(),
            },
            Ok(engine) => {
                self.engines.insert(engine.id.clone(), engine);
                return;
            }
            Err(e) => e,
        };
        self.broken.push((folder, problem));
    }

    /// The engine with this id.
    pub fn get(&self, id: &str) -> Option<&AvailableEngine> {
        self.engines.get(id)
    }

    /// Every engine, by id.
    pub fn all(&self) -> impl Iterator<Item = &AvailableEngine> {
        self.engines.values()
    }

    /// Every engine id, sorted.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.engines.keys().map(String::as_str)
    }

    fn available(&self) -> String {
        self.ids().collect::<Vec<_>>().join(", ")
    }

    /// The engine the slot names, or an error naming it and listing the available ones.
    pub fn resolve(&self, id: &str, config: &Path) -> Result<&AvailableEngine, PluginError> {
        if let Some(engine) = self.get(id) {
            return Ok(engine);
        }
        if let Some((_, broken)) = self.broken.iter().find(|(folder, _)| folder == id) {
            return Err(PluginError::Manifest {
                path: config.to_path_buf(),
                problem: format!("the selected engine `{id}` is installed but broken: {broken}"),
            });
        }
        Err(PluginError::Unknown {
            id: id.to_string(),
            config: config.display().to_string(),
            available: self.available(),
        })
    }

    /// An engine by id for an operator command.
    pub fn find(&self, id: &str) -> Result<&AvailableEngine, PluginError> {
        self.get(id).ok_or_else(|| PluginError::NotFound {
            id: id.to_string(),
            available: self.available(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_engines_are_always_available_and_unknown_ids_list_the_choices() {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::discover(&dir.path().join("plugins"));
        assert!(
            registry
                .get("legacy")
                .is_some_and(AvailableEngine::is_bundled)
        );
        let err = registry
            .resolve("nope", Path::new("/x/ctxhost.json"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("`nope`"), "{err}");
        assert!(
            err.contains("available: checkpoint-manager, legacy, lossless"),
            "{err}"
        );
        assert!(LEGACY_WASM.starts_with(b"\0asm"));
        for (id, _) in BUNDLED {
            assert!(check_schema(&bundled_schema(id)).is_ok(), "{id}");
            let unset = json!({});
            assert_eq!(validate_config(&bundled_schema(id), &unset), Ok(()), "{id}");
        }
        let lossless = registry.get("lossless").expect("bundled");
        assert_eq!(lossless.capabilities(), [Capability::Llm]);
        assert!(
            validate_config(&lossless.config_schema(), &json!({"fanIn": 1})).is_err(),
            "the engine's own schema is enforced"
        );
    }

    #[test]
    fn installed_packages_are_found_and_bad_ones_reported() {
        let dir = tempfile::tempdir().unwrap();
        let plugins = dir.path().join("plugins");
        let write = |folder: &str, text: &str| {
            std::fs::create_dir_all(plugins.join(folder)).unwrap();
            std::fs::write(plugins.join(folder).join(MANIFEST), text).unwrap();
        };
        write(
            "good",
            r#"{"id":"good","kind":"context-engine","component":"good.wasm","configSchema":{}}"#,
        );
        write("bad", "{not json");
        write(
            "elsewhere",
            r#"{"id":"other","kind":"context-engine","component":"o.wasm","configSchema":{}}"#,
        );
        let registry = Registry::discover(&plugins);
        assert_eq!(
            registry.ids().collect::<Vec<_>>(),
            ["checkpoint-manager", "good", "legacy", "lossless"]
        );
        let broken: Vec<String> = registry.broken.iter().map(|(f, _)| f.clone()).collect();
        assert_eq!(broken, ["bad", "elsewhere"]);
        assert!(
            registry.broken[1]
                .1
                .to_string()
                .contains("does not match its folder")
        );
    }
}
