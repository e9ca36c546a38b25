//! Transcript files on disk: whole-file writes are atomic (temp file + fsync + rename, keeping
//! the previous file as a backup), and new entries are appended as whole lines, so a crash
//! leaves at most a torn last line, which loading reports and skips. Opening a file writes
//! nothing: a file that must be rewritten (an older version, a torn last line) is rewritten by
//! its first write, so a session opened and left (a refused compaction) leaves the file and its
//! directory as they were.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::TranscriptError;
use crate::{Entry, Transcript};

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
    /// The file is rewritten whole, as v3, by the next append (it is an older version, or its
    /// last line lacks its newline): appends always start on a fresh line of a v3 file.
    rewrite_first: bool,
    /// Where the previous bytes went, once this writer rewrote the file.
    backup: Option<PathBuf>,
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_os_string();
    s.push(suffix);
    PathBuf::from(s)
}

/// The backup `rewrite_atomically` keeps: `<file>.bak` (or `<file>.bak.N` when `.bak` holds
/// another file's bytes; see [`rewrite_atomically`]).
pub fn backup_path(path: &Path) -> PathBuf {
    with_suffix(path, ".bak")
}

fn open_append(path: &Path) -> Result<File, TranscriptError> {
    OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(|e| TranscriptError::io(path, "cannot open for append", e))
}

/// The entries as v3 lines, each ended by its newline: what one append writes.
fn v3_lines(entries: &[Entry]) -> String {
    let mut buf = String::with_capacity(entries.iter().map(|e| e.v3_line().len() + 1).sum());
    for e in entries {
        buf.push_str(e.v3_line());
        buf.push('\n');
    }
    buf
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
            rewrite_first: false,
            backup: None,
        })
    }

    /// Write the whole transcript (as v3) atomically, then open it for appending.
    pub fn create(path: &Path, transcript: &Transcript) -> Result<TranscriptFile, TranscriptError> {
        let backup = rewrite_atomically(path, &transcript.to_v3_string())?;
        let mut file = Self::opened(path)?;
        file.backup = backup;
        Ok(file)
    }

    /// Load a file and open it for appending. Nothing is written here: a v1/v2 file, or one
    /// whose last line lacks its newline, is rewritten as v3 by the first append (the previous
    /// bytes kept as a backup, see [`TranscriptFile::backup`]). Temp files of killed rewrites
    /// are removed (see [`rewrite_atomically`]).
    pub fn open(path: &Path) -> Result<(TranscriptFile, Transcript), TranscriptError> {
        leftovers::remove_stale(path);
        let text = crate::read::read_text(path)?;
        let mut transcript = Transcript::parse(&text, &path.display().to_string())?;
        let rewrite_first = transcript.is_migrated() || !text.ends_with('\n');
        if rewrite_first {
            // The torn bytes are not silently lost: the rewrite keeps the previous file.
            transcript.note_torn_tail_backup();
        }
        let mut file = Self::opened(path)?;
        // What was parsed, not what is there now: a writer that appended in between is found
        // by the first append.
        file.known_len = text.len() as u64;
        file.rewrite_first = rewrite_first;
        Ok((file, transcript))
    }

    /// Where the file's previous bytes were kept when this writer rewrote it (created over an
    /// existing file, or migrated to v3 by its first append); None while it has not.
    pub fn backup(&self) -> Option<&Path> {
        self.backup.as_deref()
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
        let new = self.entries_from(transcript, from_index)?;
        if new.is_empty() {
            return Ok(());
        }
        self.refuse_if_torn()?;
        self.reopen()?;
        let mut file = self.file.take().expect("reopened above");
        let result = self.write_locked(&mut file, transcript, new);
        // A rewrite left this writer a handle on the new file; the old one reaches only the
        // backup, and dropping it releases its lock. Otherwise the writer keeps its handle for
        // the session (dropping it would release the lock too).
        if self.file.is_none() {
            let _ = file.unlock();
            self.file = Some(file);
        }
        result
    }

    /// Under the file's lock: the whole transcript when the file must be rewritten first, else
    /// the `new` entries appended.
    fn write_locked(
        &mut self,
        file: &mut File,
        transcript: &Transcript,
        new: &[Entry],
    ) -> Result<(), TranscriptError> {
        file.lock()
            .map_err(|e| TranscriptError::io(&self.path, "cannot append", e))?;
        if self.rewrite_first {
            self.rewrite_locked(file, transcript)
        } else {
            self.append_locked(file, v3_lines(new).as_bytes())
        }
    }

    /// The entries an append from `from_index` writes; an index past the end is the caller's
    /// mistake, reported against this file.
    fn entries_from<'t>(
        &self,
        transcript: &'t Transcript,
        from_index: usize,
    ) -> Result<&'t [Entry], TranscriptError> {
        transcript.entries().get(from_index..).ok_or_else(|| {
            TranscriptError::invalid(
                &self.path.display().to_string(),
                from_index + 2,
                format!(
                    "append from entry {from_index}, but the transcript has {} entries",
                    transcript.entries().len()
                ),
            )
        })
    }

    fn refuse_if_torn(&self) -> Result<(), TranscriptError> {
        if !self.torn {
            return Ok(());
        }
        Err(TranscriptError::io(
            &self.path,
            "cannot append",
            std::io::Error::other(
                "an earlier write failed and could not be undone; reopen the session (the torn tail is set aside then)",
            ),
        ))
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

    /// The file's length, when it is still the file this writer read and left: not appended
    /// to, nor replaced by another writer's rewrite.
    fn unchanged_len(&self, file: &File) -> Result<u64, TranscriptError> {
        let io = |e| TranscriptError::io(&self.path, "cannot append", e);
        let ours = file.metadata().map_err(io)?;
        let changed = |found| TranscriptError::Changed {
            file: self.path.display().to_string(),
            expected: self.known_len,
            found,
        };
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let there = std::fs::metadata(&self.path).map_err(io)?;
            if (there.dev(), there.ino()) != (ours.dev(), ours.ino()) {
                return Err(changed(there.len()));
            }
        }
        if ours.len() != self.known_len {
            return Err(changed(ours.len()));
        }
        Ok(ours.len())
    }

    /// The first write to a file that must be migrated: the whole transcript, new entries
    /// included, replaces it atomically, and this writer goes on with the new file.
    fn rewrite_locked(
        &mut self,
        old: &File,
        transcript: &Transcript,
    ) -> Result<(), TranscriptError> {
        self.unchanged_len(old)?;
        let text = transcript.to_v3_string();
        let backup = rewrite_atomically(&self.path, &text)?;
        self.file = Some(open_append(&self.path)?);
        self.known_len = text.len() as u64;
        self.rewrite_first = false;
        self.backup = backup;
        Ok(())
    }

    fn append_locked(&mut self, file: &mut File, buf: &[u8]) -> Result<(), TranscriptError> {
        let io = |e| TranscriptError::io(&self.path, "cannot append", e);
        let good_len = self.unchanged_len(file)?;
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
/// keep the previous file as a backup, rename over. Readers see the old or the new file, never
/// a mix. Returns where the previous file was kept (None when there was none).
///
/// The backup is `<file>.bak`, unless that holds bytes the file being replaced does not begin
/// with (the backup of an earlier version, e.g. a v1 file before its migration): that one is
/// kept and the next free `<file>.bak.N` is used, so a backup is never replaced by another
/// file's.
pub fn rewrite_atomically(path: &Path, contents: &str) -> Result<Option<PathBuf>, TranscriptError> {
    replace(path, contents.as_bytes(), true)
}

/// Replace `path` with `bytes` the same way, keeping no backup: for files that can be made
/// again (the component cache). The one atomic writer of the workspace, with
/// [`rewrite_atomically`]: a reader or a crash sees the old file or the new one.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), TranscriptError> {
    replace(path, bytes, false).map(|_| ())
}

fn replace(
    path: &Path,
    bytes: &[u8],
    keep_backup: bool,
) -> Result<Option<PathBuf>, TranscriptError> {
    leftovers::remove_stale(path);
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = with_suffix(path, &format!(".tmp-{}-{n}", std::process::id()));
    let result = write_and_swap_steps(path, &tmp, bytes, CHUNK, None, keep_backup);
    if result.is_err() {
        // Best effort: a leftover temp file is harmless but untidy.
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Where `rewrite_atomically` keeps the file at `path` before replacing it: `<file>.bak` when
/// that is free or holds nothing the file does not (its prefix: the file before appends),
/// else the first `<file>.bak.N` that is.
fn backup_for(path: &Path) -> PathBuf {
    let first = backup_path(path);
    (0..)
        .map(|n| match n {
            0 => first.clone(),
            n => with_suffix(&first, &format!(".{n}")),
        })
        .find(|bak| !bak.exists() || is_prefix_of(bak, path))
        .expect("an unbounded range ends at a free name")
}

/// Whether the bytes of `prefix` begin the file at `path` (a read error says no: the backup
/// is kept).
fn is_prefix_of(prefix: &Path, path: &Path) -> bool {
    let (Ok(mut a), Ok(mut b)) = (File::open(prefix), File::open(path)) else {
        return false;
    };
    let (Ok(a_meta), Ok(b_meta)) = (a.metadata(), b.metadata()) else {
        return false;
    };
    if !a_meta.is_file() || a_meta.len() > b_meta.len() {
        return false;
    }
    same_bytes(&mut a, &mut b, a_meta.len())
}

/// Whether the next `len` bytes of `a` and `b` are the same (a read error says no).
fn same_bytes(a: &mut File, b: &mut File, len: u64) -> bool {
    use std::io::Read;
    let (mut x, mut y) = (vec![0; CHUNK], vec![0; CHUNK]);
    let mut left = len;
    while left > 0 {
        let n = (CHUNK as u64).min(left) as usize;
        if a.read_exact(&mut x[..n]).is_err() || b.read_exact(&mut y[..n]).is_err() {
            return false;
        }
        if x[..n] != y[..n] {
            return false;
        }
        left -= n as u64;
    }
    true
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

/// The rewrite as a sequence of steps (each temp-file chunk, fsync, backup, rename, directory
/// sync). With `crash_before = Some(n)` it stops before step n as a crash would: no cleanup.
fn write_and_swap_steps(
    path: &Path,
    tmp: &Path,
    contents: &[u8],
    chunk: usize,
    crash_before: Option<usize>,
    keep_backup: bool,
) -> Result<Option<PathBuf>, TranscriptError> {
    let mut steps = Steps::new(path, crash_before);
    let f = write_temp(path, tmp, contents, chunk, &mut steps)?;
    steps.next()?;
    let backup = if keep_backup && path.exists() {
        Some(keep_previous(path)?)
    } else {
        None
    };
    steps.next()?;
    std::fs::rename(tmp, path).map_err(|e| TranscriptError::io(path, "cannot replace file", e))?;
    drop(f);
    steps.next()?;
    sync_parent_dir(path);
    Ok(backup)
}

/// Counts the rewrite's steps; tests stop it before one as a crash would.
struct Steps<'p> {
    path: &'p Path,
    crash_before: Option<usize>,
    taken: usize,
}

impl<'p> Steps<'p> {
    fn new(path: &'p Path, crash_before: Option<usize>) -> Steps<'p> {
        Steps {
            path,
            crash_before,
            taken: 0,
        }
    }

    fn next(&mut self) -> Result<(), TranscriptError> {
        self.taken += 1;
        match self.crash_before {
            Some(n) if self.taken > n => Err(TranscriptError::io(
                self.path,
                "simulated crash",
                std::io::Error::other("crash"),
            )),
            _ => Ok(()),
        }
    }
}

/// The temp file with `contents`, written in chunks and fsynced, with the access of the file
/// at `path`; the returned handle holds its lock.
fn write_temp(
    path: &Path,
    tmp: &Path,
    contents: &[u8],
    chunk: usize,
    steps: &mut Steps,
) -> Result<File, TranscriptError> {
    let write_error = |e| TranscriptError::io(tmp, "cannot write temp file", e);
    let mut f =
        File::create(tmp).map_err(|e| TranscriptError::io(tmp, "cannot create temp file", e))?;
    // Held until the rename: a cleaner never takes a temp file being written for a stale one.
    // Where the file system has no locks, the cleaner's age bound is what protects it.
    let _ = f.lock();
    keep_access(path, &f).map_err(|e| TranscriptError::io(tmp, "cannot set permissions", e))?;
    for part in contents.chunks(chunk.max(1)) {
        steps.next()?;
        f.write_all(part).map_err(write_error)?;
    }
    steps.next()?;
    f.sync_all().map_err(write_error)?;
    Ok(f)
}

/// Keeps the file at `path` as its backup ([`backup_for`]) and says where.
fn keep_previous(path: &Path) -> Result<PathBuf, TranscriptError> {
    let bak = backup_for(path);
    // A hard link keeps the old bytes without copying; copy where links are unsupported.
    let _ = std::fs::remove_file(&bak);
    if std::fs::hard_link(path, &bak).is_err() {
        std::fs::copy(path, &bak)
            .map_err(|e| TranscriptError::io(&bak, "cannot keep backup", e))?;
    }
    Ok(bak)
}

/// Makes a rename durable; not every platform can open a directory, so best effort.
fn sync_parent_dir(path: &Path) {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && let Ok(d) = File::open(dir)
    {
        let _ = d.sync_all();
    }
}

mod leftovers;
#[cfg(test)]
mod tests;
