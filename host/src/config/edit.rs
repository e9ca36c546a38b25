//! Edits of the operator's config file by CLI commands: parse, change one key, check the result
//! still parses as a config, then write it atomically (temp file + rename) keeping `<file>.bak`.
//! Keys the edit does not own are kept; JSON5 comments are not (the `.bak` has them).

use std::path::Path;

use serde_json::{Map, Value};

use crate::config::{Config, ConfigError, ConfigSource};

/// The config file held for one edit: open it, `set` keys, `save`.
pub struct ConfigEditor {
    source: ConfigSource,
    doc: Value,
}

impl ConfigEditor {
    /// The current file (an empty config when it does not exist yet).
    pub fn open(source: &ConfigSource) -> Result<Self, ConfigError> {
        let doc = match std::fs::read_to_string(source.path()) {
            Ok(_) => Config::load(source.clone())?.raw,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Value::Object(Map::new()),
            Err(e) => {
                return Err(ConfigError::Read {
                    path: source.path().to_path_buf(),
                    source: e,
                });
            }
        };
        Ok(Self {
            source: source.clone(),
            doc,
        })
    }

    /// The file being edited.
    pub fn path(&self) -> &Path {
        self.source.path()
    }

    /// The value at `keys` (a path of object members), if present.
    pub fn get(&self, keys: &[&str]) -> Option<&Value> {
        keys.iter().try_fold(&self.doc, |node, key| node.get(key))
    }

    /// Sets `keys` (creating objects on the way; a non-object in the way is replaced).
    pub fn set(&mut self, keys: &[&str], value: Value) {
        let Some((last, parents)) = keys.split_last() else {
            return;
        };
        let mut node = &mut self.doc;
        for key in parents {
            node = object(node)
                .entry(key.to_string())
                .or_insert_with(|| Value::Object(Map::new()));
        }
        object(node).insert(last.to_string(), value);
    }

    /// Checks the edited document is a valid config, then replaces the file atomically.
    pub fn save(&self) -> Result<Config, ConfigError> {
        let path = self.source.path().to_path_buf();
        let text = serde_json::to_string_pretty(&self.doc).unwrap_or_else(|_| "{}".into()) + "\n";
        let config = Config::from_str(&text, &path)?;
        write_keeping_backup(&path, &text).map_err(|source| ConfigError::Read {
            path: path.clone(),
            source,
        })?;
        Ok(Config {
            source: self.source.clone(),
            ..config
        })
    }
}

/// The map in `node`, which becomes an empty object first when it is anything else.
fn object(node: &mut Value) -> &mut Map<String, Value> {
    if !node.is_object() {
        *node = Value::Object(Map::new());
    }
    match node {
        Value::Object(map) => map,
        _ => unreachable!("made an object above"),
    }
}

/// Keeps the file's previous text as a backup (with the comments an edit drops), then replaces
/// it: the transcripts' own atomic rewrite, so a `.bak` of another file is never replaced.
fn write_keeping_backup(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    ctxhost_transcript::store::rewrite_atomically(path, text)
        .map(drop)
        .map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_keep_foreign_keys_write_a_backup_and_refuse_invalid_results() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ctxhost.json");
        std::fs::write(
            &path,
            "{ gateway: { port: 8080 }, // theirs\n plugins: {} }",
        )
        .unwrap();
        let source = ConfigSource::Flag(path.clone());
        let mut editor = ConfigEditor::open(&source).unwrap();
        editor.set(
            &["plugins", "slots", "contextEngine"],
            "checkpoint-manager".into(),
        );
        let config = editor.save().unwrap();
        assert_eq!(config.active_engine(), "checkpoint-manager");
        assert_eq!(config.raw["gateway"]["port"], 8080);
        let backup =
            std::fs::read_to_string(ctxhost_transcript::store::backup_path(&path)).unwrap();
        assert!(backup.contains("// theirs"));

        let mut editor = ConfigEditor::open(&source).unwrap();
        editor.set(&["agents", "defaults", "contextWindow"], "huge".into());
        assert!(editor.save().is_err());
        let after = Config::load(source.clone()).unwrap();
        assert_eq!(after.active_engine(), "checkpoint-manager");
        let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, 2, "only the file and its .bak");
    }

    #[test]
    fn a_missing_file_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let source = ConfigSource::Home(dir.path().join("home/ctxhost.json"));
        let mut editor = ConfigEditor::open(&source).unwrap();
        editor.set(&["plugins", "entries", "x", "enabled"], false.into());
        editor.save().unwrap();
        let config = Config::load(source).unwrap();
        assert_eq!(config.plugin_entry("x").unwrap().enabled, Some(false));
    }
}
