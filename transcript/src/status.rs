//! A session's status without loading its whole file: the latest compaction on the active
//! branch and the entries after its boundary are found by scanning backwards from the end, so
//! `context status` on a 1 GB transcript measures only its tail.
//!
//! One reader, one verdict: first the whole file is checked as loading checks it (`check.rs`:
//! every line through the loader's own scanner or line reader, on every core, in bounded
//! memory), so status refuses what every other command refuses, in the same words, and its
//! warnings are loading's. [`scan_remembering`] keeps what the check verified of the file, so
//! that the next status of the same file checks only the bytes appended since. A file the check saw to be one chain without a compaction (the
//! common shape of a long session) needs no walk: its context is all its messages, which the
//! check counted, and only the lines after the latest usage are read again to measure it.
//!
//! How it works: lines are read from the end in 1 MiB blocks. Each is skimmed for its
//! top-level `type`, `id` and `parentId` (any JSON spelling; nested data is skipped, not
//! searched) to follow the active branch from the leaf back to the latest compaction on it,
//! then on to that compaction's first kept entry. The bytes from that entry to the end, behind
//! the file's header, are then parsed as a transcript of their own, so the context size
//! follows exactly the same rules as [`Transcript::context_tokens`].
//!
//! The compaction count: compactions written by ctxhost record the running count in their
//! `details` (`compactionCount`, `summaryCount`), so the latest one gives it exactly. For a
//! file written by another tool the walk goes on along the active branch to its root,
//! counting the compactions on it ([`CountSource::ActiveBranch`]); a skim stops reading a line
//! once it has the three members, so this costs little more than reading the file.
//!
//! A first entry whose parent is not in the file (a session continued from another file) is a
//! root, as loading makes it: the walk keeps a 32-bit hash of every id it passes, so a parent
//! it never saw is known to be missing without holding the ids themselves.
//!
//! Version 1 files have no ids: every entry's parent is the one before it, so the active
//! branch is the whole file and the walk gathers its context the same way. A v1 boundary is a
//! line index, so a v1 file with a compaction is parsed whole, as is anything else the walk
//! cannot settle (a boundary or parent that is not where a valid file has it, a line of two
//! entries): `status` accepts and rejects exactly what every other command does. A session
//! written by ctxhost is rewritten as v3 by its first write.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use crate::Transcript;
use crate::check::Verdict;
use crate::error::{LoadWarning, TranscriptError};
use crate::record::CompactionRecord;

mod skim;
mod walk;

const BLOCK: usize = 1 << 20;

/// How the compaction count was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountSource {
    /// Recorded by ctxhost in the latest compaction's details: exact.
    Details,
    /// The whole transcript was parsed (v1 files, irregular files): exact.
    FullParse,
    /// The active branch was walked to its root and its compactions counted: exact.
    ActiveBranch,
    /// Not produced any more (a byte search counted every branch and nested data); kept so
    /// callers comparing against it still build.
    ByteSearch,
}

impl CountSource {
    pub fn as_str(self) -> &'static str {
        match self {
            CountSource::Details => "details",
            CountSource::FullParse => "full-parse",
            CountSource::ActiveBranch => "active-branch",
            CountSource::ByteSearch => "byte-search",
        }
    }
}

/// The latest compaction on the active branch.
#[derive(Debug, Clone, PartialEq)]
pub struct LastCompaction {
    pub id: String,
    /// Unix milliseconds (0 when the entry has none or it is unreadable; see `timestamp`).
    pub timestamp_ms: u64,
    /// Unix milliseconds; None when the entry has no readable timestamp (show it as unknown,
    /// not as 1970-01-01).
    pub timestamp: Option<u64>,
    pub tokens_before: u64,
    pub first_kept_entry_id: String,
    pub summary_chars: usize,
    /// The entry's `details` (layer, trigger, tokensAfter, ...), if any.
    pub details: Option<CompactionRecord>,
}

/// What `context status` shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    pub session_id: String,
    /// The version the file is written in.
    pub version: u32,
    pub file_bytes: u64,
    /// Bytes read from the end to measure the context (the whole file for v1). The whole
    /// file is also read once, forward, to check it.
    pub bytes_scanned: u64,
    /// Context size by the TRANSCRIPTS.md rule (usage + estimates, pruning applied).
    pub context_tokens: u64,
    /// Messages the next model call would get (the summary preamble included).
    pub context_messages: usize,
    /// Compactions on the active branch (see [`CountSource`]).
    pub compaction_count: u64,
    /// Summarizing compactions (every layer but `prune`): what the degradation risk counts.
    pub summary_count: u64,
    pub count_source: CountSource,
    pub last_compaction: Option<LastCompaction>,
    /// Torn last line and similar, as loading would report them.
    pub warnings: Vec<LoadWarning>,
}

fn io<'a>(path: &'a Path, action: &'static str) -> impl Fn(std::io::Error) -> TranscriptError + 'a {
    move |e| TranscriptError::io(path, action, e)
}

/// Lines of a file from the last to the first, each with its byte offset.
struct Backwards<'p> {
    file: File,
    path: &'p Path,
    /// `buf[..end]` holds the bytes not yet split into lines: `file[pos..pos + end]`.
    buf: Vec<u8>,
    end: usize,
    pos: u64,
}

impl<'p> Backwards<'p> {
    /// The lines of `file` (of `file_bytes` bytes), from its end.
    fn new(file: File, path: &'p Path, file_bytes: u64) -> Self {
        Backwards {
            file,
            path,
            buf: Vec::new(),
            end: 0,
            pos: file_bytes,
        }
    }

    /// The lines of the transcript at `path` (of `file_bytes` bytes), from its end.
    fn open(path: &'p Path, file_bytes: u64) -> Result<Self, TranscriptError> {
        let file = crate::read::open_transcript(path)?;
        Ok(Self::new(file, path, file_bytes))
    }

    /// The previous line (without its line break) and its offset; None at the start of the
    /// file. Lines are slices of the block buffer: a whole-file walk copies nothing per line.
    fn prev(&mut self) -> Result<Option<(u64, &[u8])>, TranscriptError> {
        loop {
            // The last newline in buf (excluding a trailing one belonging to the line itself)
            // starts the line after it.
            let search_end = self.end.saturating_sub(1);
            if let Some(nl) = memchr::memrchr(b'\n', &self.buf[..search_end]) {
                let line = nl + 1..self.end;
                self.end = nl + 1;
                return Ok(Some(self.line(line)));
            }
            if self.pos == 0 {
                if self.end == 0 {
                    return Ok(None);
                }
                let line = 0..std::mem::take(&mut self.end);
                return Ok(Some(self.line(line)));
            }
            self.read_block_before()?;
        }
    }

    /// The line at `range` of the buffer, read as a full load reads it (same length: offsets
    /// stay true), with its offset.
    #[inline]
    fn line(&mut self, range: std::ops::Range<usize>) -> (u64, &[u8]) {
        crate::lenient::replace_lone_surrogates(&mut self.buf[range.clone()]);
        (
            self.pos + range.start as u64,
            trim_newline(&self.buf[range]),
        )
    }

    /// Reads the block before the buffer's bytes, in front of the part of a line carried
    /// over. The buffer is reused (a walk over a whole file would otherwise allocate and zero
    /// every block).
    fn read_block_before(&mut self) -> Result<(), TranscriptError> {
        let n = (BLOCK as u64).min(self.pos) as usize;
        self.pos -= n as u64;
        let carried = self.end;
        self.buf.resize(n + carried, 0);
        self.buf.copy_within(..carried, n);
        self.file
            .seek(SeekFrom::Start(self.pos))
            .map_err(io(self.path, "cannot seek"))?;
        self.file
            .read_exact(&mut self.buf[..n])
            .map_err(io(self.path, "cannot read transcript"))?;
        self.end = n + carried;
        Ok(())
    }
}

fn trim_newline(mut line: &[u8]) -> &[u8] {
    while let [rest @ .., b'\n' | b'\r'] = line {
        line = rest;
    }
    line
}

/// The status of the transcript at `path`, reading only its tail (see the module docs).
pub fn scan(path: &Path) -> Result<Status, TranscriptError> {
    scan_with(path, None, None)
}

/// [`scan`] for a context window of `window` tokens: recorded usage above the window was
/// measured at another window and does not stand for the context (see
/// [`Transcript::context_tokens`]).
pub fn scan_for_window(path: &Path, window: u64) -> Result<Status, TranscriptError> {
    scan_with(path, Some(window), None)
}

/// [`scan_for_window`] that keeps what the check verified of the file in `checked` (a
/// directory of records, one per transcript), so that the next status of the same file checks
/// only the bytes appended since; the verdict is the one a whole check gives.
pub fn scan_remembering(
    path: &Path,
    window: u64,
    checked: &Path,
) -> Result<Status, TranscriptError> {
    scan_with(path, Some(window), Some(checked))
}

fn scan_with(
    path: &Path,
    window: Option<u64>,
    checked: Option<&Path>,
) -> Result<Status, TranscriptError> {
    let mut file = crate::read::open_transcript(path)?;
    let file_bytes = crate::read::file_len(&file, path)?;
    let head = crate::read::read_head(&mut file, path)?;
    let scan = Scan {
        path,
        window,
        file_bytes,
        head: &head,
    };
    // The whole file is checked as loading checks it first (on every core); what it saw of
    // the file's shape may spare the walk.
    let verdict = scan.check(checked)?;
    let Verdict::Valid(warnings, shape) = verdict else {
        return scan.full_load();
    };
    match scan.measure(file, &shape) {
        Some(status) => Ok(Status { warnings, ..status }),
        // What the walk cannot settle, or a walk that fails on a file loading accepts (which
        // would be wrong): the load answers.
        None => scan.full_load(),
    }
}

/// A file whose status is taken, as far as its head.
struct Scan<'a> {
    path: &'a Path,
    window: Option<u64>,
    file_bytes: u64,
    head: &'a crate::read::Head,
}

impl Scan<'_> {
    /// The file checked as loading checks it, remembering what was checked in `checked`.
    fn check(&self, checked: Option<&Path>) -> Result<Verdict, TranscriptError> {
        let (path, head, file_bytes) = (self.path, self.head, self.file_bytes);
        match checked {
            Some(dir) => crate::check::check_remembering(path, head, file_bytes, dir),
            None => crate::check::check(path, head, file_bytes),
        }
    }

    /// The status from the tail, by the chain's shortcut when the check allows it, else by the
    /// walk; None when neither can settle it.
    fn measure(&self, file: File, shape: &crate::check::Shape) -> Option<Status> {
        let measured = match shape.chain_messages {
            Some(messages) => self.chain_status(messages, shape.torn),
            None => Ok(None),
        };
        if let Ok(Some(status)) = measured {
            return Some(status);
        }
        let walked = walk::walk(self.path, self.window, file, self.file_bytes, self.head);
        walked.ok().flatten()
    }

    /// The status of a file the check found to be one chain without a compaction: its context
    /// is every message of the file (`messages`, counted by the check) and its size the latest
    /// usage plus the estimates of what follows it, so only the lines after that usage are
    /// read, from the end. None when every estimate is needed (the usage does not fit the
    /// window): the walk measures that. `torn`: the last line is torn, not an entry.
    fn chain_status(&self, messages: usize, torn: bool) -> Result<Option<Status>, TranscriptError> {
        let Some((start, tail)) = self.measure_chain_tail(torn)? else {
            return Ok(None);
        };
        let context_tokens = match tail.usage {
            Some(u) if u > self.window.unwrap_or(u64::MAX) => return Ok(None),
            Some(u) => u.saturating_add(tail.trailing),
            None => tail.trailing,
        };
        Ok(Some(Status {
            session_id: self.head.header.id().to_string(),
            version: self.head.header.version(),
            file_bytes: self.file_bytes,
            bytes_scanned: self.file_bytes - start,
            context_tokens,
            context_messages: messages,
            compaction_count: 0,
            summary_count: 0,
            count_source: CountSource::ActiveBranch,
            last_compaction: None,
            warnings: Vec::new(),
        }))
    }

    /// The lines of a chain from the end back to its latest usage, measured, and where the
    /// first of them starts; None when a line does not read as entries (the walk decides).
    fn measure_chain_tail(&self, torn: bool) -> Result<Option<(u64, ChainTail)>, TranscriptError> {
        let mut lines = Backwards::open(self.path, self.file_bytes)?;
        let mut tail = ChainTail::new(self.path, self.head);
        let (mut skip_torn, mut start) = (torn, self.file_bytes);
        while let Some((offset, line)) = lines.prev()? {
            if offset < self.head.body_start {
                break;
            }
            start = offset;
            let Ok(text) = std::str::from_utf8(line) else {
                return Ok(None);
            };
            if text.trim().is_empty() || std::mem::take(&mut skip_torn) {
                continue;
            }
            if tail.add_line(text).is_none() {
                return Ok(None);
            }
            if tail.usage.is_some() {
                break;
            }
        }
        Ok(Some((start, tail)))
    }

    /// The status from a full load: what the walk cannot settle, and the check's doubts.
    fn full_load(&self) -> Result<Status, TranscriptError> {
        let mut t = Transcript::load(self.path)?;
        t.set_context_window(self.window);
        Ok(from_transcript(&t, self.file_bytes, CountSource::FullParse))
    }
}

/// The messages of a chain's tail, newest first, up to the latest usage.
struct ChainTail {
    decode: crate::entry::Decode,
    /// The file, as errors name it.
    source: String,
    /// The latest usage recorded, once reached.
    usage: Option<u64>,
    /// The estimates of the messages after it.
    trailing: u64,
}

impl ChainTail {
    fn new(path: &Path, head: &crate::read::Head) -> Self {
        ChainTail {
            decode: crate::entry::Decode {
                version: head.header.version(),
                index: 0,
                entry_count: usize::MAX,
            },
            source: path.display().to_string(),
            usage: None,
            trailing: 0,
        }
    }

    /// Adds one line's entries, newest first, up to a usage; None when the line does not read
    /// as entries.
    fn add_line(&mut self, text: &str) -> Option<()> {
        let text = std::sync::Arc::new(text.to_string());
        let line_of = |part: &str| {
            let start = part.as_ptr() as usize - text.as_ptr() as usize;
            crate::entry::Line::slice(&text, start..start + part.len())
        };
        let mut entries = Vec::new();
        let (decode, source) = (&self.decode, &self.source);
        crate::lines::read_line(&text, 0, decode, source, &line_of, &mut Vec::new(), |e| {
            entries.push(e)
        })
        .ok()?;
        for e in entries.iter().rev() {
            if e.context_role().is_none() || e.entry_type() == "compaction" {
                continue;
            }
            if e.usage_total().is_some() {
                self.usage = e.usage_total();
                break;
            }
            self.trailing += u64::from(e.tokens());
        }
        Some(())
    }
}

fn from_transcript(t: &Transcript, file_bytes: u64, source: CountSource) -> Status {
    let stats = t.compaction_stats();
    Status {
        session_id: t.header().id().to_string(),
        version: t.header().version(),
        file_bytes,
        bytes_scanned: file_bytes,
        context_tokens: t.context_tokens(),
        context_messages: t.context().len(),
        compaction_count: stats.total as u64,
        summary_count: stats.summarizing as u64,
        count_source: source,
        last_compaction: last_compaction(t),
        warnings: t.warnings().to_vec(),
    }
}

/// The latest compaction on the active branch of `t`.
fn last_compaction(t: &Transcript) -> Option<LastCompaction> {
    let branch = t.active_branch();
    let e = branch
        .iter()
        .rev()
        .map(|&i| &t.entries()[i])
        .find(|e| e.entry_type() == "compaction")?;
    Some(LastCompaction {
        id: e.id().to_string(),
        timestamp_ms: e.timestamp_ms(),
        timestamp: e.timestamp(),
        tokens_before: e.tokens_before(),
        first_kept_entry_id: e.first_kept_entry_id().unwrap_or("").to_string(),
        summary_chars: e.view().map_or(0, |v| v.text.chars().count()),
        details: e.compaction_record().cloned(),
    })
}

#[cfg(test)]
mod tests;
