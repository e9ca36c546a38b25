//! A session's file as a whole: created with the header id a caller chose, and set aside
//! (all of it, or the tail after a cut) beside itself so nothing written is ever lost. Only
//! the holder of the session's file (its lock, when there is one) calls these.

use std::path::{Path, PathBuf};

use ctxhost_transcript::Transcript;
use ctxhost_transcript::store::{TranscriptFile, rewrite_atomically};

use super::Session;
use crate::error::{Error, Result};
use crate::timestamp::now_for_file_name;

impl Session {
    /// Writes an empty transcript of `key` at `path` whose header id is `id`, creating its
    /// directory when missing: a session another program names (a runtime's own session id).
    pub fn create_file(path: &Path, key: &str, id: &str) -> Result<()> {
        create(path, key, id).map(|_| ())
    }

    /// Moves the whole file at `path` to `<file>.<kind>-<time>` (`-2`, `-3`… after the time when
    /// a copy was set aside in the same millisecond, so one never replaces another) and
    /// answers where it went; the next open of `path` starts a new session.
    pub fn set_aside_file(path: &Path, kind: &str) -> Result<PathBuf> {
        let aside = unused_sibling(path, kind);
        std::fs::rename(path, &aside).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(aside)
    }

    /// Moves the bytes of the file at `path` from `cut` on to `<file>.<kind>-<time>` and keeps
    /// the first `cut` (rewritten atomically); answers where the tail went.
    pub fn set_aside_tail(path: &Path, cut: usize, kind: &str) -> Result<PathBuf> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { path, source }
        };
        let text = std::fs::read(path).map_err(io(path))?;
        let cut = cut.min(text.len());
        let aside = unused_sibling(path, kind);
        std::fs::write(&aside, &text[cut..]).map_err(io(&aside))?;
        rewrite_atomically(path, &String::from_utf8_lossy(&text[..cut]))?;
        Ok(aside)
    }
}

/// The file and its transcript for a new session of `key` at `path` with header id `id`.
pub(super) fn create(path: &Path, key: &str, id: &str) -> Result<(TranscriptFile, Transcript)> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|source| Error::Io {
            path: parent.to_path_buf(),
            source,
        })?;
    }
    let transcript = crate::session_file::new_transcript(id, key, path)?;
    Ok((TranscriptFile::create(path, &transcript)?, transcript))
}

/// `<file>.<kind>-<time>` for a copy set aside, with `-2`, `-3`… after the time when a copy
/// was set aside in the same millisecond (a burst of resets): one never replaces another.
/// Only the holder of the session's file sets its copies aside, so no one takes the name
/// between the look and the write.
fn unused_sibling(path: &Path, kind: &str) -> PathBuf {
    let stem = format!("{kind}-{}", now_for_file_name());
    let mut aside = sibling(path, &stem);
    let mut n = 1;
    while aside.symlink_metadata().is_ok() {
        n += 1;
        aside = sibling(path, &format!("{stem}-{n}"));
    }
    aside
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(format!(".{suffix}"));
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_file_carries_the_id_and_tails_set_aside_keep_every_byte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("deep/s.jsonl");
        Session::create_file(&path, "s", "runtime-id-1").unwrap();
        let (_, transcript) = TranscriptFile::open(&path).unwrap();
        assert_eq!(transcript.header().id(), "runtime-id-1");
        let header = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, format!("{header}{{\"torn")).unwrap();
        let aside = Session::set_aside_tail(&path, header.len(), "torn").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), header);
        assert_eq!(std::fs::read_to_string(&aside).unwrap(), "{\"torn");
        let first = Session::set_aside_file(&path, "reset").unwrap();
        std::fs::write(&path, "again").unwrap();
        let second = Session::set_aside_file(&path, "reset").unwrap();
        assert_ne!(first, second, "one copy never replaces another");
        assert!(!path.exists());
        assert_eq!(std::fs::read_to_string(&second).unwrap(), "again");
    }
}
