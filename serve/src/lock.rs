//! One writer per session, across every `ctxhost serve` on a home: agent runtimes start a
//! sidecar per agent process, all on the same home, so the lock is per session (per mirror
//! transcript), never per home. A session holds an exclusive advisory lock on
//! `<mirror>.lock` while it is resident and writes who it is there; a process that opens the
//! same session meanwhile is refused with that. The operating system drops the lock when its
//! holder exits, `kill -9` included, so a lock file left behind never blocks anyone: the next
//! process takes the lock on it.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use ctxhost::error::{Error, QUOTE_BYTES, excerpt};

/// How often a lock is tried again when its file was removed between our open and our lock
/// (its holder let go meanwhile): more than that means something keeps removing it.
const ATTEMPTS: usize = 8;

/// Held while the session may write its mirror; removes its file and lets go when dropped,
/// or only lets go when [`SessionLock::release`]d.
#[derive(Debug)]
pub(crate) struct SessionLock {
    path: PathBuf,
    /// Whether dropping the lock removes its file (not when released for a while).
    remove: bool,
    /// Declared after `path` and dropped after `Drop::drop` removed the file: the file is
    /// removed while still locked, so no one takes a lock on a file that is going away.
    _file: File,
}

/// The lock file of the session whose mirror is at `mirror`.
pub(crate) fn lock_path(mirror: &Path) -> PathBuf {
    let mut name = mirror.as_os_str().to_os_string();
    name.push(".lock");
    PathBuf::from(name)
}

impl SessionLock {
    /// Takes the lock of session `key`, whose mirror is at `mirror`, for this process; refused
    /// with [`Error::SessionInUse`] naming the holder while another holds it.
    pub(crate) fn acquire(mirror: &Path, key: &str) -> Result<SessionLock, Error> {
        let path = lock_path(mirror);
        let io = |source| Error::Io {
            path: path.clone(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        for _ in 0..ATTEMPTS {
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(io)?;
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => return Err(in_use(key, path, &mut file)),
                Err(TryLockError::Error(e)) => return Err(io(e)),
            }
            // The holder we waited on removed the file before letting go: our lock is on a
            // file no one else will open. Open the one at the path now.
            let current = std::fs::metadata(&path);
            let ours = file.metadata().map_err(io)?;
            if !current.is_ok_and(|now| now.ino() == ours.ino() && now.dev() == ours.dev()) {
                continue;
            }
            say_who(&mut file).map_err(io)?;
            return Ok(SessionLock {
                path,
                remove: true,
                _file: file,
            });
        }
        Err(io(std::io::Error::other(format!(
            "the lock file was removed {ATTEMPTS} times while it was being taken"
        ))))
    }

    /// Lets go and leaves the file for the next holder: an idle session gives its lock up
    /// and takes it again on its next call, and creating, emptying and removing the file each
    /// time cost the kernel an inode and a flush per suspension (a third of a busy server's
    /// time with sessions coming and going).
    pub(crate) fn release(mut self) {
        self.remove = false;
    }
}

/// The refusal of session `key` while another process holds its lock `file`, named as it
/// wrote itself there.
fn in_use(key: &str, lock: PathBuf, file: &mut File) -> Error {
    let mut holder = String::new();
    let _ = file.read_to_string(&mut holder);
    let holder = holder.trim();
    Error::SessionInUse {
        key: excerpt(key, QUOTE_BYTES).into_owned(),
        lock,
        holder: if holder.is_empty() {
            "a process that has not said who it is yet".into()
        } else {
            excerpt(holder, QUOTE_BYTES).into_owned()
        },
    }
}

/// Writes who holds the lock into its file, for a process refused it to name.
fn say_who(file: &mut File) -> std::io::Result<()> {
    let me = format!(
        "pid {}, `ctxhost serve`, since {}",
        std::process::id(),
        ctxhost::timestamp::now_iso()
    );
    // Written over, then cut to its length: emptying a file first makes ext4 flush it when it
    // is closed (its guard for files replaced by truncation).
    file.rewind()?;
    file.write_all(me.as_bytes())?;
    file.set_len(me.len() as u64)
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        // Best effort: a lock file left behind is taken over by the next process.
        if self.remove {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_with_the_first_ones_pid_until_it_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let mirror = dir.path().join("agents/main/s.jsonl");
        let first = SessionLock::acquire(&mirror, "agent:main:s").unwrap();
        let refused = SessionLock::acquire(&mirror, "agent:main:s")
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains(&format!("pid {}", std::process::id()))
                && refused.contains("agent:main:s")
                && refused.contains("s.jsonl.lock"),
            "{refused}"
        );
        drop(first);
        assert!(!lock_path(&mirror).exists(), "the lock file goes with it");
        SessionLock::acquire(&mirror, "agent:main:s").unwrap();
    }

    #[test]
    fn a_released_lock_leaves_its_file_to_the_next_holder_who_says_who_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let mirror = dir.path().join("s.jsonl");
        // A longer description than this process writes: what it writes replaces it whole.
        let long = format!("pid 1, `ctxhost serve`, since then{}", " ".repeat(200));
        std::fs::write(lock_path(&mirror), long).unwrap();
        let first = SessionLock::acquire(&mirror, "s").unwrap();
        first.release();
        assert!(lock_path(&mirror).exists(), "released, not removed");
        let again = SessionLock::acquire(&mirror, "s").unwrap();
        let said = std::fs::read_to_string(lock_path(&mirror)).unwrap();
        assert!(
            said.starts_with(&format!("pid {},", std::process::id())),
            "{said}"
        );
        assert!(
            !said.contains("then"),
            "what the last holder wrote is gone: {said}"
        );
        drop(again);
        assert!(!lock_path(&mirror).exists(), "dropped, the file goes");
    }

    #[test]
    fn a_lock_file_its_holder_left_behind_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let mirror = dir.path().join("s.jsonl");
        // What a killed holder leaves: the file with its description, and no lock.
        std::fs::write(lock_path(&mirror), "pid 1, `ctxhost serve`, since then").unwrap();
        let taken = SessionLock::acquire(&mirror, "s").unwrap();
        let said = std::fs::read_to_string(lock_path(&mirror)).unwrap();
        assert!(
            said.starts_with(&format!("pid {},", std::process::id())),
            "{said}"
        );
        drop(taken);
    }

    #[test]
    fn different_sessions_lock_independently() {
        let dir = tempfile::tempdir().unwrap();
        let a = SessionLock::acquire(&dir.path().join("a.jsonl"), "a").unwrap();
        let b = SessionLock::acquire(&dir.path().join("b.jsonl"), "b").unwrap();
        drop((a, b));
    }
}
