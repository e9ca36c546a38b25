//! What a mirror holds on the machine besides its session: the right to write the file (the
//! session lock, or what the file was when it was let go) and an ephemeral session's directory.

use std::path::Path;
use std::sync::Arc;

use crate::lock::SessionLock;
use crate::scratch::ScratchRoot;
use ctxhost::error::{Error, Result};

/// Whether the session lock is held, and if not, what the mirror file was when it was let go.
pub(super) enum Lock {
    Held(SessionLock),
    /// Another process may have opened the session and written the mirror since: a file
    /// that is not this one any more is read again on `resume`.
    Released(Option<FileState>),
}

/// What tells a mirror file written since from one that was not: a rewrite is a new inode,
/// an append a new length and modification time.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct FileState {
    dev: u64,
    inode: u64,
    len: u64,
    modified: Option<std::time::SystemTime>,
}

impl FileState {
    pub(super) fn of(path: &Path) -> Option<FileState> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        Some(FileState {
            dev: meta.dev(),
            inode: meta.ino(),
            len: meta.len(),
            modified: meta.modified().ok(),
        })
    }
}

/// An ephemeral session's directory, inside this process's scratch directory.
pub(super) struct Scratch {
    /// Declared first: removed before the process's directory may be.
    pub(super) dir: tempfile::TempDir,
    _root: Arc<ScratchRoot>,
}

impl Scratch {
    pub(super) fn new() -> Result<Scratch> {
        let root = crate::scratch::root().map_err(|source| Error::Io {
            path: std::env::temp_dir(),
            source,
        })?;
        let dir = tempfile::Builder::new()
            .prefix("session-")
            .tempdir_in(root.dir())
            .map_err(|source| Error::Io {
                path: root.dir().to_path_buf(),
                source,
            })?;
        Ok(Scratch { dir, _root: root })
    }
}
