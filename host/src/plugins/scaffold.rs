//! `ctxhost plugins new NAME [--lang rust|python|javascript]`: an engine project that builds with
//! one command and installs without edits, on a machine that has only this binary and the
//! language's toolchain.
//!
//! The binary carries what a project needs from this repository: the ctxhost-sdk crate, the WIT
//! contract and the workspace's dependency pins (listed by `build.rs`), and the templates in
//! `templates/`. A Rust project gets the SDK vendored under `vendor/ctxhost/` and depends on it
//! by a relative path, so nothing points back at the checkout the binary was built from.

use std::path::{Path, PathBuf};

use super::PluginError;
use super::manifest::check_id;

/// `(path in the ctxhost repository, contents)` of the SDK crate, `wit/`, `Cargo.toml` and
/// `Cargo.lock`, as this binary was built.
const SOURCES: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/sdk_sources.rs"));

/// The contract the Python and JavaScript templates are written against.
const TEMPLATE_CONTRACT: &str = "0.2.0";

/// Where a Rust project keeps the vendored SDK, laid out as the published crate is: the
/// contract it speaks under `sdk/wit/`.
const VENDOR: &str = "vendor/ctxhost";

/// The contract the SDK is generated from; its crate carries it as `wit/` (a link in the
/// repository, a folder in the package).
const SDK_WIT: &str = "wit/0.4.0/";

/// The language of a new engine project.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// A Rust crate using the ctxhost SDK.
    Rust,
    /// A Python component built with componentize-py.
    Python,
    /// A JavaScript component built with componentize-js.
    JavaScript,
}

impl Lang {
    /// The one command that builds the component the manifest names.
    pub fn build_command(self) -> &'static str {
        match self {
            Lang::Rust => "cargo build --target wasm32-wasip2 --release",
            Lang::Python => {
                "componentize-py -d wit -w context-engine componentize app -o engine.wasm"
            }
            Lang::JavaScript => "npm run build",
        }
    }
}

/// Creates a Rust project in `parent/<name>/`; `sdk` makes it depend on that ctxhost-sdk
/// folder instead of the vendored copy.
pub fn scaffold(parent: &Path, name: &str, sdk: Option<&Path>) -> Result<PathBuf, PluginError> {
    scaffold_lang(parent, name, Lang::Rust, sdk)
}

/// Creates a project of `lang` in `parent/<name>/`.
pub fn scaffold_lang(
    parent: &Path,
    name: &str,
    lang: Lang,
    sdk: Option<&Path>,
) -> Result<PathBuf, PluginError> {
    check_id(name)?;
    let dir = parent.join(name);
    if dir.exists() {
        return Err(PluginError::ScaffoldExists { path: dir });
    }
    let files = match lang {
        Lang::Rust => rust_files(name, sdk)?,
        Lang::Python => python_files(name)?,
        Lang::JavaScript => javascript_files(name)?,
    };
    // Written into a staging folder and renamed, so a failure leaves no half project behind.
    std::fs::create_dir_all(parent).map_err(|source| PluginError::Io {
        path: parent.to_path_buf(),
        source,
    })?;
    let staging = tempfile::Builder::new()
        .prefix(&format!(".{name}-"))
        .tempdir_in(parent)
        .map_err(|source| PluginError::Io {
            path: parent.to_path_buf(),
            source,
        })?;
    for (file, text) in files {
        let path = staging.path().join(&file);
        if let Some(folder) = path.parent() {
            std::fs::create_dir_all(folder).map_err(|source| PluginError::Io {
                path: folder.to_path_buf(),
                source,
            })?;
        }
        std::fs::write(&path, text).map_err(|source| PluginError::Io {
            path: dir.join(&file),
            source,
        })?;
    }
    let staged = staging.keep();
    std::fs::rename(&staged, &dir).map_err(|source| {
        let _ = std::fs::remove_dir_all(&staged);
        PluginError::Io {
            path: dir.clone(),
            source,
        }
    })?;
    Ok(dir)
}

type Files = Vec<(String, String)>;

fn source(path: &str) -> Result<&'static str, PluginError> {
    SOURCES
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, text)| *text)
        .ok_or_else(|| PluginError::NotCarried {
            path: path.to_string(),
        })
}

fn fill(template: &str, name: &str) -> String {
    template
        .replace("__NAME__", name)
        .replace("__TYPE__", &type_name(name))
        .replace("__CRATE__", &name.replace(['-', '.'], "_"))
        .replace("__CTXHOST_VERSION__", env!("CARGO_PKG_VERSION"))
}

/// `my-engine` → `MyEngine`.
fn type_name(name: &str) -> String {
    let mut out: String = name
        .split(['-', '.', '_'])
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect();
    // An id may start with a digit; a Rust type may not.
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'E');
    }
    out
}

fn manifest(name: &str, component: &str, schema: serde_json::Value) -> String {
    let manifest = serde_json::json!({
        "id": name,
        "name": name,
        "version": "0.1.0",
        "kind": "context-engine",
        "component": component,
        "description": format!("The {name} context engine."),
        "capabilities": [],
        "configSchema": schema,
    });
    serde_json::to_string_pretty(&manifest).unwrap_or_default() + "\n"
}

/// The config schema every template reads (`keepLast`).
fn keep_last_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {"keepLast": {"type": "integer", "minimum": 1}}
    })
}

fn rust_files(name: &str, sdk: Option<&Path>) -> Result<Files, PluginError> {
    let crate_name = name.replace(['-', '.'], "_");
    let dependency = match sdk {
        Some(sdk) => {
            let sdk = std::fs::canonicalize(sdk).map_err(|cause| PluginError::SdkPath {
                path: sdk.to_path_buf(),
                cause,
            })?;
            let sdk = sdk.display().to_string().replace('\\', "/");
            format!("ctxhost-sdk = {{ path = {sdk:?} }}")
        }
        None => format!("ctxhost-sdk = {{ path = \"{VENDOR}/sdk\" }}"),
    };
    let mut files: Files = vec![
        (
            "Cargo.toml".into(),
            fill(include_str!("../../../templates/rust/Cargo.toml"), name)
                .replace("__SDK_DEPENDENCY__", &dependency),
        ),
        (
            "src/lib.rs".into(),
            fill(include_str!("../../../templates/rust/src/lib.rs"), name),
        ),
        (
            "README.md".into(),
            fill(include_str!("../../../templates/rust/README.md"), name),
        ),
        (
            "ctxhost.plugin.json".into(),
            manifest(
                name,
                &format!("target/wasm32-wasip2/release/{crate_name}.wasm"),
                keep_last_schema(),
            ),
        ),
        (".gitignore".into(), "/target\n".into()),
        // The pins this ctxhost's SDK was built and tested with; cargo drops what is unused.
        ("Cargo.lock".into(), source("Cargo.lock")?.to_string()),
    ];
    if sdk.is_none() {
        files.extend(vendored_sdk()?);
    }
    Ok(files)
}

/// The SDK crate and the WIT under `vendor/ctxhost/`, the SDK's manifest made standalone.
fn vendored_sdk() -> Result<Files, PluginError> {
    let mut files = Files::new();
    for (path, text) in SOURCES {
        if path.starts_with("sdk/src/") {
            files.push((format!("{VENDOR}/{path}"), text.to_string()));
        } else if let Some(wit) = path.strip_prefix(SDK_WIT) {
            files.push((format!("{VENDOR}/sdk/wit/{wit}"), text.to_string()));
        }
    }
    files.push((
        format!("{VENDOR}/sdk/Cargo.toml"),
        standalone_manifest(source("sdk/Cargo.toml")?, source("Cargo.toml")?)?,
    ));
    files.push((
        format!("{VENDOR}/README.md"),
        format!(
            "The ctxhost-sdk crate and the WIT contract as carried by ctxhost {}, written by\n\
             `ctxhost plugins new`. Do not edit: a newer ctxhost writes a newer copy.\n",
            env!("CARGO_PKG_VERSION")
        ),
    ));
    Ok(files)
}

/// The SDK's `Cargo.toml` with every `key.workspace = true` replaced by the workspace's value,
/// so it builds outside the workspace.
fn standalone_manifest(sdk: &str, workspace: &str) -> Result<String, PluginError> {
    let package = table(workspace, "workspace.package");
    let dependencies = table(workspace, "workspace.dependencies");
    let mut out = String::new();
    let mut section = String::new();
    for line in sdk.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            section = trimmed.trim_matches(['[', ']']).to_string();
        }
        let inherited = trimmed
            .strip_suffix("true")
            .map(str::trim_end)
            .and_then(|l| l.strip_suffix('='))
            .map(str::trim_end)
            .and_then(|l| l.strip_suffix(".workspace"));
        let Some(key) = inherited else {
            out += line;
            out.push('\n');
            continue;
        };
        let values = if section == "package" {
            &package
        } else {
            &dependencies
        };
        let value =
            values
                .iter()
                .find(|(k, _)| k == key)
                .ok_or_else(|| PluginError::SdkManifest {
                    section: section.to_string(),
                    key: key.to_string(),
                })?;
        out += &format!("{key} = {}\n", value.1);
    }
    Ok(out)
}

/// The `key = value` pairs of a TOML table (values may span lines while brackets are open).
fn table(toml: &str, name: &str) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    let mut inside = false;
    let mut open = 0i32;
    for line in toml.lines() {
        let code = line.split(" #").next().unwrap_or("").trim_end();
        if open > 0 {
            if let Some((_, value)) = pairs.last_mut() {
                value.push('\n');
                value.push_str(code);
            }
            open += depth(code);
            continue;
        }
        let trimmed = code.trim();
        if trimmed.starts_with('[') {
            inside = trimmed == format!("[{name}]");
            continue;
        }
        if !inside || trimmed.starts_with('#') {
            continue;
        }
        if let Some((key, value)) = trimmed.split_once('=') {
            let value = value.trim().to_string();
            open = depth(&value);
            pairs.push((key.trim().to_string(), value));
        }
    }
    pairs
}

fn depth(text: &str) -> i32 {
    let mut depth = 0;
    let mut in_string = false;
    for c in text.chars() {
        match c {
            '"' => in_string = !in_string,
            '[' | '{' if !in_string => depth += 1,
            ']' | '}' if !in_string => depth -= 1,
            _ => {}
        }
    }
    depth
}

/// The WIT file of the contract the Python and JavaScript templates implement.
fn template_wit() -> Result<&'static str, PluginError> {
    let header = format!("package ctxhost:engine@{TEMPLATE_CONTRACT};");
    SOURCES
        .iter()
        .find(|(path, text)| path.starts_with("wit/") && text.contains(&header))
        .map(|(_, text)| *text)
        .ok_or_else(|| PluginError::NoTemplateWit {
            contract: TEMPLATE_CONTRACT.to_string(),
        })
}

fn python_files(name: &str) -> Result<Files, PluginError> {
    Ok(vec![
        (
            "app.py".into(),
            fill(include_str!("../../../templates/python/app.py"), name),
        ),
        (
            "ctxhost_engine.py".into(),
            fill(
                include_str!("../../../templates/python/ctxhost_engine.py"),
                name,
            ),
        ),
        (
            "README.md".into(),
            fill(include_str!("../../../templates/python/README.md"), name),
        ),
        ("wit/engine.wit".into(), template_wit()?.to_string()),
        (
            "ctxhost.plugin.json".into(),
            manifest(name, "engine.wasm", keep_last_schema()),
        ),
        (
            ".gitignore".into(),
            "/engine.wasm\n/wit_world/\n/componentize_py_*\n/poll_loop.py\n__pycache__/\n".into(),
        ),
    ])
}

fn javascript_files(name: &str) -> Result<Files, PluginError> {
    Ok(vec![
        (
            "engine.js".into(),
            fill(
                include_str!("../../../templates/javascript/engine.js"),
                name,
            ),
        ),
        (
            "package.json".into(),
            fill(
                include_str!("../../../templates/javascript/package.json"),
                name,
            ),
        ),
        (
            "README.md".into(),
            fill(
                include_str!("../../../templates/javascript/README.md"),
                name,
            ),
        ),
        ("wit/engine.wit".into(), template_wit()?.to_string()),
        (
            "ctxhost.plugin.json".into(),
            manifest(name, "engine.wasm", keep_last_schema()),
        ),
        (".gitignore".into(), "/engine.wasm\n/node_modules/\n".into()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaffold_writes_a_project_and_refuses_bad_names_and_existing_dirs() {
        let parent = tempfile::tempdir().unwrap();
        let dir = scaffold(parent.path(), "my-engine", None).unwrap();
        let manifest = super::super::Manifest::read(&dir).unwrap();
        assert_eq!(manifest.id, "my-engine");
        assert_eq!(
            manifest.component,
            "target/wasm32-wasip2/release/my_engine.wasm"
        );
        let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
        assert!(lib.contains("export_engine!(MyEngine)"), "{lib}");
        assert!(!lib.contains("__"), "unfilled placeholder in {lib}");
        let cargo = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        assert!(
            cargo.contains(r#"ctxhost-sdk = { path = "vendor/ctxhost/sdk" }"#),
            "{cargo}"
        );
        assert!(dir.join("vendor/ctxhost/sdk/src/lib.rs").is_file());
        // The contract sits where the published crate carries it, its included versions too.
        for wit in ["engine.wit", "deps/ctxhost-engine-0.3.0/engine.wit"] {
            assert!(
                dir.join("vendor/ctxhost/sdk/wit").join(wit).is_file(),
                "{wit}"
            );
        }
        assert!(scaffold(parent.path(), "my-engine", None).is_err());
        assert!(scaffold(parent.path(), "Bad Name", None).is_err());
        let names: Vec<_> = std::fs::read_dir(parent.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, ["my-engine"], "no staging folder is left behind");
    }

    #[test]
    fn the_vendored_sdk_manifest_inherits_nothing_from_a_workspace() {
        let manifest = standalone_manifest(
            source("sdk/Cargo.toml").unwrap(),
            source("Cargo.toml").unwrap(),
        )
        .unwrap();
        assert!(!manifest.contains(".workspace"), "{manifest}");
        assert!(manifest.contains("edition = \"2024\""), "{manifest}");
        assert!(manifest.contains("wit-bindgen = {"), "{manifest}");
        let multi = "[workspace.dependencies]\nw = { version = \"1\", features = [\n    \"a\",\n] }\nx = \"2\" # note\n";
        let sdk =
            "[package]\nname = \"s\"\n[dependencies]\nw.workspace = true\nx.workspace = true\n";
        assert_eq!(
            standalone_manifest(sdk, multi).unwrap(),
            "[package]\nname = \"s\"\n[dependencies]\nw = { version = \"1\", features = [\n    \"a\",\n] }\nx = \"2\"\n"
        );
        let err = standalone_manifest("[dependencies]\ny.workspace = true\n", multi).unwrap_err();
        assert!(err.to_string().contains("`y`"), "{err}");
    }

    #[test]
    fn the_embedded_sources_are_the_repository_files() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for (path, text) in SOURCES {
            let on_disk = std::fs::read_to_string(root.join(path)).unwrap();
            assert_eq!(&on_disk, text, "{path} is stale; rebuild");
        }
        for required in ["sdk/src/lib.rs", "sdk/Cargo.toml", "Cargo.lock"] {
            assert!(source(required).is_ok(), "{required}");
        }
        assert!(template_wit().unwrap().contains("interface engine"));
    }

    #[test]
    fn every_language_has_a_project_with_no_placeholders_left() {
        let parent = tempfile::tempdir().unwrap();
        for (lang, entry) in [
            (Lang::Python, "app.py"),
            (Lang::JavaScript, "engine.js"),
            (Lang::Rust, "src/lib.rs"),
        ] {
            let name = format!("{lang:?}-engine").to_lowercase();
            let dir = scaffold_lang(parent.path(), &name, lang, None).unwrap();
            let text = std::fs::read_to_string(dir.join(entry)).unwrap();
            assert!(text.contains(&name), "{entry}");
            for file in ["README.md", entry] {
                let text = std::fs::read_to_string(dir.join(file)).unwrap();
                assert!(!text.contains("__NAME__"), "{file}");
            }
            super::super::Manifest::read(&dir).unwrap();
        }
        assert_eq!(type_name("1st.engine_x"), "E1stEngineX");
    }
}
