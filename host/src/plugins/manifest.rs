//! `ctxhost.plugin.json`: what a plugin package says about itself, checked field by field.

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::PluginError;

/// The manifest file of a plugin package.
pub const MANIFEST: &str = "ctxhost.plugin.json";

/// What an engine may ask the operator for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Capability {
    /// Completion / summarization through the operator's configured model.
    Llm,
    /// A read-only view of a directory the operator names.
    WorkspaceRead,
}

impl Capability {
    /// The capability as manifests and messages spell it (`llm`, `workspace-read`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Llm => "llm",
            Self::WorkspaceRead => "workspace-read",
        }
    }
}

/// `ctxhost.plugin.json`, as read and checked by [`Manifest::read`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// The engine id: folder name, config key and what `info` must answer (see [`valid_id`]).
    pub id: String,
    /// A display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The package's version, for people; the engine reports its own in `info`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The kind of plugin; it must be `context-engine`, the one kind this host runs.
    pub kind: String,
    /// Path of the component inside the package folder.
    pub component: String,
    /// A line for `plugins list`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// What the engine asks for; the operator grants each in `plugins.entries.<id>.grants`.
    #[serde(default)]
    pub capabilities: Vec<Capability>,
    /// JSON Schema of `plugins.entries.<id>.config`; `{}` accepts anything.
    pub config_schema: Value,
}

impl Manifest {
    /// Reads and checks the manifest of the package in `dir`.
    pub fn read(dir: &Path) -> Result<Self, PluginError> {
        let path = dir.join(MANIFEST);
        let problem = |problem: String| PluginError::Manifest {
            path: path.clone(),
            problem,
        };
        let text = std::fs::read_to_string(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => problem(format!(
                "missing: a plugin package is a folder with {MANIFEST} and a component"
            )),
            _ => problem(e.to_string()),
        })?;
        let manifest: Self = serde_json::from_str(&text).map_err(|e| problem(e.to_string()))?;
        manifest.check().map_err(problem)?;
        Ok(manifest)
    }

    fn check(&self) -> Result<(), String> {
        self.check_sizes()?;
        check_id(&self.id).map_err(|e| format!("`id` {e}"))?;
        if self.kind != "context-engine" {
            return Err(format!(
                "`kind` is \"{}\"; this host runs \"context-engine\" plugins",
                self.kind
            ));
        }
        if let Some(version) = &self.version
            && let Err(e) = semver::Version::parse(version)
        {
            return Err(format!(
                "`version` \"{version}\" is not a semantic version (like 1.2.3): {e}"
            ));
        }
        self.check_component()?;
        check_schema(&self.config_schema).map_err(|e| format!("`configSchema`: {e}"))
    }

    /// A manifest's strings are printed by `plugins list` and `doctor`: absurd ones are
    /// refused (naming only their size) before anything quotes them.
    fn check_sizes(&self) -> Result<(), String> {
        for (field, value, max) in [
            ("id", Some(&self.id), MAX_ID),
            ("name", self.name.as_ref(), 256),
            ("version", self.version.as_ref(), 64),
            ("kind", Some(&self.kind), 64),
            ("component", Some(&self.component), 4096),
            ("description", self.description.as_ref(), 4096),
        ] {
            if let Some(value) = value
                && value.len() > max
            {
                return Err(format!(
                    "`{field}` is {} bytes long; at most {max} are allowed",
                    value.len()
                ));
            }
        }
        Ok(())
    }

    /// The component is a relative path inside the package folder.
    fn check_component(&self) -> Result<(), String> {
        let component = Path::new(&self.component);
        let inside = !self.component.is_empty()
            && component
                .components()
                .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
        if !inside {
            return Err(format!(
                "`component` \"{}\" must be a relative path inside the package folder",
                self.component
            ));
        }
        Ok(())
    }

    /// The component's path for a package in `dir`.
    pub fn component_path(&self, dir: &Path) -> PathBuf {
        dir.join(&self.component)
    }
}

/// Longest plugin id (it names folders and config keys).
pub(super) const MAX_ID: usize = 128;

/// The one check of an engine id, wherever one arrives (a manifest's `id`, `plugins new`,
/// `plugins uninstall`), with one error.
pub(crate) fn check_id(id: &str) -> Result<(), PluginError> {
    if valid_id(id) {
        Ok(())
    } else {
        Err(PluginError::InvalidId {
            name: id.to_string(),
        })
    }
}

/// Whether `id` is a valid engine id: `[a-z0-9][a-z0-9._-]*`, at most 128 bytes (it names folders
/// and config keys).
pub fn valid_id(id: &str) -> bool {
    let mut bytes = id.bytes();
    id.len() <= MAX_ID
        && matches!(bytes.next(), Some(b) if b.is_ascii_lowercase() || b.is_ascii_digit())
        && bytes.all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        })
}

/// A schema must be a JSON Schema document (an object or a boolean) that compiles.
pub fn check_schema(schema: &Value) -> Result<(), String> {
    if !(schema.is_object() || schema.is_boolean()) {
        return Err("not a JSON Schema: it must be an object (or true/false)".into());
    }
    jsonschema::validator_for(schema)
        .map(|_| ())
        .map_err(|e| format!("not a valid JSON Schema: {e}"))
}

/// Checks a plugin's config against its schema: `Err((json pointer, rule broken))`.
pub fn validate_config(schema: &Value, config: &Value) -> Result<(), (String, String)> {
    let validator = jsonschema::validator_for(schema).map_err(|e| {
        (
            "".to_string(),
            format!("the plugin's configSchema is invalid: {e}"),
        )
    })?;
    match validator.iter_errors(config).next() {
        None => Ok(()),
        Some(error) => {
            let pointer = error.instance_path().to_string();
            Err((pointer, error.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn write(dir: &Path, manifest: Value) {
        std::fs::write(dir.join(MANIFEST), manifest.to_string()).unwrap();
    }

    fn base() -> Value {
        json!({"id": "my-engine", "name": "Mine", "version": "0.1.0", "kind": "context-engine",
               "component": "my_engine.wasm", "capabilities": ["llm"], "configSchema": {}})
    }

    fn problem(manifest: Value) -> String {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), manifest);
        Manifest::read(dir.path()).unwrap_err().to_string()
    }

    #[test]
    fn a_good_manifest_reads() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), base());
        let manifest = Manifest::read(dir.path()).unwrap();
        assert_eq!(manifest.id, "my-engine");
        assert_eq!(manifest.capabilities, [Capability::Llm]);
        let mut m = base();
        m["version"] = json!("1.2.3-rc.1+build.5");
        write(dir.path(), m);
        assert!(Manifest::read(dir.path()).is_ok());
    }

    #[test]
    fn each_bad_field_is_named() {
        let mut m = base();
        m["id"] = json!("My Engine!");
        assert!(problem(m).contains("`id` \"My Engine!\" must match"));
        let mut m = base();
        m["kind"] = json!("tool");
        assert!(problem(m).contains("`kind`"));
        let mut m = base();
        m["version"] = json!("one");
        assert!(problem(m).contains("`version`"));
        let mut m = base();
        m["version"] = json!("1.2");
        assert!(problem(m).contains("`version` \"1.2\""));
        let mut m = base();
        m["component"] = json!("../../etc/passwd");
        assert!(problem(m).contains("`component`"));
        let mut m = base();
        m["configSchema"] = json!({"type": "no-such-type"});
        assert!(problem(m).contains("`configSchema`"));
        let mut m = base();
        m["configSchema"] = json!(42);
        assert!(problem(m).contains("not a JSON Schema"));
        let mut m = base();
        m.as_object_mut().unwrap().remove("configSchema");
        assert!(problem(m).contains("configSchema"));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(MANIFEST), "{ not json").unwrap();
        let text = Manifest::read(dir.path()).unwrap_err().to_string();
        assert!(text.contains("line 1"), "{text}");
        let empty = tempfile::tempdir().unwrap();
        let text = Manifest::read(empty.path()).unwrap_err().to_string();
        assert!(text.contains("missing"), "{text}");
    }

    #[test]
    fn huge_strings_are_refused_by_size_without_being_quoted() {
        for field in ["id", "name", "description"] {
            let mut m = base();
            m[field] = json!("a".repeat(1 << 20));
            let text = problem(m);
            assert!(
                text.contains(&format!("`{field}` is 1048576 bytes long")),
                "{text}"
            );
            assert!(text.len() < 1024, "{field}: {} bytes", text.len());
        }
        assert!(!valid_id(&"a".repeat(MAX_ID + 1)));
    }

    #[test]
    fn engine_ids_are_checked_once_with_one_error() {
        for good in ["my-engine", "0.1_x", "a", &"a".repeat(MAX_ID)] {
            assert!(check_id(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "..",
            ".hidden",
            "a/b",
            "My-Engine",
            "-x",
            "a b",
            &"a".repeat(MAX_ID + 1),
        ] {
            let text = check_id(bad).unwrap_err().to_string();
            assert!(
                text.starts_with(&format!("\"{bad}\" must match [a-z0-9]"))
                    && text.contains("engine id"),
                "{text}"
            );
        }
    }

    #[test]
    fn config_is_checked_against_the_schema_with_a_pointer() {
        let schema = json!({"type": "object", "properties": {"maxTokens": {"type": "integer", "minimum": 1}}});
        assert!(validate_config(&schema, &json!({"maxTokens": 5})).is_ok());
        let (pointer, rule) = validate_config(&schema, &json!({"maxTokens": "many"})).unwrap_err();
        assert_eq!(pointer, "/maxTokens");
        assert!(rule.contains("integer"), "{rule}");
    }
}
