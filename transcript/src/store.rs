//! Transcript files on disk: whole-file writes are atomic (temp file + fsync + rename, keeping
//! a `.bak`), and new entries are appended as whole lines, so a crash leaves at most a torn last
//! line, which loading reports and skips.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::TranscriptError;
use crate::transcript::Transcript;

/// An append-only writer for a v3 transcript file.
#[derive(Debug)]
pub struct TranscriptFile {
    path: PathBuf,
    /// None while released ([`TranscriptFile::release_handle`]); the next append reopens it.
    file: Option<File>,
    sync: bool,
    /// A failed append left bytes that could not be cut off: nothing more may be appended.
    torn: bool,
    /// The file's length as this writer last saw it: an append finding it longer knows another
    /// writer appended meanwhile.
    known_len: u64,
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_os_string();
    s.push(suffix);
    PathBuf::from(s)
}

/// The backup `rewrite_atomically` keeps: `<file>.bak`.
pub fn backup_path(path: &Path) -> PathBuf {
    with_suffix(path, ".bak")
}

fn open_append(path: &Path) -> Result<File, TranscriptError> {
    OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(|e| TranscriptError::io(path, "cannot open for append", e))
}

impl TranscriptFile {
    fn opened(path: &Path) -> Result<TranscriptFile, TranscriptError> {
        let file = open_append(path)?;
        let known_len = (file.metadata())
            .map_err(|e| TranscriptError::io(path, "cannot read the length of", e))?
            .len();
        Ok(TranscriptFile {
            path: path.to_path_buf(),
            file: Some(file),
            sync: true,
            torn: false,
            known_len,
        })
    }

    /// Write the whole transcript (as v3) atomically, then open it for appending.
    pub fn create(path: &Path, transcript: &Transcript) -> Result<TranscriptFile, TranscriptError> {
        rewrite_atomically(path, &transcript.to_v3_string())?;
        Self::opened(path)
    }

    /// Load a file and open it for appending. A v1/v2 file is rewritten as v3 first (the old
    /// one kept as `<file>.bak`), and so is a file whose last line lacks its newline, so that
    /// appends always start on a fresh line.
    pub fn open(path: &Path) -> Result<(TranscriptFile, Transcript), TranscriptError> {
        remove_stale_temp_files(path);
        let text = crate::read::read_text(path)?;
        let mut transcript = Transcript::parse(&text, &path.display().to_string())?;
        let mut read_len = text.len() as u64;
        if transcript.is_migrated() || !text.ends_with('\n') {
            let v3 = transcript.to_v3_string();
            rewrite_atomically(path, &v3)?;
            read_len = v3.len() as u64;
            // The torn bytes are not silently lost: the previous file is the backup.
            transcript.note_torn_tail_backup(&backup_path(path));
        }
        let mut file = Self::opened(path)?;
        // What was parsed, not what is there now: a writer that appended in between is found
        // by the first append.
        file.known_len = read_len;
        Ok((file, transcript))
    }

    /// Append `entries[from_index..]` as whole lines in one write, flush, and fsync when sync
    /// is on (the default). Every writer of a transcript (the CLI, `serve`, an embedder) holds
    /// the file's lock while it appends, and an append that finds the file longer than this
    /// writer left it writes nothing ([`TranscriptError::Changed`]): the new entries' parent
    /// would not be the file's real last entry.
    pub fn append(
        &mut self,
        transcript: &Transcript,
        from_index: usize,
    ) -> Result<(), TranscriptError> {
        let Some(new) = transcript.entries().get(from_index..) else {
            return Err(TranscriptError::invalid(
                &self.path.display().to_string(),
                from_index + 2,
                format!(
                    "append from entry {from_index}, but the transcript has {} entries",
                    transcript.entries().len()
                ),
            ));
        };
        if new.is_empty() {
            return Ok(());
        }
        if self.torn {
            return Err(TranscriptError::io(
                &self.path,
                "cannot append",
                std::io::Error::other(
                    "an earlier write failed and could not be undone; reopen the session (the torn tail is set aside then)",
                ),
            ));
        }
        let mut buf = String::with_capacity(new.iter().map(|e| e.v3_line().len() + 1).sum());
        for e in new {
            buf.push_str(e.v3_line());
            buf.push('\n');
        }
        self.reopen()?;
        let mut file = self.file.take().expect("reopened above");
        let result = file
            .lock()
            .map_err(|e| TranscriptError::io(&self.path, "cannot append", e))
            .and_then(|()| self.append_locked(&mut file, buf.as_bytes()));
        // Dropping the handle would release it too; a writer keeps its handle for the session.
        let _ = file.unlock();
        self.file = Some(file);
        result
    }

    /// Opens the handle again if it was released. Safe whenever: the next append checks the
    /// file's length against what this writer left it at.
    pub fn reopen(&mut self) -> Result<(), TranscriptError> {
        if self.file.is_none() {
            self.file = Some(open_append(&self.path)?);
        }
        Ok(())
    }

    /// Closes the handle until the next append (or [`TranscriptFile::reopen`]): a session gone
    /// idle holds no descriptor.
    pub fn release_handle(&mut self) {
        self.file = None;
    }

    fn append_locked(&mut self, file: &mut File, buf: &[u8]) -> Result<(), TranscriptError> {
        let io = |e| TranscriptError::io(&self.path, "cannot append", e);
        let good_len = file.metadata().map_err(io)?.len();
        if good_len != self.known_len {
            return Err(TranscriptError::Changed {
                file: self.path.display().to_string(),
                expected: self.known_len,
                found: good_len,
            });
        }
        let written = file
            .write_all(buf)
            .and_then(|()| file.flush())
            .and_then(|()| if self.sync { file.sync_data() } else { Ok(()) });
        if let Err(e) = written {
            // A full disk or the file size limit (EFBIG) can stop a write part way: cut the
            // file back to its last good length, so what comes next is never glued to a
            // fragment. If even that fails, no later append may be acknowledged.
            let undone = file.set_len(good_len).and_then(|()| file.sync_data());
            if undone.is_err() {
                self.torn = true;
            }
            return Err(io(e));
        }
        self.known_len = good_len + buf.len() as u64;
        Ok(())
    }

    /// Whether appends are fsynced (durable across power loss, slower).
    pub fn set_sync(&mut self, sync: bool) {
        self.sync = sync;
    }

    pub fn sync(&self) -> bool {
        self.sync
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Replace `path` with `contents` atomically: write a temp file in the same directory, fsync,
/// keep the previous file as `<file>.bak`, rename over. Readers see the old or the new file,
/// never a mix.
pub fn rewrite_atomically(path: &Path, contents: &str) -> Result<(), TranscriptError> {
    remove_stale_temp_files(path);
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = with_suffix(path, &format!(".tmp-{}-{n}", std::process::id()));
    let result = write_and_swap(path, &tmp, contents);
    if result.is_err() {
        // Best effort: a leftover temp file is harmless but untidy.
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// A temp file younger than this is left alone even when its writer looks dead: a process in
/// another pid namespace sharing the directory would look dead too.
const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// Remove `<file>.tmp-<pid>-<n>` files a killed rewrite left behind (they can be as large as
/// the transcript). Only files of processes that no longer exist and that have not been
/// written to for [`STALE_AFTER`] are removed; where liveness cannot be checked (no
/// `/proc`), nothing is. Best effort: failing to tidy up never fails the caller.
fn remove_stale_temp_files(path: &Path) {
    let proc = Path::new("/proc/self");
    let (Some(name), Some(dir)) = (path.file_name(), path.parent()) else {
        return;
    };
    if !proc.exists() {
        return;
    }
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let prefix = format!("{}.tmp-", name.to_string_lossy());
    let Ok(listing) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in listing.flatten() {
        let file_name = entry.file_name();
        let Some(rest) = file_name.to_str().and_then(|n| n.strip_prefix(&prefix)) else {
            continue;
        };
        let Some((pid, n)) = rest.split_once('-') else {
            continue;
        };
        let (Ok(pid), Ok(_)) = (pid.parse::<u32>(), n.parse::<u64>()) else {
            continue;
        };
        if pid == std::process::id() || Path::new("/proc").join(pid.to_string()).exists() {
            continue; // a rewrite that may still be running
        }
        let old = entry
            .metadata()
            .ok()
            .filter(std::fs::Metadata::is_file)
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= STALE_AFTER);
        if old {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Temp files are written in chunks of this size (each chunk is one crash point in tests).
const CHUNK: usize = 1 << 20;

/// The rewritten file gets the permissions of the one it replaces (a `chmod 600` transcript
/// stays private), and its owner and group where this process may set them.
#[cfg(unix)]
fn keep_access(path: &Path, new: &File) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let Ok(old) = std::fs::metadata(path) else {
        return Ok(()); // a new file: the defaults
    };
    new.set_permissions(old.permissions())?;
    // Only root may give a file away; anyone else's rewrite is theirs already.
    let _ = std::os::unix::fs::fchown(new, Some(old.uid()), Some(old.gid()));
    Ok(())
}

/// Elsewhere (the crate also builds for wasm guests): the permissions, no owner.
#[cfg(not(unix))]
fn keep_access(path: &Path, new: &File) -> std::io::Result<()> {
    if let Ok(old) = std::fs::metadata(path) {
        new.set_permissions(old.permissions())?;
    }
    Ok(())
}

fn write_and_swap(path: &Path, tmp: &Path, contents: &str) -> Result<(), TranscriptError> {
    write_and_swap_steps(path, tmp, contents, CHUNK, None)
}

/// The rewrite as a sequence of steps (each temp-file chunk, fsync, backup, rename, directory
/// sync). With `crash_before = Some(n)` it stops before step n as a crash would: no cleanup.
fn write_and_swap_steps(
    path: &Path,
    tmp: &Path,
    contents: &str,
    chunk: usize,
    crash_before: Option<usize>,
) -> Result<(), TranscriptError> {
    let mut step = 0;
    let mut step_ok = || {
        step += 1;
        match crash_before {
            Some(n) if step > n => Err(TranscriptError::io(
                path,
                "simulated crash",
                std::io::Error::other("crash"),
            )),
            _ => Ok(()),
        }
    };
    let mut f =
        File::create(tmp).map_err(|e| TranscriptError::io(tmp, "cannot create temp file", e))?;
    keep_access(path, &f).map_err(|e| TranscriptError::io(tmp, "cannot set permissions", e))?;
    for part in contents.as_bytes().chunks(chunk.max(1)) {
        step_ok()?;
        f.write_all(part)
            .map_err(|e| TranscriptError::io(tmp, "cannot write temp file", e))?;
    }
    step_ok()?;
    f.sync_all()
        .map_err(|e| TranscriptError::io(tmp, "cannot write temp file", e))?;
    drop(f);
    step_ok()?;
    if path.exists() {
        let bak = backup_path(path);
        // A hard link keeps the old bytes without copying; copy where links are unsupported.
        let _ = std::fs::remove_file(&bak);
        if std::fs::hard_link(path, &bak).is_err() {
            std::fs::copy(path, &bak)
                .map_err(|e| TranscriptError::io(&bak, "cannot keep backup", e))?;
        }
    }
    step_ok()?;
    std::fs::rename(tmp, path).map_err(|e| TranscriptError::io(path, "cannot replace file", e))?;
    step_ok()?;
    // Make the rename itself durable; not every platform can open a directory, so best effort.
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && let Ok(d) = File::open(dir)
    {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rewrite_keeps_the_permissions_of_the_file_it_replaces() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, "old\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        rewrite_atomically(&path, "new\n").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
    }
    use serde_json::json;

    fn files_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn rewrite_keeps_a_backup_and_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        rewrite_atomically(&path, "one\n").unwrap();
        assert_eq!(files_in(dir.path()), ["s.jsonl"], "no backup of nothing");
        rewrite_atomically(&path, "two\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two\n");
        assert_eq!(
            std::fs::read_to_string(backup_path(&path)).unwrap(),
            "one\n"
        );
        assert_eq!(files_in(dir.path()), ["s.jsonl", "s.jsonl.bak"]);
        // a failed rewrite (no such directory) names the path and leaves nothing behind
        let err = rewrite_atomically(&dir.path().join("missing/x.jsonl"), "x").unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
        assert_eq!(files_in(dir.path()), ["s.jsonl", "s.jsonl.bak"]);
    }

    #[test]
    fn append_and_reload_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut t = Transcript::new("sess", "/w", "2025-01-01T00:00:00.000Z");
        t.append_message(
            &json!({"role":"user","content":"a"}),
            "2025-01-01T00:00:01.000Z",
        )
        .unwrap();
        let mut f = TranscriptFile::create(&path, &t).unwrap();
        assert_eq!(f.path(), path);
        f.set_sync(false);
        assert!(!f.sync());
        let from = t.entries().len();
        t.append_message(
            &json!({"role":"assistant","content":[{"type":"text","text":"b"}],"stopReason":"stop"}),
            "2025-01-01T00:00:02.000Z",
        )
        .unwrap();
        t.append_message(
            &json!({"role":"user","content":"c"}),
            "2025-01-01T00:00:03.000Z",
        )
        .unwrap();
        f.append(&t, from).unwrap();
        f.append(&t, t.entries().len()).unwrap(); // nothing new: no-op
        assert!(f.append(&t, 99).is_err());
        drop(f);

        let (mut f2, loaded) = TranscriptFile::open(&path).unwrap();
        assert_eq!(loaded.to_v3_string(), t.to_v3_string());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), t.to_v3_string());
        assert!(
            !backup_path(&path).exists(),
            "a v3 file is not rewritten on open"
        );
        let mut loaded = loaded;
        let from = loaded.entries().len();
        loaded
            .append_message(&json!({"role":"user","content":"d"}), "t")
            .unwrap();
        f2.append(&loaded, from).unwrap();
        let again = Transcript::load(&path).unwrap();
        assert_eq!(again.entries().len(), 4);
        assert_eq!(again.context(), vec![0, 1, 2, 3]);
    }

    #[test]
    fn open_migrates_old_files_and_repairs_torn_tails() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.jsonl");
        let v1 = "{\"type\":\"session\",\"id\":\"s\"}\n{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"x\"}}\n";
        std::fs::write(&path, v1).unwrap();
        let (mut f, mut t) = TranscriptFile::open(&path).unwrap();
        assert_eq!(std::fs::read_to_string(backup_path(&path)).unwrap(), v1);
        let on_disk = std::fs::read_to_string(&path).unwrap();
        assert!(on_disk.starts_with("{\"type\":\"session\",\"version\":3,"));
        assert_eq!(on_disk, t.to_v3_string());
        let from = t.entries().len();
        t.append_message(&json!({"role":"user","content":"y"}), "t")
            .unwrap();
        f.append(&t, from).unwrap();
        assert_eq!(Transcript::load(&path).unwrap().entries().len(), 2);

        // a crash mid-append: the torn tail is dropped so the next append starts a fresh line
        let torn = dir.path().join("torn.jsonl");
        std::fs::write(&torn, format!("{}{{\"type\":\"mess", t.to_v3_string())).unwrap();
        let (mut f, mut t2) = TranscriptFile::open(&torn).unwrap();
        assert_eq!(t2.warnings().len(), 1);
        assert!(
            t2.warnings()[0].message.contains("kept in"),
            "{}",
            t2.warnings()[0]
        );
        assert!(
            std::fs::read_to_string(backup_path(&torn))
                .unwrap()
                .ends_with("{\"type\":\"mess")
        );
        let from = t2.entries().len();
        t2.append_message(&json!({"role":"user","content":"z"}), "t")
            .unwrap();
        f.append(&t2, from).unwrap();
        let back = Transcript::load(&torn).unwrap();
        assert!(back.warnings().is_empty());
        assert_eq!(back.entries().len(), 3);
    }

    /// A crash at every step of a rewrite (each temp chunk, fsync, backup, rename) leaves the
    /// file as the old version or the new one, loadable, never a mix; the next rewrite works.
    #[test]
    fn a_crash_at_any_point_of_a_rewrite_leaves_old_or_new() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let old = crate::generate::coding_session(1, 60);
        let new_t = Transcript::parse(&crate::generate::coding_session(2, 80), "n").unwrap();
        let new = new_t.to_v3_string();
        let chunk = new.len() / 7 + 1;
        let mut saw_old = 0;
        let mut saw_new = 0;
        for crash_before in 0.. {
            std::fs::write(&path, &old).unwrap();
            let tmp = dir.path().join(format!("s.jsonl.tmp-crash-{crash_before}"));
            let result = write_and_swap_steps(&path, &tmp, &new, chunk, Some(crash_before));
            let on_disk = std::fs::read_to_string(&path).unwrap();
            assert!(
                on_disk == old || on_disk == new,
                "a mix after crash at step {crash_before}"
            );
            let loaded = Transcript::load(&path).unwrap();
            assert!(loaded.warnings().is_empty());
            if on_disk == old {
                saw_old += 1;
            } else {
                saw_new += 1;
                // the backup holds the old version once the new one is in place
                assert_eq!(std::fs::read_to_string(backup_path(&path)).unwrap(), old);
            }
            // recovery: the next rewrite succeeds whatever was left behind
            rewrite_atomically(&path, &new).unwrap();
            assert_eq!(std::fs::read_to_string(&path).unwrap(), new);
            let _ = std::fs::remove_file(&tmp);
            if result.is_ok() {
                break;
            }
        }
        assert!(saw_old >= 8, "crash points before the rename: {saw_old}");
        assert!(saw_new >= 1);
    }

    #[test]
    fn stale_temp_files_of_dead_rewrites_are_removed_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let t = Transcript::parse(&crate::generate::coding_session(1, 10), "g").unwrap();
        std::fs::write(&path, t.to_v3_string()).unwrap();
        // a pid that has exited: a child we waited for
        let dead = std::process::Command::new("true")
            .spawn()
            .and_then(|mut c| c.wait().map(|_| c.id()))
            .unwrap();
        let aged = std::time::SystemTime::now() - 2 * STALE_AFTER;
        let make = |name: String, old: bool| {
            let p = dir.path().join(name);
            let mut f = File::create(&p).unwrap();
            f.write_all(b"partial").unwrap();
            if old {
                f.set_modified(aged).unwrap();
            }
            p
        };
        let stale = make(format!("s.jsonl.tmp-{dead}-0"), true);
        let fresh = make(format!("s.jsonl.tmp-{dead}-1"), false);
        let live = make(format!("s.jsonl.tmp-{}-7", std::process::id()), true);
        let other = make(format!("other.jsonl.tmp-{dead}-0"), true);
        let odd = make("s.jsonl.tmp-crash-3".to_string(), true);
        let _ = TranscriptFile::open(&path).unwrap();
        assert!(!stale.exists(), "a dead rewrite's old temp file is removed");
        for kept in [&fresh, &live, &other, &odd] {
            assert!(kept.exists(), "{} kept", kept.display());
        }
        // the same on the next rewrite
        let stale = make(format!("s.jsonl.tmp-{dead}-2"), true);
        rewrite_atomically(&path, &t.to_v3_string()).unwrap();
        assert!(!stale.exists());
    }

    #[test]
    fn an_append_after_another_writers_writes_nothing_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, crate::generate::coding_session(1, 6)).unwrap();
        // Two writers, as two processes would have them: each read the file and holds a handle.
        let (mut first, mut first_view) = TranscriptFile::open(&path).unwrap();
        let (mut second, mut second_view) = TranscriptFile::open(&path).unwrap();
        let message = |text: &str| serde_json::json!({ "role": "user", "content": text });
        let at = first_view.entries().len();
        first_view
            .append_message(&message("from the first"), "2026-11-26T00:00:00.000Z")
            .unwrap();
        first.append(&first_view, at).unwrap();
        let before = std::fs::read_to_string(&path).unwrap();

        let at = second_view.entries().len();
        second_view
            .append_message(&message("from the second"), "2026-11-26T00:00:01.000Z")
            .unwrap();
        let refused = second.append(&second_view, at).unwrap_err();
        assert!(
            matches!(refused, TranscriptError::Changed { .. }),
            "{refused}"
        );
        assert!(
            refused.to_string().contains("another writer appended"),
            "{refused}"
        );
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            before,
            "nothing written"
        );

        // The first writer goes on: its own appends are what it expects.
        let at = first_view.entries().len();
        first_view
            .append_message(&message("again"), "2026-11-26T00:00:02.000Z")
            .unwrap();
        first.append(&first_view, at).unwrap();
        let (_, reloaded) = TranscriptFile::open(&path).unwrap();
        assert_eq!(reloaded.entries().len(), first_view.entries().len());
    }

    #[test]
    fn missing_file_error_names_the_path() {
        let err = TranscriptFile::open(Path::new("/nonexistent/dir/s.jsonl")).unwrap_err();
        assert!(
            err.to_string().starts_with("/nonexistent/dir/s.jsonl: "),
            "{err}"
        );
    }
}
