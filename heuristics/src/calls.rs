//! What a tool call's arguments say about the work: the target it ran on ([`call_target`]) and
//! the files it read or modified ([`FilesTouched`]).
//!
//! The arguments arrive as JSON, which each caller parses with its own JSON crate (this crate
//! has no dependencies); the rules read only their top-level text fields, in document order.

use std::collections::HashSet;

use crate::clip::clip;

/// The arguments that name a call's target, most telling first.
const TARGET_FIELDS: &[&str] = &[
    "path",
    "file_path",
    "command",
    "cmd",
    "url",
    "query",
    "pattern",
];

/// The arguments that name the file a read or edit tool works on.
const PATH_FIELDS: &[&str] = &["path", "file_path"];

/// The value of the first of `names` among `fields` (earlier names win).
fn first_of<'a>(fields: &[(&str, &'a str)], names: &[&str]) -> Option<&'a str> {
    names
        .iter()
        .find_map(|name| fields.iter().find(|(key, _)| key == name).map(|(_, v)| *v))
}

/// What a call ran on, from its top-level text `fields`: the path it names, else the first
/// line of its command, else its first text argument; clipped to `max_chars`.
pub fn call_target(fields: &[(&str, &str)], max_chars: usize) -> String {
    let pick = first_of(fields, TARGET_FIELDS)
        .or_else(|| fields.first().map(|(_, value)| *value))
        .unwrap_or("");
    let first = pick.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    clip(first, max_chars)
}

/// Paths that say nothing durable about the work: scratch files and directories.
pub fn is_transient_path(path: &str) -> bool {
    let p = path.trim();
    p.is_empty()
        || p.ends_with('/')
        || p == "."
        || p.starts_with("/tmp/")
        || p.starts_with("/var/folders/")
        || p.starts_with("/private/var/folders/")
        || p.starts_with("/private/tmp/")
        || p.contains("/TemporaryItems/")
}

/// `read` without the paths also in `modified`: a file both read and modified is listed as
/// modified only.
pub fn drop_modified(read: &mut Vec<String>, modified: &[String]) {
    if read.is_empty() || modified.is_empty() {
        return;
    }
    let modified: HashSet<&str> = modified.iter().map(String::as_str).collect();
    read.retain(|p| !modified.contains(p.as_str()));
}

/// How a tool works on the file its arguments name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileAccess {
    Read,
    Modify,
}

/// The access of a read or edit/write tool, by its name (case aside); `None` for any other.
fn file_access(tool: &str) -> Option<FileAccess> {
    match tool.to_ascii_lowercase().as_str() {
        "read" | "read_file" | "view" => Some(FileAccess::Read),
        "edit" | "write" | "edit_file" | "write_file" | "multiedit" | "multi_edit" => {
            Some(FileAccess::Modify)
        }
        _ => None,
    }
}

/// The files a span's tool calls read and modified, each once, in the order first touched.
#[derive(Debug, Default)]
pub struct FilesTouched {
    read: Vec<String>,
    modified: Vec<String>,
    read_seen: HashSet<String>,
    modified_seen: HashSet<String>,
}

impl FilesTouched {
    /// One call of `tool` with its top-level text `fields`; calls of other tools, without a
    /// path or on a scratch path are passed over.
    pub fn record(&mut self, tool: &str, fields: &[(&str, &str)]) {
        let Some(path) = first_of(fields, PATH_FIELDS) else {
            return;
        };
        if is_transient_path(path) {
            return;
        }
        let (list, seen) = match file_access(tool) {
            Some(FileAccess::Read) => (&mut self.read, &mut self.read_seen),
            Some(FileAccess::Modify) => (&mut self.modified, &mut self.modified_seen),
            None => return,
        };
        if seen.insert(path.to_string()) {
            list.push(path.to_string());
        }
    }

    /// The files read and the files modified; a file both read and modified is listed as
    /// modified only.
    pub fn into_read_and_modified(self) -> (Vec<String>, Vec<String>) {
        let (mut read, modified) = (self.read, self.modified);
        drop_modified(&mut read, &modified);
        (read, modified)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_is_the_path_else_the_command_head_else_the_first_text() {
        let edit = [("old", "x"), ("path", "src/lib.rs")];
        assert_eq!(call_target(&edit, 40), "src/lib.rs");
        let bash = [("command", "\n  cargo test\ncargo build")];
        assert_eq!(call_target(&bash, 40), "cargo test");
        let other = [("topic", "rust"), ("depth", "2")];
        assert_eq!(call_target(&other, 40), "rust");
        assert_eq!(call_target(&[], 40), "");
    }

    #[test]
    fn files_are_listed_once_scratch_paths_left_out_and_modified_wins_over_read() {
        let mut files = FilesTouched::default();
        files.record("Read", &[("path", "src/a.rs")]);
        files.record("read", &[("file_path", "src/b.rs")]);
        files.record("edit", &[("path", "src/a.rs")]);
        files.record("write", &[("path", "src/a.rs")]);
        files.record("write", &[("path", "/tmp/scratch.txt")]);
        files.record("bash", &[("path", "src/c.rs")]);
        files.record("edit", &[("command", "src/d.rs")]);
        assert_eq!(
            files.into_read_and_modified(),
            (vec!["src/b.rs".to_string()], vec!["src/a.rs".to_string()])
        );
    }

    #[test]
    fn scratch_paths_are_transient() {
        for path in ["", "  ", "src/", ".", "/tmp/x", "/private/var/folders/a/b"] {
            assert!(is_transient_path(path), "{path:?}");
        }
        assert!(!is_transient_path("src/tmp/x.rs"));
    }
}
