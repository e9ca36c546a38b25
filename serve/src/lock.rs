//! One `ctxhost serve` per home: two servers on one `CTXHOST_HOME` would both commit the same
//! turn into the same mirror. The first takes an exclusive lock on `serve.lock` in the home
//! and writes who it is there; the second is refused with that. The operating system drops the
//! lock when the holder exits, `kill -9` included, so a stale file never blocks a restart.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// Held for as long as the server runs.
#[derive(Debug)]
pub struct HomeLock {
    _file: File,
}

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another server holds the home.
    #[error("{}: another `ctxhost serve` uses this home ({holder}); stop it, or give this one its own CTXHOST_HOME", path.display())]
    Held {
        /// The lock file.
        path: PathBuf,
        /// What the holder wrote about itself.
        holder: String,
    },
    /// The lock file cannot be opened or locked.
    #[error("{}: cannot take the serve lock: {source}", path.display())]
    Io {
        /// The lock file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl HomeLock {
    /// Takes the lock of the home at `root` for this process, described as `what` (e.g.
    /// `stdio` or the socket path) to whoever is refused later.
    pub fn acquire(root: &Path, what: &str) -> Result<HomeLock, LockError> {
        let path = root.join("serve.lock");
        let io = |source| LockError::Io {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(root).map_err(io)?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                return Err(LockError::Held {
                    path,
                    holder: if holder.is_empty() {
                        "it has not said who it is yet".into()
                    } else {
                        holder.chars().take(500).collect()
                    },
                });
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        let me = format!(
            "pid {}, serving {what}, since {}",
            std::process::id(),
            ctxhost::timestamp::now_iso()
        );
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| file.write_all(me.as_bytes()))
            .map_err(io)?;
        Ok(HomeLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_with_the_first_ones_name_until_it_lets_go() {
        let home = tempfile::tempdir().unwrap();
        let first = HomeLock::acquire(home.path(), "stdio").unwrap();
        let refused = HomeLock::acquire(home.path(), "stdio")
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains(&format!("pid {}, serving stdio", std::process::id())),
            "{refused}"
        );
        drop(first);
        HomeLock::acquire(home.path(), "/tmp/s.sock").unwrap();
    }
}
