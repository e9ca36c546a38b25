//! Where ephemeral sessions' mirrors live: one scratch directory per server process in the
//! temp dir, `ctxhost-serve-<pid>-<random>`, with a `lock` file its process holds locked for
//! as long as the directory is in use. Session content must not outlive its session: a
//! process killed before removing its directory leaves the lock free, and the next server
//! that starts removes the directory, however recently its owner died and whatever process
//! its pid names now (a pid and an age could not tell that; a lock can).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// A process's scratch directory: `ctxhost-serve-<pid>-<random>`.
const PREFIX: &str = "ctxhost-serve-";

/// A scratch directory being made: locked inside, then renamed to its [`PREFIX`] name, so a
/// directory under that name is locked from the moment it exists.
const STAGING_PREFIX: &str = ".ctxhost-serve-staging-";

/// The file a scratch directory's process holds locked.
const LOCK: &str = "lock";

/// Ephemeral directories of servers before per-process locks: `ctxhost-ephemeral-<pid>-…`.
const LEGACY_PREFIX: &str = "ctxhost-ephemeral-";

/// A directory with no lock to judge it by (a staging directory its maker has not locked
/// yet, a legacy one) is left alone while younger than this.
const UNLOCKED_STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// This process's scratch directory; removed when the last ephemeral session using it goes.
#[derive(Debug)]
pub(crate) struct ScratchRoot {
    dir: PathBuf,
    /// Dropped after `Drop::drop` removed the directory: locked until it is gone.
    _lock: File,
}

impl ScratchRoot {
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for ScratchRoot {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            tracing::warn!("cannot remove {}: {e}", self.dir.display());
        }
    }
}

/// The one scratch directory of this process while any ephemeral session uses it.
static CURRENT: Mutex<Weak<ScratchRoot>> = Mutex::new(Weak::new());

/// This process's scratch directory, made (locked) when no session holds it.
pub(crate) fn root() -> std::io::Result<Arc<ScratchRoot>> {
    let mut current = CURRENT.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(root) = current.upgrade() {
        return Ok(root);
    }
    let root = Arc::new(create()?);
    *current = Arc::downgrade(&root);
    Ok(root)
}

fn create() -> std::io::Result<ScratchRoot> {
    let temp = std::env::temp_dir();
    let staging = tempfile::Builder::new()
        .prefix(&format!("{STAGING_PREFIX}{}-", std::process::id()))
        .tempdir_in(&temp)?;
    let lock = File::create(staging.path().join(LOCK))?;
    // Where the file system has no locks, sweepers cannot take it either and leave the
    // directory alone: the directory works, it is just not swept after a kill.
    if let Err(e) = lock.lock() {
        tracing::debug!("{}: cannot lock: {e}", staging.path().display());
    }
    let rest = (staging.path().file_name().and_then(|n| n.to_str()))
        .and_then(|n| n.strip_prefix(STAGING_PREFIX))
        .expect("named with the prefix above")
        .to_string();
    let dir = temp.join(format!("{PREFIX}{rest}"));
    std::fs::rename(staging.path(), &dir)?;
    Ok(ScratchRoot { dir, _lock: lock })
}

/// Removes the scratch directories of server processes that died without removing them
/// (`kill -9`): those whose lock no process holds. Best effort.
pub(crate) fn remove_abandoned() {
    let Ok(listing) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in listing.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let path = entry.path();
        let abandoned = if name.starts_with(PREFIX) {
            // Locked from birth: no lock file means a removal was cut short.
            lock_is_free(&path).unwrap_or(true)
        } else if name.starts_with(STAGING_PREFIX) {
            // Its maker creates the lock file, then locks it: a free lock in a young staging
            // directory may be one about to be taken.
            lock_is_free(&path) != Some(false) && untouched_for_a_while(&path)
        } else if let Some(rest) = name.strip_prefix(LEGACY_PREFIX) {
            legacy_owner_gone(rest) && untouched_for_a_while(&path)
        } else {
            continue;
        };
        if abandoned
            && let Err(e) = std::fs::remove_dir_all(&path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!("cannot remove {}: {e}", path.display());
        }
    }
}

/// Whether no process holds the lock of the scratch directory at `dir`; None when it has no
/// lock file. A file system without locks answers false: nothing is removed there.
fn lock_is_free(dir: &Path) -> Option<bool> {
    let file = File::open(dir.join(LOCK)).ok()?;
    Some(file.try_lock().is_ok())
}

fn untouched_for_a_while(path: &Path) -> bool {
    (std::fs::symlink_metadata(path).ok())
        .filter(std::fs::Metadata::is_dir)
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age >= UNLOCKED_STALE_AFTER)
}

/// Whether the process that named a legacy directory `<pid>-…` no longer exists (false
/// where that cannot be seen).
fn legacy_owner_gone(rest: &str) -> bool {
    let Some(pid) = (rest.split_once('-')).and_then(|(pid, _)| pid.parse::<u32>().ok()) else {
        return false;
    };
    let proc = Path::new("/proc");
    proc.join("self").exists() && pid != std::process::id() && !proc.join(pid.to_string()).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_processs_directory_stays_and_an_abandoned_one_goes() {
        let root = root().unwrap();
        assert!(root.dir().join(LOCK).exists());
        // An abandoned one, as a killed process leaves it: its lock file, locked by no one.
        let dead = std::env::temp_dir().join(format!("{PREFIX}999999999-test"));
        std::fs::create_dir_all(dead.join("session-x")).unwrap();
        std::fs::write(dead.join(LOCK), "").unwrap();
        std::fs::write(dead.join("session-x/k.jsonl"), "secret").unwrap();
        // One being made, its lock file created and not locked yet.
        let young = std::env::temp_dir().join(format!("{STAGING_PREFIX}999999999-test"));
        std::fs::create_dir_all(&young).unwrap();
        std::fs::write(young.join(LOCK), "").unwrap();
        remove_abandoned();
        assert!(!dead.exists(), "an abandoned directory is removed");
        assert!(young.exists(), "one being made is left to its maker");
        std::fs::remove_dir_all(&young).unwrap();
        assert!(root.dir().exists(), "this process's is kept");
        let dir = root.dir().to_path_buf();
        drop(root);
        assert!(!dir.exists(), "removed once no session uses it");
    }
}
