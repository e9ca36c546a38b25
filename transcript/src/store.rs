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
    file: File,
    sync: bool,
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
    /// Write the whole transcript (as v3) atomically, then open it for appending.
    pub fn create(path: &Path, transcript: &Transcript) -> Result<TranscriptFile, TranscriptError> {
        rewrite_atomically(path, &transcript.to_v3_string())?;
        Ok(TranscriptFile {
            path: path.to_path_buf(),
            file: open_append(path)?,
            sync: true,
        })
    }

    /// Load a file and open it for appending. A v1/v2 file is rewritten as v3 first (the old
    /// one kept as `<file>.bak`), and so is a file whose last line lacks its newline, so that
    /// appends always start on a fresh line.
    pub fn open(path: &Path) -> Result<(TranscriptFile, Transcript), TranscriptError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| TranscriptError::io(path, "cannot read transcript", e))?;
        let transcript = Transcript::parse(&text, &path.display().to_string())?;
        if transcript.is_migrated() || !text.ends_with('\n') {
            rewrite_atomically(path, &transcript.to_v3_string())?;
        }
        let file = TranscriptFile {
            path: path.to_path_buf(),
            file: open_append(path)?,
            sync: true,
        };
        Ok((file, transcript))
    }

    /// Append `entries[from_index..]` as whole lines in one write, flush, and fsync when sync
    /// is on (the default).
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
        let mut buf = String::with_capacity(new.iter().map(|e| e.v3_line().len() + 1).sum());
        for e in new {
            buf.push_str(e.v3_line());
            buf.push('\n');
        }
        let io = |e| TranscriptError::io(&self.path, "cannot append", e);
        self.file.write_all(buf.as_bytes()).map_err(io)?;
        self.file.flush().map_err(io)?;
        if self.sync {
            self.file.sync_data().map_err(io)?;
        }
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
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = with_suffix(path, &format!(".tmp-{}-{n}", std::process::id()));
    let result = write_and_swap(path, &tmp, contents);
    if result.is_err() {
        // Best effort: a leftover temp file is harmless but untidy.
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn write_and_swap(path: &Path, tmp: &Path, contents: &str) -> Result<(), TranscriptError> {
    let mut f =
        File::create(tmp).map_err(|e| TranscriptError::io(tmp, "cannot create temp file", e))?;
    f.write_all(contents.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| TranscriptError::io(tmp, "cannot write temp file", e))?;
    drop(f);
    if path.exists() {
        let bak = backup_path(path);
        // A hard link keeps the old bytes without copying; copy where links are unsupported.
        let _ = std::fs::remove_file(&bak);
        if std::fs::hard_link(path, &bak).is_err() {
            std::fs::copy(path, &bak)
                .map_err(|e| TranscriptError::io(&bak, "cannot keep backup", e))?;
        }
    }
    std::fs::rename(tmp, path).map_err(|e| TranscriptError::io(path, "cannot replace file", e))?;
    // Make the rename itself durable; not every platform can open a directory, so best effort.
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && let Ok(d) = File::open(dir)
    {
        let _ = d.sync_all();
    }
    Ok(())
}
