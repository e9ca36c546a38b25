//! Temp files of killed rewrites (`<file>.tmp-<pid>-<n>`), found by listing a directory once
//! per process: listing it on every open made opening the n-th session of a directory read n
//! names, so opening a sidecar's sessions cost the square of their number.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// An unlocked temp file of a process that looks alive is left alone until it has not been
/// written to for this long: its pid may have been reused, or its writer may be between
/// creating the file and locking it.
pub(super) const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// The temp files found in one directory and not yet removed, by the name of the file they were
/// written for.
type TempsByFile = HashMap<OsString, Vec<OsString>>;

/// Every directory listed so far.
static FOUND: Mutex<Option<HashMap<PathBuf, TempsByFile>>> = Mutex::new(None);

/// Remove the temp files a killed rewrite of `path` left behind (they can be as large as the
/// transcript), whenever a transcript is opened for writing. A rewrite holds a lock on its temp
/// file until the file is renamed into place, so a locked one is never touched, even when its
/// writer looks dead (a process in another pid namespace sharing the directory does). An
/// unlocked one goes when its process no longer exists, or when it has not been written to for
/// [`STALE_AFTER`]. The directory is listed the first time this process tidies in it; a temp
/// file a writer leaves there later is this process's own failure (removed as it fails) or
/// another process's, found when the next process starts. Best effort: failing to tidy up
/// never fails the caller.
pub(super) fn remove_stale(path: &Path) {
    let (Some(name), Some(dir)) = (path.file_name(), path.parent()) else {
        return;
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let mut found = FOUND.lock().unwrap_or_else(PoisonError::into_inner);
    let by_file = found
        .get_or_insert_with(HashMap::new)
        .entry(dir.to_path_buf())
        .or_insert_with(|| list(dir));
    let Some(temps) = by_file.get_mut(name) else {
        return;
    };
    let can_see_processes = Path::new("/proc/self").exists();
    temps.retain(|temp| !remove_if_stale(&dir.join(temp), can_see_processes));
    if temps.is_empty() {
        by_file.remove(name);
    }
}

/// The temp files in `dir`, by the file they were written for.
fn list(dir: &Path) -> TempsByFile {
    let mut by_file = TempsByFile::new();
    let Ok(listing) = std::fs::read_dir(dir) else {
        return by_file;
    };
    for entry in listing.flatten() {
        let temp = entry.file_name();
        if let Some((file, _)) = temp.to_str().and_then(written_for) {
            by_file.entry(file.into()).or_default().push(temp);
        }
    }
    by_file
}

/// The file a temp file's name says it was written for, and the writer's pid:
/// `<file>.tmp-<pid>-<n>`.
fn written_for(temp: &str) -> Option<(&str, u32)> {
    let (file, rest) = temp.rsplit_once(".tmp-")?;
    let (pid, n) = rest.split_once('-')?;
    let (Ok(pid), Ok(_)) = (pid.parse::<u32>(), n.parse::<u64>()) else {
        return None;
    };
    Some((file, pid))
}

/// Removes the temp file at `temp` if it is stale; whether it is gone.
fn remove_if_stale(temp: &Path, can_see_processes: bool) -> bool {
    let Some((_, pid)) = (temp.file_name().and_then(|n| n.to_str())).and_then(written_for) else {
        return true;
    };
    let Ok(file) = File::open(temp) else {
        return true; // gone already
    };
    if file.try_lock().is_err() {
        return false; // a rewrite still writing it (or a file system without locks)
    }
    let writer_gone = can_see_processes
        && pid != std::process::id()
        && !Path::new("/proc").join(pid.to_string()).exists();
    let idle = (file.metadata().ok())
        .filter(std::fs::Metadata::is_file)
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age >= STALE_AFTER);
    (writer_gone || idle) && std::fs::remove_file(temp).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temp_name_says_its_file_and_writer() {
        assert_eq!(written_for("s.jsonl.tmp-42-0"), Some(("s.jsonl", 42)));
        assert_eq!(
            written_for("a.tmp-b.jsonl.tmp-7-3"),
            Some(("a.tmp-b.jsonl", 7))
        );
        assert_eq!(written_for("s.jsonl.tmp-crash-3"), None);
        assert_eq!(written_for("s.jsonl.tmp-42"), None);
        assert_eq!(written_for("s.jsonl"), None);
    }

    #[test]
    fn a_directory_is_listed_once_per_process() {
        let dir = tempfile::tempdir().unwrap();
        let aged = std::time::SystemTime::now() - 2 * STALE_AFTER;
        let plant = |name: &str| {
            let temp = dir.path().join(name);
            File::create(&temp).unwrap().set_modified(aged).unwrap();
            temp
        };
        let before = plant("a.jsonl.tmp-1-0");
        remove_stale(&dir.path().join("a.jsonl"));
        assert!(!before.exists(), "found by the first listing and stale");
        // Left after the listing: this process does not list again for it (the next one will).
        let after = plant("b.jsonl.tmp-1-0");
        remove_stale(&dir.path().join("b.jsonl"));
        assert!(after.exists());
    }
}
