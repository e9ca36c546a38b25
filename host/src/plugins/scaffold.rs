//! `ctxhost plugins new NAME`: a Rust engine project that builds and installs without edits.

use std::path::{Path, PathBuf};

use super::{PluginError, valid_id};

/// The SDK this binary was built with, for the scaffold's path dependency.
fn default_sdk() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("sdk")
}

/// Creates `parent/<name>/`; `sdk` overrides where the `ctxhost-sdk` crate lives.
pub fn scaffold(parent: &Path, name: &str, sdk: Option<&Path>) -> Result<PathBuf, PluginError> {
    if !valid_id(name) {
        return Err(PluginError::Scaffold(format!(
            "`{name}` is not a valid engine id: use [a-z0-9][a-z0-9._-]* (e.g. my-engine)"
        )));
    }
    let sdk = sdk.map(Path::to_path_buf).unwrap_or_else(default_sdk);
    let sdk = std::fs::canonicalize(&sdk).map_err(|e| {
        PluginError::Scaffold(format!(
            "cannot find ctxhost-sdk at {} ({e}); pass --sdk PATH to the sdk/ folder of a ctxhost checkout",
            sdk.display()
        ))
    })?;
    let dir = parent.join(name);
    if dir.exists() {
        return Err(PluginError::Scaffold(format!(
            "{} already exists; choose another name or remove it",
            dir.display()
        )));
    }
    let crate_name = name.replace(['-', '.'], "_");
    let type_name: String = name
        .split(['-', '.', '_'])
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect();
    let files = [
        ("Cargo.toml", cargo_toml(name, &sdk)),
        ("src/lib.rs", lib_rs(name, &type_name)),
        ("ctxhost.plugin.json", manifest(name, &crate_name)),
        ("README.md", readme(name)),
        (".gitignore", "/target\n".to_string()),
    ];
    for (file, text) in files {
        let path = dir.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| PluginError::Io {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        std::fs::write(&path, text).map_err(|source| PluginError::Io { path, source })?;
    }
    Ok(dir)
}

fn cargo_toml(name: &str, sdk: &Path) -> String {
    format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"

# Not part of any enclosing workspace.
[workspace]

[lib]
crate-type = ["cdylib", "rlib"]

[dependencies]
ctxhost-sdk = {{ path = "{sdk}" }}

[profile.release]
strip = true
"#,
        sdk = sdk.display().to_string().replace('\\', "/")
    )
}

fn lib_rs(name: &str, type_name: &str) -> String {
    format!(
        r#"//! The `{name}` context engine.

use ctxhost_sdk::{{AssembleRequest, AssembleResult, ContextEngine, EngineInfo, Plan, Result, log}};

/// One instance serves one session; keep per-session state in fields.
#[derive(Default)]
pub struct {type_name} {{
    assembled: u64,
}}

impl ContextEngine for {type_name} {{
    fn info() -> EngineInfo {{
        EngineInfo::new("{name}", "{name}", env!("CARGO_PKG_VERSION"))
    }}

    /// Keeps the whole context; change this to decide what the model sees.
    fn assemble(&mut self, request: AssembleRequest) -> Result<AssembleResult> {{
        self.assembled += 1;
        log::debug(format!("assemble #{{}} over {{}} entries", self.assembled, request.entries.len()));
        Ok(Plan::with_capacity(request.entries.len())
            .keep_all(&request.entries)
            .build())
    }}
}}

ctxhost_sdk::export_engine!({type_name});
"#
    )
}

fn manifest(name: &str, crate_name: &str) -> String {
    let manifest = serde_json::json!({
        "id": name,
        "name": name,
        "version": "0.1.0",
        "kind": "context-engine",
        "component": format!("target/wasm32-wasip2/release/{crate_name}.wasm"),
        "description": format!("The {name} context engine."),
        "capabilities": [],
        "configSchema": {"type": "object"}
    });
    serde_json::to_string_pretty(&manifest).unwrap_or_default() + "\n"
}

fn readme(name: &str) -> String {
    format!(
        r#"# {name}

A ctxhost context engine.

```sh
cargo build --target wasm32-wasip2 --release    # rustup target add wasm32-wasip2, once
ctxhost plugins install -l .                      # link this folder: rebuilds are picked up
ctxhost plugins use {name}
ctxhost doctor
```
"#
    )
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
        assert!(scaffold(parent.path(), "my-engine", None).is_err());
        assert!(scaffold(parent.path(), "Bad Name", None).is_err());
    }
}
