//! Bootstrap files: the workspace's standing instructions (`AGENTS.md`, identity files, extra
//! files named in config), each capped so one huge file cannot crowd out the conversation.

use std::path::{Path, PathBuf};

use serde::Serialize;

/// The marker between the kept head and tail of a truncated file.
pub const TRUNCATION_MARKER: &str = "\n[... content truncated ...]\n";

/// Files read in this order; `CLAUDE.md` stands in when there is no `AGENTS.md`.
const PRIMARY: &str = "AGENTS.md";
const ALTERNATIVE: &str = "CLAUDE.md";
const IDENTITY: &[&str] = &["SOUL.md", "IDENTITY.md", "USER.md", "TOOLS.md", "MEMORY.md"];

/// One bootstrap file as it goes into the system prompt.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BootstrapFile {
    /// The name relative to the workspace.
    pub name: String,
    /// The text, capped at `bootstrapMaxChars` (head and tail kept, [`TRUNCATION_MARKER`] between).
    pub content: String,
    /// Characters before truncation.
    pub original_chars: usize,
    /// Whether the cap cut it.
    pub truncated: bool,
}

/// The workspace's bootstrap files, in prompt order.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BootstrapFiles {
    /// The files that were read.
    pub files: Vec<BootstrapFile>,
    /// Files that exist but could not be read, with why.
    pub warnings: Vec<String>,
}

impl BootstrapFiles {
    /// The files cut to `bootstrapMaxChars`: (name, characters before the cut).
    pub fn truncated_files(&self) -> Vec<(String, usize)> {
        (self.files.iter())
            .filter(|f| f.truncated)
            .map(|f| (f.name.clone(), f.original_chars))
            .collect()
    }
}

/// Reads the bootstrap files of `workspace`; missing files are skipped silently.
pub fn load(workspace: &Path, extra: &[String], max_chars: usize) -> BootstrapFiles {
    let mut out = BootstrapFiles::default();
    for name in file_names(workspace, extra) {
        let path: PathBuf = workspace.join(&name);
        match std::fs::read(&path) {
            Ok(bytes) => out
                .files
                .push(BootstrapFile::capped(name, &bytes, max_chars)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => out
                .warnings
                .push(format!("bootstrap file {} unreadable: {e}", path.display())),
        }
    }
    out
}

/// The bootstrap files to look for, in prompt order: the primary file (or its alternative),
/// the identity files, then the operator's `extra` ones.
fn file_names(workspace: &Path, extra: &[String]) -> Vec<String> {
    let first = if workspace.join(PRIMARY).is_file() {
        PRIMARY
    } else {
        ALTERNATIVE
    };
    let mut names: Vec<String> = std::iter::once(first)
        .chain(IDENTITY.iter().copied())
        .map(String::from)
        .collect();
    let extra: Vec<String> = (extra.iter())
        .filter(|n| !names.contains(n))
        .cloned()
        .collect();
    names.extend(extra);
    names
}

impl BootstrapFile {
    /// The file `name` with text `bytes`, capped at `max_chars`.
    fn capped(name: String, bytes: &[u8], max_chars: usize) -> Self {
        let text = String::from_utf8_lossy(bytes);
        let (content, truncated) = truncate(&text, max_chars);
        BootstrapFile {
            name,
            content,
            original_chars: text.chars().count(),
            truncated,
        }
    }
}

/// Keeps the first 70% and the last 20% of `max_chars` characters around a marker; text that
/// fits is returned whole. Counts characters, so multi-byte text is never split inside one.
pub fn truncate(text: &str, max_chars: usize) -> (String, bool) {
    let chars = text.chars().count();
    if chars <= max_chars {
        return (text.to_string(), false);
    }
    let head = max_chars * 7 / 10;
    let tail = max_chars * 2 / 10;
    let head_end = text.char_indices().nth(head).map_or(text.len(), |(i, _)| i);
    let tail_start = text
        .char_indices()
        .nth(chars - tail)
        .map_or(text.len(), |(i, _)| i);
    let mut out =
        String::with_capacity(head_end + TRUNCATION_MARKER.len() + text.len() - tail_start);
    out.push_str(&text[..head_end]);
    out.push_str(TRUNCATION_MARKER);
    out.push_str(&text[tail_start..]);
    (out, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_keeps_exactly_the_head_and_tail_shares() {
        let text: String = (0..1000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let (out, truncated) = truncate(&text, 100);
        assert!(truncated);
        let (head, tail) = out.split_once(TRUNCATION_MARKER).unwrap();
        assert_eq!(head, &text[..70]);
        assert_eq!(tail, &text[980..]);
        assert_eq!(truncate("short", 100), ("short".to_string(), false));
    }

    #[test]
    fn truncation_never_splits_a_multibyte_character() {
        let text = "日本語のテキスト🙂".repeat(100);
        let (out, _) = truncate(&text, 50);
        let (head, tail) = out.split_once(TRUNCATION_MARKER).unwrap();
        assert_eq!(head.chars().count(), 35);
        assert_eq!(tail.chars().count(), 10);
        assert!(text.starts_with(head) && text.ends_with(tail));
    }

    #[test]
    fn agents_md_wins_over_claude_md_missing_files_are_skipped_and_extras_follow() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("CLAUDE.md"), "claude rules").unwrap();
        std::fs::write(dir.path().join("SOUL.md"), "be kind").unwrap();
        std::fs::write(dir.path().join("NOTES.md"), "x".repeat(50)).unwrap();
        let files = load(dir.path(), &["NOTES.md".into()], 20);
        let names: Vec<&str> = files.files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["CLAUDE.md", "SOUL.md", "NOTES.md"]);
        assert!(files.files[2].truncated);
        assert_eq!(files.files[2].original_chars, 50);
        std::fs::write(dir.path().join("AGENTS.md"), "agents rules").unwrap();
        let files = load(dir.path(), &[], 20);
        assert_eq!(files.files[0].name, "AGENTS.md");
        assert!(files.files.iter().all(|f| f.name != "CLAUDE.md"));
    }
}
