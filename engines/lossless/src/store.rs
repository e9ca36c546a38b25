//! The tree on disk: one append-only log per session under the engine's state dir,
//!
//! ```text
//! sessions/<safe session id>/nodes.jsonl   a header line, then one node per line
//! sessions/<safe session id>/layout.json   the cut assemble keeps showing (window::Layout)
//! ```
//!
//! Nodes never change once written, so appending them is the whole write path; a crash can at
//! worst leave the last line torn, and [`Store::load`] drops it (rewriting the good lines
//! atomically: a temp file beside the log, then a rename) so later appends start on a clean
//! line. A log that cannot be read as a tree, or was written for another session or fan-in,
//! is reported and the caller rebuilds from the transcript: the transcript is the one source
//! of truth, the log only saves re-summarizing it.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use ctxhost_sdk::serde_json;
use ctxhost_sdk::state_dir::safe_name;
use serde::{Deserialize, Serialize};

use crate::tree::Node;
use crate::window::Layout;

const LOG: &str = "nodes.jsonl";
/// Rewritten whole at each re-cut (rare), so a fresh instance shows what the last one did and
/// its first request still extends the previous one.
const LAYOUT: &str = "layout.json";
const FORMAT: u32 = 1;

/// The log's first line: what the nodes below it were built for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    pub lossless_log: u32,
    pub session: String,
    pub fan_in: u32,
}

/// What a load found.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The nodes, in the order they were written.
    pub nodes: Vec<Node>,
    /// Why the log could not be used as it was (a torn tail dropped, or the whole log
    /// refused), for the engine's log.
    pub problem: Option<String>,
    /// The whole log was refused: it must be started afresh before anything is appended.
    pub refused: bool,
}

/// One session's log.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
    header: Header,
}

impl Store {
    pub fn new(root: &Path, session_id: &str, fan_in: u32) -> Self {
        Store {
            dir: root.join("sessions").join(safe_name(session_id)),
            header: Header {
                lossless_log: FORMAT,
                session: session_id.to_string(),
                fan_in,
            },
        }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join(LOG)
    }

    /// The nodes of the log. A missing log is empty; a torn last line is dropped (and the log
    /// rewritten without it); anything else wrong refuses the whole log, saying why.
    pub fn load(&self) -> Loaded {
        let path = self.path();
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Loaded::default(),
            Err(e) => return refused(format!("{}: {e}", path.display())),
        };
        let mut lines = text.split_inclusive('\n');
        let header = lines
            .next()
            .map(|l| serde_json::from_str::<Header>(l.trim()));
        match header {
            Some(Ok(header)) if header == self.header => {}
            Some(Ok(header)) => {
                return refused(format!(
                    "{} was written for session {:?} with fan-in {}, not {:?} with {}",
                    path.display(),
                    header.session,
                    header.fan_in,
                    self.header.session,
                    self.header.fan_in
                ));
            }
            _ => {
                return refused(format!(
                    "{}: line 1 is not a lossless log header",
                    path.display()
                ));
            }
        }
        let mut nodes = Vec::new();
        let mut good_bytes = text.find('\n').map_or(text.len(), |n| n + 1);
        let mut problem = None;
        for (number, line) in lines.enumerate() {
            // Only the last line can be torn by a crash mid-append.
            let last = good_bytes + line.len() == text.len();
            match serde_json::from_str::<Node>(line.trim_end()) {
                Ok(node) if line.ends_with('\n') => {
                    nodes.push(node);
                    good_bytes += line.len();
                }
                _ if last => {
                    problem = Some(format!(
                        "{}: dropped a torn last line ({} bytes)",
                        path.display(),
                        line.len()
                    ));
                }
                Err(e) => {
                    return refused(format!("{}: line {}: {e}", path.display(), number + 2));
                }
                Ok(_) => {
                    return refused(format!(
                        "{}: line {} is cut short",
                        path.display(),
                        number + 2
                    ));
                }
            }
        }
        if problem.is_some()
            && let Err(e) = write_atomic(&path, &text.as_bytes()[..good_bytes])
        {
            return refused(format!(
                "{}: cannot drop the torn line: {e}",
                path.display()
            ));
        }
        Loaded {
            nodes,
            problem,
            refused: false,
        }
    }

    /// Starts the log afresh: the header alone, written atomically.
    pub fn reset(&self) -> io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        let mut line = serde_json::to_string(&self.header).map_err(io::Error::other)?;
        line.push('\n');
        write_atomic(&self.path(), line.as_bytes())
    }

    /// Appends nodes, one line each (a log that does not exist yet gets its header first).
    pub fn append(&self, nodes: &[Node]) -> io::Result<()> {
        if nodes.is_empty() {
            return Ok(());
        }
        if !self.path().exists() {
            self.reset()?;
        }
        let mut text = String::new();
        for node in nodes {
            text.push_str(&serde_json::to_string(node).map_err(io::Error::other)?);
            text.push('\n');
        }
        let mut file = fs::OpenOptions::new().append(true).open(self.path())?;
        file.write_all(text.as_bytes())?;
        file.flush()
    }
}

impl Store {
    pub fn layout_path(&self) -> PathBuf {
        self.dir.join(LAYOUT)
    }

    /// The layout the last re-cut saved, if there is one that reads (an unreadable one only
    /// costs a re-cut: the next assemble makes a new one).
    pub fn load_layout(&self) -> Option<Layout> {
        let text = fs::read_to_string(self.layout_path()).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Saves the layout atomically.
    pub fn save_layout(&self, layout: &Layout) -> io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        let text = serde_json::to_string(layout).map_err(io::Error::other)?;
        write_atomic(&self.layout_path(), text.as_bytes())
    }

    /// Forgets the saved layout (its tree was rebuilt, so its cut may not be one of the new
    /// tree's).
    pub fn drop_layout(&self) -> io::Result<()> {
        match fs::remove_file(self.layout_path()) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

fn refused(problem: String) -> Loaded {
    Loaded {
        nodes: Vec::new(),
        problem: Some(format!("{problem}; rebuilding from the transcript")),
        refused: true,
    }
}

/// Writes `bytes` to `path` through a temp file beside it and a rename, so a reader sees the
/// old content or the new, never part of one.
fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut temp = path.as_os_str().to_owned();
    temp.push(".tmp");
    let temp = PathBuf::from(temp);
    let written = fs::write(&temp, bytes).and_then(|()| fs::rename(&temp, path));
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::{Author, Facts};

    fn leaf(index: u32) -> Node {
        Node {
            level: 0,
            index,
            first: index * 2,
            last: index * 2 + 1,
            first_id: format!("{:08x}", index * 2),
            last_id: format!("{:08x}", index * 2 + 1),
            messages: 2,
            tokens: 10,
            entries: vec![index * 2, index * 2 + 1],
            summary: format!("leaf {index}"),
            author: Author::Extractive,
            facts: Facts::default(),
        }
    }

    #[test]
    fn nodes_appended_are_loaded_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path(), "sess/1", 4);
        assert!(store.load().nodes.is_empty());
        store.append(&[leaf(0)]).unwrap();
        store.append(&[leaf(1), leaf(2)]).unwrap();
        let loaded = store.load();
        assert_eq!(loaded.problem, None);
        assert_eq!(loaded.nodes, [leaf(0), leaf(1), leaf(2)]);
        assert!(store.path().starts_with(dir.path().join("sessions/sess_1")));
    }

    #[test]
    fn a_torn_last_line_is_dropped_and_appends_continue_cleanly() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path(), "s", 4);
        store.append(&[leaf(0), leaf(1)]).unwrap();
        let text = fs::read_to_string(store.path()).unwrap();
        fs::write(store.path(), &text[..text.len() - 9]).unwrap();
        let loaded = store.load();
        assert_eq!(loaded.nodes, [leaf(0)]);
        assert!(loaded.problem.unwrap().contains("torn last line"));
        store.append(&[leaf(1)]).unwrap();
        assert_eq!(store.load().nodes, [leaf(0), leaf(1)]);
    }

    #[test]
    fn a_layout_is_saved_whole_read_back_and_an_unreadable_one_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path(), "s", 4);
        assert_eq!(store.load_layout(), None);
        let layout = Layout {
            tail_from: 40,
            leaves: 3,
            summaries: vec!["{\"role\":\"custom\"}".into()],
            summary_tokens: 9,
        };
        store.save_layout(&layout).unwrap();
        assert_eq!(store.load_layout(), Some(layout));
        fs::write(store.layout_path(), "{\"tailFrom\":").unwrap();
        assert_eq!(store.load_layout(), None);
        store.drop_layout().unwrap();
        store.drop_layout().unwrap();
        assert!(!store.layout_path().exists());
    }

    #[test]
    fn a_corrupt_line_or_another_sessions_log_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path(), "s", 4);
        store.append(&[leaf(0), leaf(1)]).unwrap();
        let text = fs::read_to_string(store.path()).unwrap();
        fs::write(store.path(), text.replacen("\"level\"", "\"lvl\"", 1)).unwrap();
        let loaded = store.load();
        assert!(loaded.nodes.is_empty() && loaded.refused);
        let problem = loaded.problem.unwrap();
        assert!(problem.contains("line 2") && problem.ends_with("rebuilding from the transcript"));

        store.reset().unwrap();
        let other = Store::new(dir.path(), "s", 8);
        assert!(other.load().problem.unwrap().contains("fan-in 4"));
    }
}
