//! A session's status without loading its whole file: the latest compaction on the active
//! branch and the entries after its boundary are found by scanning backwards from the end, so
//! `context status` on a 1 GB transcript measures only its tail.
//!
//! One reader, one verdict: first the whole file is checked as loading checks it (`check.rs`:
//! every line through the loader's own scanner or line reader, on every core, in bounded
//! memory), so status refuses what every other command refuses, in the same words, and its
//! warnings are loading's. A file the check saw to be one chain without a compaction (the
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

use std::borrow::Cow;
use std::fs::File;
use std::hash::BuildHasher;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use crate::check::Verdict;
use crate::error::{LoadWarning, TranscriptError};
use crate::record::CompactionRecord;
use crate::transcript::Transcript;

mod skim;

use skim::{
    CompactionLine, may_hold_two, name_bytes, skim, skip_string, skip_value, skip_ws, string_value,
};

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

impl Backwards<'_> {
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
                // Read as a full load reads it (same length: offsets stay true).
                crate::lenient::replace_lone_surrogates(&mut self.buf[line.clone()]);
                return Ok(Some((
                    self.pos + line.start as u64,
                    trim_newline(&self.buf[line]),
                )));
            }
            if self.pos == 0 {
                if self.end == 0 {
                    return Ok(None);
                }
                let line = 0..std::mem::take(&mut self.end);
                crate::lenient::replace_lone_surrogates(&mut self.buf[line.clone()]);
                return Ok(Some((0, trim_newline(&self.buf[line]))));
            }
            // The next block goes before the part of a line carried over; the buffer is reused
            // (a walk over a whole file would otherwise allocate and zero every block).
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
        }
    }
}

fn trim_newline(mut line: &[u8]) -> &[u8] {
    while let [rest @ .., b'\n' | b'\r'] = line {
        line = rest;
    }
    line
}

/// 1-based line number of the line starting at byte `offset` (counts newlines before it).
fn line_number_at(path: &Path, offset: u64) -> Result<usize, TranscriptError> {
    Ok(line_numbers_at(path, &[offset])?
        .first()
        .copied()
        .unwrap_or(1))
}

/// The `role` of a `message` entry's message, skimmed: the members before it are skipped, the
/// message's content is never read when (as written by pi and ctxhost) the role comes first.
fn message_role(line: &[u8]) -> Option<Cow<'_, str>> {
    // Where the value of member `want` of the object at `at` starts (values before it are
    // skipped, the one found is not read).
    let members = |b: &[u8], at: usize, want: &str| -> Option<usize> {
        let mut i = skip_ws(b, at);
        if b.get(i) != Some(&b'{') {
            return None;
        }
        i = skip_ws(b, i + 1);
        loop {
            if b.get(i) != Some(&b'"') {
                return None;
            }
            let key_end = skip_string(b, i)?;
            let key = name_bytes(b.get(i..key_end)?)?;
            i = skip_ws(b, key_end);
            if b.get(i) != Some(&b':') {
                return None;
            }
            i = skip_ws(b, i + 1);
            if key.as_ref() == want.as_bytes() {
                return Some(i);
            }
            i = skip_ws(b, skip_value(b, i)?);
            if b.get(i) != Some(&b',') {
                return None;
            }
            i = skip_ws(b, i + 1);
        }
    };
    let message = members(line, 0, "message")?;
    let role = members(line, message, "role")?;
    let literal = &line[role..skip_value(line, role)?];
    (literal.first() == Some(&b'"'))
        .then(|| string_value(literal))
        .flatten()
}

/// The context of an active branch without a compaction, gathered entry by entry as the
/// backward walk passes them, in constant memory: what `Transcript::context_tokens` and
/// `context().len()` give for the whole file, without holding it. Entries after the latest
/// usage (read first, going back) are decoded as loading decodes them; before it only their
/// kind and role count, so their bodies are skipped, unless the usage does not fit the window
/// and every estimate is needed.
struct Stream {
    window: u64,
    messages: usize,
    /// Estimates of the entries after the latest usage, then of all entries once the usage
    /// does not fit the window.
    estimates: u64,
    usage: Option<u64>,
    /// Implausible figures found, by the line's place counted from the end of the file (a
    /// subset of what loading reports).
    notes: Vec<(u64, String)>,
    /// Something only a parse can judge (a line that does not decode alone): give up.
    broken: bool,
}

impl Stream {
    fn new(window: Option<u64>) -> Stream {
        Stream {
            window: window.unwrap_or(u64::MAX),
            messages: 0,
            estimates: 0,
            usage: None,
            notes: Vec::new(),
            broken: false,
        }
    }

    fn needs_estimates(&self) -> bool {
        self.usage.is_none_or(|u| u > self.window)
    }

    /// One entry of the active branch, going back; `from_end` counts its line from the end.
    fn entry(&mut self, line: &[u8], from_end: u64, kind: Option<&str>, version: u32) {
        if self.broken {
            return;
        }
        if kind == Some("message") && !self.needs_estimates() {
            let role = message_role(line);
            match role.as_deref().map(|r| (r, crate::role::Role::parse(r))) {
                // Excluded or not: only decoding says.
                Some((_, Some(crate::role::Role::BashExecution))) => {}
                Some((_, Some(_))) => {
                    self.messages += 1;
                    return;
                }
                Some((_, None)) => return, // an unknown role: kept, not sent
                None => {}
            }
        }
        let Ok(text) = std::str::from_utf8(line) else {
            self.broken = true;
            return;
        };
        let decode = crate::entry::Decode {
            version,
            index: 0,
            entry_count: 0,
        };
        let Ok(mut e) = crate::entry::Entry::decode(text.into(), 0, &decode) else {
            self.broken = true;
            return;
        };
        if let Some(note) = e.take_note() {
            self.notes.push((from_end, note));
        }
        if e.context_role().is_some() && e.entry_type() != "compaction" {
            self.messages += 1;
        }
        if self.needs_estimates() {
            self.estimates += u64::from(e.tokens());
            if self.usage.is_none() {
                self.usage = e.usage_total();
                if let Some(u) = self.usage {
                    self.estimates -= u64::from(e.tokens());
                    if u > self.window {
                        // Another window's figures: every estimate counts, this one too.
                        self.estimates += u64::from(e.tokens());
                    }
                }
            }
        }
    }

    /// The context size by the rule of `Transcript::context_tokens`.
    fn context_tokens(&self) -> u64 {
        match self.usage {
            Some(u) if u <= self.window => u.saturating_add(self.estimates),
            _ => self.estimates,
        }
    }
}

/// 1-based line numbers of the lines starting at `offsets` (ascending), in one forward pass.
fn line_numbers_at(path: &Path, offsets: &[u64]) -> Result<Vec<usize>, TranscriptError> {
    let mut f = crate::read::open_transcript(path)?;
    let mut buf = vec![0; BLOCK];
    let (mut pos, mut lines) = (0u64, 1usize);
    let mut out = Vec::with_capacity(offsets.len());
    for &offset in offsets {
        while pos < offset {
            let want = (buf.len() as u64).min(offset - pos) as usize;
            let n = f
                .read(&mut buf[..want])
                .map_err(io(path, "cannot read transcript"))?;
            if n == 0 {
                break;
            }
            lines += memchr::memchr_iter(b'\n', &buf[..n]).count();
            pos += n as u64;
        }
        out.push(lines);
    }
    Ok(out)
}

/// The status of the transcript at `path`, reading only its tail (see the module docs).
pub fn scan(path: &Path) -> Result<Status, TranscriptError> {
    scan_with(path, None)
}

/// [`scan`] for a context window of `window` tokens: recorded usage above the window was
/// measured at another window and does not stand for the context (see
/// [`Transcript::context_tokens`]).
pub fn scan_for_window(path: &Path, window: u64) -> Result<Status, TranscriptError> {
    scan_with(path, Some(window))
}

fn scan_with(path: &Path, window: Option<u64>) -> Result<Status, TranscriptError> {
    let mut file = crate::read::open_transcript(path)?;
    let file_bytes = file
        .metadata()
        .map_err(io(path, "cannot stat transcript"))?
        .len();
    let head = crate::read::read_head(&mut file, path)?;
    let full = || full_load(path, window, file_bytes);
    // The whole file is checked as loading checks it first (on every core); what it saw of
    // the file's shape may spare the walk.
    let (warnings, shape) = match crate::check::check(path, &head, file_bytes)? {
        Verdict::Valid(warnings, shape) => (warnings, shape),
        Verdict::AskTheLoader => return full(),
    };
    let measured = match shape.chain_messages {
        Some(messages) => chain_status(path, window, file_bytes, &head, messages, shape.torn),
        None => Ok(None),
    };
    let walked = match measured {
        Ok(Some(status)) => Ok(status),
        Ok(None) | Err(_) => walk(path, window, file, file_bytes, &head),
    };
    match walked {
        // The walk handed the file to the load already: its answer is loading's.
        Ok(status) if status.count_source == CountSource::FullParse => Ok(status),
        Ok(mut status) => {
            status.warnings = warnings;
            Ok(status)
        }
        // A walk that fails on a file loading accepts is wrong: the load answers.
        Err(_) => full(),
    }
}

/// The status of a file the check found to be one chain without a compaction: its context is
/// every message of the file (`messages`, counted by the check) and its size the latest usage
/// plus the estimates of what follows it, so only the lines after that usage are read, from
/// the end. None when every estimate is needed (the usage does not fit the window): the walk
/// measures that. `torn`: the last line is torn, not an entry.
fn chain_status(
    path: &Path,
    window: Option<u64>,
    file_bytes: u64,
    head: &crate::read::Head,
    messages: usize,
    torn: bool,
) -> Result<Option<Status>, TranscriptError> {
    let source = path.display().to_string();
    let mut lines = Backwards {
        file: crate::read::open_transcript(path)?,
        path,
        buf: Vec::new(),
        end: 0,
        pos: file_bytes,
    };
    let decode = crate::entry::Decode {
        version: head.header.version(),
        index: 0,
        entry_count: usize::MAX,
    };
    let (mut skip_torn, mut trailing, mut start) = (torn, 0u64, file_bytes);
    let mut usage = None;
    while let Some((offset, line)) = lines.prev()? {
        if offset < head.body_start {
            break;
        }
        start = offset;
        let Ok(text) = std::str::from_utf8(line) else {
            return Ok(None);
        };
        if text.trim().is_empty() || std::mem::take(&mut skip_torn) {
            continue;
        }
        let text = std::sync::Arc::new(text.to_string());
        let line_of = |part: &str| {
            let start = part.as_ptr() as usize - text.as_ptr() as usize;
            crate::entry::Line::slice(&text, start..start + part.len())
        };
        let mut entries = Vec::new();
        let read = crate::transcript::read_line(
            &text,
            0,
            &decode,
            &source,
            &line_of,
            &mut Vec::new(),
            |e| entries.push(e),
        );
        if read.is_err() {
            return Ok(None);
        }
        for e in entries.iter().rev() {
            if e.context_role().is_none() || e.entry_type() == "compaction" {
                continue;
            }
            if e.usage_total().is_some() {
                usage = e.usage_total();
                break;
            }
            trailing += u64::from(e.tokens());
        }
        if usage.is_some() {
            break;
        }
    }
    let context_tokens = match usage {
        Some(u) if u > window.unwrap_or(u64::MAX) => return Ok(None),
        Some(u) => u.saturating_add(trailing),
        None => trailing,
    };
    Ok(Some(Status {
        session_id: head.header.id().to_string(),
        version: head.header.version(),
        file_bytes,
        bytes_scanned: file_bytes - start,
        context_tokens,
        context_messages: messages,
        compaction_count: 0,
        summary_count: 0,
        count_source: CountSource::ActiveBranch,
        last_compaction: None,
        warnings: Vec::new(),
    }))
}

/// The status from a full load: what the walk cannot settle, and the check's doubts.
fn full_load(path: &Path, window: Option<u64>, file_bytes: u64) -> Result<Status, TranscriptError> {
    let mut t = Transcript::load(path)?;
    t.set_context_window(window);
    Ok(from_transcript(&t, file_bytes, CountSource::FullParse))
}

/// The backward walk (see the module docs): the file's figures, for a file the check found
/// valid.
fn walk(
    path: &Path,
    window: Option<u64>,
    file: File,
    file_bytes: u64,
    head: &crate::read::Head,
) -> Result<Status, TranscriptError> {
    let source = path.display().to_string();
    let full = || full_load(path, window, file_bytes);
    // v1: no ids; each entry's parent is the entry before it.
    let v1 = head.header.version() == 1;

    let mut lines = Backwards {
        file,
        path,
        buf: Vec::new(),
        end: 0,
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
    let mut want: Option<String> = None; // the next entry of the active branch, going back
    let mut first = true; // no entry read yet: the next one is the leaf
    let mut last_seen = false;
    let mut chain_done = false; // the active branch's root was reached
    let mut boundary: Option<String> = None; // first kept id of the latest compaction
    let mut boundary_found = false;
    let mut recorded = false; // the latest compaction records the running counts
    let (mut total, mut prunes) = (0u64, 0u64);
    let mut start = file_bytes; // where the tail parsed as a transcript starts
    let mut at_header = false;
    let mut stream = Stream::new(window);
    let mut torn = None;
    // Hashes of the ids passed, to tell a parent outside the file from one before its child.
    let mut ids_passed: Vec<u32> = Vec::new();
    let id_hash = |id: &str| foldhash::fast::FixedState::default().hash_one(id) as u32;
    // The last entry of the active branch reached, going back: the root if its parent is
    // missing.
    let mut chain_end = None;
    // A line of several entries was passed: ids after its first are not in `ids_passed`.
    let mut hidden_ids = false;
    // Lines read so far, and the offset of the last: line numbers of what the walk reports
    // are counted back from it, not by reading the file again from its start.
    let (mut from_end, mut last_read) = (0u64, file_bytes);
    while let Some((offset, line)) = lines.prev()? {
        if offset < head.body_start {
            at_header = true;
            break;
        }
        from_end += 1;
        last_read = offset;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if !last_seen {
            last_seen = true;
            // A torn last line, judged as loading judges it (the line as a whole, not a skim
            // of its start); the parse below reports it as loading does.
            if !ends_with_newline
                && serde_json::from_slice::<serde::de::IgnoredAny>(line).is_err()
                && std::str::from_utf8(line)
                    .ok()
                    .and_then(crate::transcript::split_concatenated)
                    .is_none()
            {
                start = offset;
                torn = Some(from_end);
                continue;
            }
        }
        let light = match skim(line, v1) {
            Ok(l) => l,
            Err(problem) => {
                let line_no = line_number_at(path, offset)?;
                return Err(TranscriptError::invalid(&source, line_no, problem));
            }
        };
        if !boundary_found {
            start = offset;
        }
        if v1 {
            // The whole file is the branch. A v1 boundary is a line index and a line of two
            // entries is skipped by v1 readers: both are left to the full load.
            let several = may_hold_two(line)
                && std::str::from_utf8(line)
                    .ok()
                    .and_then(crate::transcript::split_concatenated)
                    .is_some();
            if several || light.kind.as_deref() == Some("compaction") {
                return full();
            }
            stream.entry(line, from_end, light.kind.as_deref(), 1);
            continue;
        }
        let id = light.id.as_deref().unwrap_or("");
        ids_passed.push(id_hash(id));
        hidden_ids = hidden_ids
            || (may_hold_two(line)
                && std::str::from_utf8(line)
                    .ok()
                    .and_then(crate::transcript::split_concatenated)
                    .is_some());
        if first {
            first = false;
            // The leaf is the last entry of the file; on a line of several, a skim sees only
            // the first, so such a file is left to the full load.
            if std::str::from_utf8(line)
                .ok()
                .and_then(crate::transcript::split_concatenated)
                .is_some()
            {
                return full();
            }
            want = Some(id.to_string());
        }
        if boundary.as_deref() == Some(id) {
            boundary_found = true;
        }
        if !chain_done && want.as_deref() == Some(id) {
            chain_end = Some(from_end);
            if boundary.is_none() && light.kind.as_deref() != Some("compaction") {
                stream.entry(line, from_end, light.kind.as_deref(), head.header.version());
            }
            want = light.parent_id.map(Cow::into_owned);
            chain_done = want.is_none();
            if light.kind.as_deref() == Some("compaction") {
                // The first value of the line: another entry glued after it is not this one.
                let decoded = serde_json::Deserializer::from_slice(line)
                    .into_iter::<CompactionLine<'_>>()
                    .next();
                let c = match decoded {
                    Some(Ok(c)) => c,
                    Some(Err(e)) => {
                        let line_no = line_number_at(path, offset)?;
                        let problem = format!("malformed compaction entry: {e}");
                        return Err(TranscriptError::invalid(&source, line_no, problem));
                    }
                    None => return full(),
                };
                let record = c
                    .details
                    .and_then(|d| CompactionRecord::from_json(d.get()))
                    .unwrap_or_default();
                if boundary.is_none() {
                    // The latest compaction: its boundary, and maybe the counts so far.
                    boundary = Some(c.first_kept.unwrap_or_default());
                    recorded = record.compaction_count.is_some() && record.summary_count.is_some();
                }
                total += 1;
                prunes += u64::from(record.is_prune());
            }
        }
        let tail_known = boundary_found || (boundary.is_none() && chain_done);
        if tail_known && (recorded || chain_done) {
            break;
        }
    }
    // The line number of the last line read, for the reports counted from the end.
    let walked = Walked {
        from_end,
        offset: last_read,
        line: at_header.then_some(head.line + 1),
    };
    if v1 {
        // Every line was read back to the header, and none was a compaction.
        if stream.broken {
            return full();
        }
        return streamed(
            path,
            &head.header,
            file_bytes,
            head.body_start,
            &stream,
            torn,
            &walked,
        );
    }
    if at_header
        && !first
        && !chain_done
        && !hidden_ids
        && let (Some(parent), Some(root)) = (want.as_deref(), chain_end)
        && !ids_passed.contains(&id_hash(parent))
    {
        // No line of the file has that id: loading makes the entry a root, and says so.
        stream
            .notes
            .push((root, crate::transcript::missing_parent(parent)));
        chain_done = true;
    }
    drop(ids_passed);
    if at_header {
        if first {
            start = head.body_start; // a header and nothing else
        } else if (boundary.is_some() && !boundary_found) || !chain_done {
            // A boundary not before its compaction, a missing parent, a parent written after
            // its child: what the full load says about such a file is the answer.
            return full();
        }
    }
    if boundary.is_none() && chain_done && !stream.broken {
        // No compaction on the branch: the walk gathered its whole context.
        return streamed(
            path,
            &head.header,
            file_bytes,
            start,
            &stream,
            torn,
            &walked,
        );
    }

    // Parse header + tail as one transcript: same rules as a full load.
    let bytes_scanned = file_bytes - start;
    let mut text = String::with_capacity(head.text.len() + 1 + bytes_scanned as usize);
    text.push_str(&head.text);
    text.push('\n');
    let mut f = crate::read::open_transcript(path)?;
    f.seek(SeekFrom::Start(start))
        .map_err(io(path, "cannot seek"))?;
    let mut tail = Vec::with_capacity(bytes_scanned as usize);
    f.read_to_end(&mut tail)
        .map_err(io(path, "cannot read transcript"))?;
    // Line numbers of the tail are only needed for errors and warnings: counting the newlines
    // before it reads the whole file, so it is done only then.
    let first_line = || -> Result<usize, TranscriptError> {
        if start <= head.body_start {
            Ok(head.line + 1)
        } else {
            line_number_at(path, start)
        }
    };
    let shift = |line: usize| -> Result<usize, TranscriptError> {
        Ok(first_line()? + line.saturating_sub(2))
    };
    let tail = match crate::read::text_of(tail, &source) {
        Ok(t) => t,
        Err(e) => {
            let line = shift(e.line().unwrap_or(1) + 1)?;
            return Err(TranscriptError::invalid(&source, line, problem_of(e)));
        }
    };
    text.push_str(&tail);
    let mut t = match Transcript::parse_tail(text, &source) {
        Ok(t) => t,
        Err(TranscriptError::Invalid { line, problem, .. }) => {
            return Err(TranscriptError::invalid(&source, shift(line)?, problem));
        }
        Err(e) => return Err(e),
    };
    t.set_context_window(window);
    let mut status = from_transcript(&t, file_bytes, CountSource::Details);
    status.bytes_scanned = bytes_scanned;
    for w in &mut status.warnings {
        w.line = shift(w.line)?;
    }
    let details = status
        .last_compaction
        .as_ref()
        .and_then(|c| c.details.as_ref());
    let counts = details.and_then(|d| Some((d.compaction_count?, d.summary_count?)));
    match counts {
        Some((total, summaries)) => {
            // Compactions after the latest boundary cannot exist (it is the latest).
            status.compaction_count = total;
            status.summary_count = summaries;
            status.count_source = CountSource::Details;
        }
        None => {
            status.compaction_count = total;
            status.summary_count = total - prunes;
            status.count_source = CountSource::ActiveBranch;
        }
    }
    Ok(status)
}

/// Where the backward walk stopped: how many lines it read, the offset of the last, and that
/// line's number when known without counting (the walk reached the header).
struct Walked {
    from_end: u64,
    offset: u64,
    line: Option<usize>,
}

/// The status of a branch without a compaction, from what the walk gathered.
fn streamed(
    path: &Path,
    header: &crate::entry::Header,
    file_bytes: u64,
    start: u64,
    stream: &Stream,
    torn: Option<u64>,
    walked: &Walked,
) -> Result<Status, TranscriptError> {
    let source = path.display().to_string();
    let mut notes: Vec<(u64, String)> = stream.notes.clone();
    if let Some(from_end) = torn {
        notes.push((from_end, crate::transcript::TORN_LAST_LINE.into()));
    }
    // File order: the line read last comes first.
    notes.sort_by_key(|(from_end, _)| std::cmp::Reverse(*from_end));
    let last_line = match (walked.line, notes.is_empty()) {
        (_, true) => 0,
        (Some(line), false) => line,
        (None, false) => line_number_at(path, walked.offset)?,
    };
    let warnings = notes
        .into_iter()
        .map(|(from_end, message)| LoadWarning {
            source: source.clone(),
            line: last_line + (walked.from_end - from_end) as usize,
            message,
        })
        .collect();
    Ok(Status {
        session_id: header.id().to_string(),
        version: header.version(),
        file_bytes,
        bytes_scanned: file_bytes - start,
        context_tokens: stream.context_tokens(),
        context_messages: stream.messages,
        compaction_count: 0,
        summary_count: 0,
        count_source: CountSource::ActiveBranch,
        last_compaction: None,
        warnings,
    })
}

fn problem_of(e: TranscriptError) -> String {
    match e {
        TranscriptError::Invalid { problem, .. } => problem,
        other => other.to_string(),
    }
}

fn from_transcript(t: &Transcript, file_bytes: u64, source: CountSource) -> Status {
    let stats = t.compaction_stats();
    let branch = t.active_branch();
    let last_compaction = branch
        .iter()
        .rev()
        .map(|&i| &t.entries()[i])
        .find(|e| e.entry_type() == "compaction")
        .map(|e| LastCompaction {
            id: e.id().to_string(),
            timestamp_ms: e.timestamp_ms(),
            timestamp: e.timestamp(),
            tokens_before: e.tokens_before(),
            first_kept_entry_id: e.first_kept_entry_id().unwrap_or("").to_string(),
            summary_chars: e.view().map_or(0, |v| v.text.chars().count()),
            details: e.compaction_record().cloned(),
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
