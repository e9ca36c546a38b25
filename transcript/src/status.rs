//! A session's status without parsing its whole file: the latest compaction on the active
//! branch and the entries after its boundary are found by scanning backwards from the end, so
//! `context status` on a 1 GB transcript reads only its tail.
//!
//! How it works: lines are read from the end in 1 MiB blocks. Each is decoded lightly (`type`,
//! `id`, `parentId`, `firstKeptEntryId`) to follow the active branch from the leaf back to the
//! latest compaction on it, then on to that compaction's first kept entry. The bytes from that
//! entry to the end, behind the file's header, are then parsed as a transcript of their own,
//! so the context size follows exactly the same rules as [`Transcript::context_tokens`].
//!
//! The compaction count: compactions written by ctxhost record the running count in their
//! `details` (`compactionCount`, `summaryCount`), so the latest one gives it exactly. For a
//! file written by another tool the count comes from a byte search for `"type":"compaction"`
//! over the whole file (no JSON parsing; ~0.1-0.3 s per GB from the page cache): it counts
//! compactions on every branch, so on a branched file it is an upper bound
//! ([`CountSource::ByteSearch`]).
//!
//! Version 1 files have no ids (a v1 boundary is a line index), so they are parsed whole; a
//! session opened by ctxhost is rewritten as v3 on first open.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::entry::Header;
use crate::error::{LoadWarning, TranscriptError};
use crate::transcript::Transcript;

const BLOCK: usize = 1 << 20;
/// Longest header line read.
const MAX_HEADER: usize = 1 << 20;

/// How the compaction count was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountSource {
    /// Recorded by ctxhost in the latest compaction's details: exact.
    Details,
    /// The whole transcript was parsed (v1 files): exact.
    FullParse,
    /// A byte search over the whole file: every branch counted, an upper bound.
    ByteSearch,
}

impl CountSource {
    pub fn as_str(self) -> &'static str {
        match self {
            CountSource::Details => "details",
            CountSource::FullParse => "full-parse",
            CountSource::ByteSearch => "byte-search",
        }
    }
}

/// The latest compaction on the active branch.
#[derive(Debug, Clone, PartialEq)]
pub struct LastCompaction {
    pub id: String,
    /// Unix milliseconds (0 when the entry has none).
    pub timestamp_ms: u64,
    pub tokens_before: u64,
    pub first_kept_entry_id: String,
    pub summary_chars: usize,
    /// The entry's `details` as written (layer, trigger, tokensAfter, ...), if any.
    pub details: Option<Value>,
}

/// What `context status` shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    pub session_id: String,
    /// The version the file is written in.
    pub version: u32,
    pub file_bytes: u64,
    /// Bytes read from the end to answer (the whole file for v1).
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

#[derive(Deserialize)]
struct Light<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    id: Option<std::borrow::Cow<'a, str>>,
    #[serde(rename = "parentId", borrow)]
    parent_id: Option<std::borrow::Cow<'a, str>>,
    #[serde(rename = "firstKeptEntryId", borrow)]
    first_kept: Option<std::borrow::Cow<'a, str>>,
}

fn io<'a>(path: &'a Path, action: &'static str) -> impl Fn(std::io::Error) -> TranscriptError + 'a {
    move |e| TranscriptError::io(path, action, e)
}

/// Lines of a file from the last to the first, each with its byte offset.
struct Backwards<'p> {
    file: File,
    path: &'p Path,
    /// Bytes not yet split into lines: `file[pos..pos + buf.len()]`.
    buf: Vec<u8>,
    pos: u64,
}

impl Backwards<'_> {
    /// The previous line (without its newline) and its offset; None at the start of the file.
    fn prev(&mut self) -> Result<Option<(u64, Vec<u8>)>, TranscriptError> {
        loop {
            // The last newline in buf (excluding a trailing one belonging to the line itself)
            // starts the line after it.
            let search_end = self.buf.len().saturating_sub(1);
            if let Some(nl) = memchr::memrchr(b'\n', &self.buf[..search_end]) {
                let line = self.buf.split_off(nl + 1);
                self.buf.truncate(nl + 1);
                return Ok(Some((self.pos + nl as u64 + 1, trim_newline(line))));
            }
            if self.pos == 0 {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                let line = std::mem::take(&mut self.buf);
                return Ok(Some((0, trim_newline(line))));
            }
            let n = (BLOCK as u64).min(self.pos);
            self.pos -= n;
            let mut block = vec![0; n as usize];
            self.file
                .seek(SeekFrom::Start(self.pos))
                .map_err(io(self.path, "cannot seek"))?;
            self.file
                .read_exact(&mut block)
                .map_err(io(self.path, "cannot read transcript"))?;
            block.extend_from_slice(&self.buf);
            self.buf = block;
        }
    }
}

fn trim_newline(mut line: Vec<u8>) -> Vec<u8> {
    while matches!(line.last(), Some(b'\n' | b'\r')) {
        line.pop();
    }
    line
}

/// 1-based line number of the line starting at byte `offset` (counts newlines before it).
fn line_number_at(path: &Path, offset: u64) -> Result<usize, TranscriptError> {
    let mut f = File::open(path).map_err(io(path, "cannot open transcript"))?;
    let mut remaining = offset;
    let mut buf = vec![0; BLOCK];
    let mut lines = 1;
    while remaining > 0 {
        let want = (buf.len() as u64).min(remaining) as usize;
        let n = f
            .read(&mut buf[..want])
            .map_err(io(path, "cannot read transcript"))?;
        if n == 0 {
            break;
        }
        lines += memchr::memchr_iter(b'\n', &buf[..n]).count();
        remaining -= n as u64;
    }
    Ok(lines)
}

/// Occurrences of `needle` in the file, streamed (the needle may straddle two blocks).
pub fn count_occurrences(path: &Path, needle: &[u8]) -> Result<u64, TranscriptError> {
    let mut f = File::open(path).map_err(io(path, "cannot open transcript"))?;
    let finder = memchr::memmem::Finder::new(needle);
    let keep = needle.len().saturating_sub(1);
    let mut buf = vec![0u8; 4 * BLOCK + keep];
    let mut filled = 0;
    let mut count = 0u64;
    loop {
        let n = f
            .read(&mut buf[filled..])
            .map_err(io(path, "cannot read transcript"))?;
        if n == 0 {
            break;
        }
        filled += n;
        count += finder.find_iter(&buf[..filled]).count() as u64;
        // Carry the last needle-1 bytes so a match across blocks is found once.
        let tail = filled.saturating_sub(keep);
        buf.copy_within(tail..filled, 0);
        filled -= tail;
    }
    Ok(count)
}

/// The status of the transcript at `path`, reading only its tail (see the module docs).
pub fn scan(path: &Path) -> Result<Status, TranscriptError> {
    let source = path.display().to_string();
    let mut file = File::open(path).map_err(io(path, "cannot open transcript"))?;
    let file_bytes = file
        .metadata()
        .map_err(io(path, "cannot stat transcript"))?
        .len();
    let mut head = Vec::new();
    (&mut file)
        .take(MAX_HEADER as u64)
        .read_to_end(&mut head)
        .map_err(io(path, "cannot read transcript"))?;
    if head.iter().all(u8::is_ascii_whitespace) {
        return Err(TranscriptError::invalid(
            &source,
            1,
            "empty file: no session header",
        ));
    }
    let header_end = memchr::memchr(b'\n', &head).unwrap_or(head.len());
    let header_text = std::str::from_utf8(&head[..header_end])
        .map_err(|_| TranscriptError::invalid(&source, 1, "first line is not UTF-8"))?;
    let header = Header::parse(header_text.trim_end_matches('\r'))
        .map_err(|p| TranscriptError::invalid(&source, 1, p))?;
    if header.version() == 1 {
        let t = Transcript::load(path)?;
        return Ok(from_transcript(&t, file_bytes, CountSource::FullParse));
    }

    let mut lines = Backwards {
        file,
        path,
        buf: Vec::new(),
        pos: file_bytes,
    };
    let ends_with_newline = file_bytes == 0 || {
        let mut last = [0u8; 1];
        lines
            .file
            .seek(SeekFrom::Start(file_bytes - 1))
            .and_then(|_| lines.file.read_exact(&mut last))
            .map_err(io(path, "cannot read transcript"))?;
        last[0] == b'\n'
    };
    let mut want: Option<String> = None;
    let mut first = true;
    let mut boundary: Option<String> = None; // first kept id of the latest compaction
    let mut start = file_bytes; // where the tail parsed as a transcript starts
    while let Some((offset, line)) = lines.prev()? {
        if offset == 0 {
            start = header_end as u64 + 1;
            break;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let light: Light<'_> = match serde_json::from_slice(&line) {
            Ok(l) => l,
            // A torn last line: the parse below reports it as loading does.
            Err(_) if first && !ends_with_newline => {
                first = false;
                start = offset;
                continue;
            }
            Err(e) => {
                let line_no = line_number_at(path, offset)?;
                return Err(TranscriptError::invalid(
                    &source,
                    line_no,
                    format!("not valid JSON: {e}"),
                ));
            }
        };
        start = offset;
        let id = light.id.as_deref().unwrap_or("");
        if first {
            first = false;
            want = Some(id.to_string());
        }
        if let Some(b) = &boundary {
            if id == b {
                break;
            }
            continue;
        }
        if want.as_deref() != Some(id) {
            continue; // a sibling branch
        }
        want = light.parent_id.as_deref().map(str::to_string);
        if light.kind.as_deref() == Some("compaction")
            && let Some(k) = light.first_kept.as_deref()
        {
            boundary = Some(k.to_string());
        }
        if want.is_none() && boundary.is_none() {
            // The root of the active branch and no compaction on it: what remains before it
            // is other branches, which the context does not include.
            break;
        }
    }

    // Parse header + tail as one transcript: same rules as a full load.
    let bytes_scanned = file_bytes - start;
    let mut text = String::with_capacity(header_text.len() + 1 + bytes_scanned as usize);
    text.push_str(header_text);
    text.push('\n');
    let mut f = File::open(path).map_err(io(path, "cannot open transcript"))?;
    f.seek(SeekFrom::Start(start))
        .map_err(io(path, "cannot seek"))?;
    let mut tail = Vec::with_capacity(bytes_scanned as usize);
    f.read_to_end(&mut tail)
        .map_err(io(path, "cannot read transcript"))?;
    let tail = String::from_utf8(tail).map_err(|e| {
        let at = start + e.utf8_error().valid_up_to() as u64;
        let line = line_number_at(path, at).unwrap_or(0);
        TranscriptError::invalid(&source, line, "not UTF-8")
    })?;
    text.push_str(&tail);
    // Line numbers of the tail are only needed for errors and warnings: counting the newlines
    // before it reads the whole file, so it is done only then.
    let first_line = || -> Result<usize, TranscriptError> {
        if start <= header_end as u64 + 1 {
            Ok(2)
        } else {
            line_number_at(path, start)
        }
    };
    let t = match Transcript::parse_tail(&text, &source) {
        Ok(t) => t,
        Err(TranscriptError::Invalid { line, problem, .. }) => {
            return Err(TranscriptError::invalid(
                &source,
                first_line()? + line.saturating_sub(2),
                problem,
            ));
        }
        Err(e) => return Err(e),
    };
    let mut status = from_transcript(&t, file_bytes, CountSource::Details);
    status.bytes_scanned = bytes_scanned;
    if !status.warnings.is_empty() {
        let first = first_line()?;
        for w in &mut status.warnings {
            w.line = first + w.line.saturating_sub(2);
        }
    }
    let recorded = status
        .last_compaction
        .as_ref()
        .and_then(|c| c.details.as_ref())
        .and_then(|d| {
            Some((
                d.get("compactionCount")?.as_u64()?,
                d.get("summaryCount")?.as_u64()?,
            ))
        });
    match (recorded, &status.last_compaction) {
        (Some((total, summaries)), _) => {
            // Compactions after the latest boundary cannot exist (it is the latest).
            status.compaction_count = total;
            status.summary_count = summaries;
            status.count_source = CountSource::Details;
        }
        (None, None) => {
            // No compaction on the branch; a full-file search would only find other branches'.
            status.count_source = if start <= header_end as u64 + 1 {
                CountSource::FullParse
            } else {
                CountSource::ByteSearch
            };
        }
        (None, Some(_)) => {
            let total = count_occurrences(path, b"\"type\":\"compaction\"")?;
            let prunes = count_occurrences(path, b"\"layer\":\"prune\"")?;
            status.compaction_count = total;
            status.summary_count = total.saturating_sub(prunes);
            status.count_source = CountSource::ByteSearch;
        }
    }
    Ok(status)
}

fn from_transcript(t: &Transcript, file_bytes: u64, source: CountSource) -> Status {
    let stats = t.compaction_stats();
    let branch = t.active_branch();
    let last_compaction = branch
        .iter()
        .rev()
        .map(|&i| &t.entries()[i])
        .find(|e| e.entry_type() == "compaction")
        .map(|e| {
            let value: Option<Value> = serde_json::from_str(e.line()).ok();
            LastCompaction {
                id: e.id().to_string(),
                timestamp_ms: e.timestamp_ms(),
                tokens_before: e.tokens_before(),
                first_kept_entry_id: e.first_kept_entry_id().unwrap_or("").to_string(),
                summary_chars: e.view().map_or(0, |v| v.text.chars().count()),
                details: value.and_then(|v| v.get("details").cloned()),
            }
        });
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
        last_compaction,
        warnings: t.warnings().to_vec(),
    }
}

#[cfg(test)]
mod tests;
