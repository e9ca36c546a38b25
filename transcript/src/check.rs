//! A whole file checked as loading checks it, in bounded memory: what `status` runs so that it
//! refuses what every other command refuses, with the same words.
//!
//! The body is cut into chunks of [`CHUNK`] bytes, checked on every core (a line belongs to
//! the chunk it starts in), then their findings are put together in file order. A line of the
//! common shape (a `message` entry the loader's fast path reads) is only scanned: the loader's
//! own scanner (`envelope`) says whether it decodes and what it says besides its size (ids, an
//! implausible usage figure), without counting chars or building an entry. Every other line
//! goes through the loader's own line reader ([`crate::lines::read_line`]), after the
//! loader's UTF-8 check and surrogate repair.
//!
//! Of each entry only a 64-bit hash of its id is kept, to find what linking finds. What the
//! hashes cannot settle exactly (two ids with one hash, a parent written after its child, so
//! maybe a cycle, a boundary that is not an entry of the file, a v1 boundary, which is a line
//! index) is handed to the full load ([`Verdict::AskTheLoader`]): its answer is then the answer.

use std::collections::HashSet;
use std::fs::File;
use std::hash::BuildHasher;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::de::IgnoredAny;

use crate::entry::{Decode, Entry, FastIds, Line, fast_ids};
use crate::error::{LoadWarning, TranscriptError};
use crate::lines::{TORN_LAST_LINE, missing_parent, read_line, split_concatenated};
use crate::read::Head;

/// Bytes per chunk: small enough that the buffers of all workers stay a few MiB, large enough
/// that a chunk holds thousands of lines.
const CHUNK: u64 = 256 << 10;

/// What the check found.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Loading accepts the file, with these warnings (in loading's order).
    Valid(Vec<LoadWarning>, Shape),
    /// Only the full load can say (see the module docs).
    AskTheLoader,
}

/// What the check saw of the file's shape, so that `status` need not walk it again.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Shape {
    /// For a file whose entries form one chain (each entry's parent is the entry before it)
    /// without a compaction: the messages of its context, which are then all of the file's.
    pub(crate) chain_messages: Option<usize>,
    /// The last line is torn (loading skips it).
    pub(crate) torn: bool,
}

/// The file's body, `start..end` in bytes, and how to read it.
struct Body<'p> {
    path: &'p Path,
    /// Bytes per chunk ([`CHUNK`]; tests cut files finer).
    chunk: u64,
    source: String,
    start: u64,
    end: u64,
    version: u32,
}

/// Checks the body of the file at `path` up to `file_bytes` (its header, `head`, read and
/// checked already).
pub(crate) fn check(path: &Path, head: &Head, file_bytes: u64) -> Result<Verdict, TranscriptError> {
    check_in_chunks(path, head, file_bytes, CHUNK)
}

fn check_in_chunks(
    path: &Path,
    head: &Head,
    file_bytes: u64,
    chunk: u64,
) -> Result<Verdict, TranscriptError> {
    let body = Body {
        path,
        chunk,
        source: path.display().to_string(),
        start: head.body_start,
        end: file_bytes.max(head.body_start),
        version: head.header.version(),
    };
    let count = (body.end - body.start).div_ceil(body.chunk) as usize;
    let next = AtomicUsize::new(0);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let mut done: Vec<(usize, Result<Chunk, TranscriptError>)> = std::thread::scope(|scope| {
        let work = || work(&body, &next, count);
        // Where threads cannot be made (a wasm guest), the calling thread does all the work.
        let helpers: Vec<_> = (1..workers)
            .filter_map(|_| std::thread::Builder::new().spawn_scoped(scope, work).ok())
            .collect();
        let mut done = work();
        for h in helpers {
            done.extend(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        }
        done
    });
    done.sort_unstable_by_key(|(k, _)| *k);
    let chunks = done.into_iter().map(|(_, c)| c);
    fold(chunks, &body, head.line)
}

/// Chunks taken in turn until none is left: (index, findings).
fn work(
    body: &Body<'_>,
    next: &AtomicUsize,
    count: usize,
) -> Vec<(usize, Result<Chunk, TranscriptError>)> {
    let mut out = Vec::new();
    let mut file = match crate::read::open_transcript(body.path) {
        Ok(f) => f,
        // The other workers take every chunk; this error stands for the file.
        Err(e) => return vec![(0, Err(e))],
    };
    let mut buf = Vec::new();
    loop {
        let k = next.fetch_add(1, Ordering::Relaxed);
        if k >= count {
            return out;
        }
        out.push((k, check_chunk(&mut file, body, k, &mut buf)));
    }
}

/// What one chunk holds; line numbers count from its first line (0).
#[derive(Default)]
struct Chunk {
    /// Lines that start in the chunk, blank ones too.
    lines: usize,
    /// Whether one of them is not blank.
    any_text: bool,
    /// Whether its last line ends with a line break.
    ends_with_newline: bool,
    /// Invalid UTF-8: (line, byte in the line).
    bad_utf8: Option<(usize, usize)>,
    /// Loading's warnings for its lines, in order.
    warnings: Vec<(usize, String)>,
    links: Links,
    /// Entries sent to the model (context role, not a compaction).
    messages: usize,
    refused: Option<Refused>,
}

/// The first line that does not decode, held until it is known whether it is the file's torn
/// last line (which loading skips with a warning) and whether invalid UTF-8 follows (which
/// loading reports first).
struct Refused {
    line: usize,
    problem: String,
    /// Not JSON at all, so a torn last line if nothing follows it.
    torn_if_last: bool,
    /// A line that is not blank follows it.
    followed: bool,
}

fn io<'a>(path: &'a Path, action: &'static str) -> impl Fn(std::io::Error) -> TranscriptError + 'a {
    move |e| TranscriptError::io(path, action, e)
}

/// Reads `file[from..to]` into `buf` (replacing what it held; not zeroed first).
fn read_range(
    file: &mut File,
    path: &Path,
    from: u64,
    to: u64,
    buf: &mut Vec<u8>,
) -> Result<(), TranscriptError> {
    buf.clear();
    file.seek(SeekFrom::Start(from))
        .map_err(io(path, "cannot seek"))?;
    file.take(to - from)
        .read_to_end(buf)
        .map_err(io(path, "cannot read transcript"))?;
    if (buf.len() as u64) < to - from {
        // Shorter than it was a moment ago: not the file that was measured.
        let e = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the file was truncated");
        return Err(TranscriptError::io(path, "cannot read transcript", e));
    }
    Ok(())
}

/// Chunk `k`: the lines that start in `start + k * chunk ..` the next chunk, each read whole.
fn check_chunk(
    file: &mut File,
    body: &Body<'_>,
    k: usize,
    buf: &mut Vec<u8>,
) -> Result<Chunk, TranscriptError> {
    let lo = body.start + k as u64 * body.chunk;
    let hi = (lo + body.chunk).min(body.end);
    // A line starts in the chunk if it is the body's first, or follows a line break at
    // `lo - 1` or later.
    let from = if k == 0 { lo } else { lo - 1 };
    read_range(file, body.path, from, hi, buf)?;
    let first = if k == 0 {
        0
    } else {
        match memchr::memchr(b'\n', buf) {
            Some(n) if n + 1 < buf.len() => n + 1,
            _ => return Ok(Chunk::default()), // inside a line that started before
        }
    };
    // The last line that starts in the chunk is read to its end.
    let mut at = hi;
    while buf.last() != Some(&b'\n') && at < body.end {
        let old = buf.len();
        let step = (64u64 << 10).max(buf.len() as u64 / 4).min(body.end - at);
        buf.reserve(step as usize);
        file.by_ref()
            .take(step)
            .read_to_end(buf)
            .map_err(io(body.path, "cannot read transcript"))?;
        at += (buf.len() - old) as u64;
        if let Some(n) = memchr::memchr(b'\n', &buf[old..]) {
            buf.truncate(old + n + 1);
            break;
        }
        if buf.len() == old {
            break; // the file shrank; what was read is judged as it is
        }
    }
    let mut chunk = Chunk {
        ends_with_newline: buf.last() == Some(&b'\n'),
        ..Chunk::default()
    };
    let region = &buf[first..];
    // Loading checks the whole file's UTF-8 before reading any line, and says so first.
    if let Err(e) = std::str::from_utf8(region) {
        let bad = e.valid_up_to();
        let line_start = memchr::memrchr(b'\n', &region[..bad]).map_or(0, |n| n + 1);
        let line = memchr::memchr_iter(b'\n', &region[..bad]).count();
        chunk.bad_utf8 = Some((line, bad - line_start));
        return Ok(chunk);
    }
    let text = std::str::from_utf8(region).expect("checked above");
    let unended = (!chunk.ends_with_newline && !region.is_empty()).then_some(region.len());
    let ends = memchr::memchr_iter(b'\n', region).chain(unended);
    let mut start = 0;
    for (n, end) in ends.enumerate() {
        chunk.lines = n + 1;
        let line = &text[start..end];
        start = end + 1;
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            continue;
        }
        chunk.any_text = true;
        match &mut chunk.refused {
            // Only invalid UTF-8 (reported first by loading) or the refused line's place
            // (last or not) can change the answer now.
            Some(r) => r.followed = true,
            None => chunk.line(line, n, body),
        }
    }
    Ok(chunk)
}

impl Chunk {
    /// One line that is not blank, without its line break.
    fn line(&mut self, text: &str, n: usize, body: &Body<'_>) {
        // The common shape: scanned, not decoded (see the module docs).
        if let Some(fast) = crate::envelope::message_line_unmeasured(text)
            && let Some(ids) = fast_ids(&fast, text, body.version)
        {
            if let Some(note) = fast.summary.usage_problem {
                self.warnings.push((n, note));
            }
            self.messages += usize::from(!fast.summary.excluded);
            if let FastIds::Own(id, parent) = ids {
                let parent = parent.map(|p| &text[p]);
                self.links.note(&text[id], parent, None, n);
            }
            return;
        }
        self.read(text, n, body);
    }

    /// A line through the loader's own line reader.
    fn read(&mut self, text: &str, n: usize, body: &Body<'_>) {
        let mut bytes = text.as_bytes().to_vec();
        crate::lenient::replace_lone_surrogates(&mut bytes);
        let text = Arc::new(String::from_utf8(bytes).expect("ASCII replaced by ASCII keeps UTF-8"));
        let line_of = |part: &str| {
            let start = part.as_ptr() as usize - text.as_ptr() as usize;
            Line::slice(&text, start..start + part.len())
        };
        // A v1 line's position shapes only its ids, which the check does not keep for v1;
        // v1 boundaries (line indices) are left to the full load.
        let decode = Decode {
            version: body.version,
            index: 0,
            entry_count: usize::MAX,
        };
        let mut warnings = Vec::new();
        let (links, messages) = (&mut self.links, &mut self.messages);
        let read = read_line(
            &text,
            n,
            &decode,
            &body.source,
            &line_of,
            &mut warnings,
            |e| {
                *messages +=
                    usize::from(e.context_role().is_some() && e.entry_type() != "compaction");
                links.note_entry(&e, n, body.version)
            },
        );
        self.warnings
            .extend(warnings.into_iter().map(|w| (w.line, w.message)));
        // A v1 line of several entries takes no position: it is kept beside the chain.
        self.links.chain.broken |= matches!(read, Ok(0));
        if let Err(error) = read {
            let torn_if_last = serde_json::from_str::<IgnoredAny>(&text).is_err()
                && split_concatenated(&text).is_none();
            self.refused = Some(Refused {
                line: n,
                problem: problem_of(error),
                torn_if_last,
                followed: false,
            });
        }
    }
}

fn problem_of(e: TranscriptError) -> String {
    match e {
        TranscriptError::Invalid { problem, .. } => problem,
        other => other.to_string(),
    }
}

/// The chunks' findings in file order, put together as loading would: the verdict.
fn fold(
    chunks: impl Iterator<Item = Result<Chunk, TranscriptError>>,
    body: &Body<'_>,
    header_line: usize,
) -> Result<Verdict, TranscriptError> {
    let source = &body.source;
    // Line `n` of the chunk whose first line follows `before` lines is line `before + 1 + n`.
    let mut before = header_line;
    let chunks: Vec<Chunk> = chunks.collect::<Result<_, _>>()?;
    // Sized once: a set grown step by step holds its old table and its new one at once.
    let mut ids: HashSet<u64, foldhash::fast::FixedState> = HashSet::with_capacity_and_hasher(
        chunks.iter().map(|c| c.links.ids.len()).sum(),
        Default::default(),
    );
    let mut links = Links::default();
    let mut messages = 0;
    let mut warnings = Vec::new();
    let mut refused: Option<Refused> = None;
    let mut ends_with_newline = true;
    for chunk in chunks {
        let line = |n: usize| before + 1 + n;
        if let Some((n, at)) = chunk.bad_utf8 {
            return Err(crate::read::invalid_utf8(source, line(n), at));
        }
        // A chunk inside a line that started before it says nothing of the file's end.
        ends_with_newline = chunk.ends_with_newline || (chunk.lines == 0 && ends_with_newline);
        if let Some(r) = &mut refused {
            r.followed |= chunk.any_text;
            before += chunk.lines;
            continue;
        }
        warnings.extend(chunk.warnings.into_iter().map(|(n, message)| LoadWarning {
            source: source.clone(),
            line: line(n),
            message,
        }));
        let c = chunk.links;
        // The ids in file order, each parent off the chain looked up just before its child.
        let mut off_chain = c.off_chain.into_iter().peekable();
        for (k, id) in c.ids.into_iter().enumerate() {
            while let Some((_, n, parent)) = off_chain.next_if(|(at, ..)| *at == k) {
                if !ids.contains(&hash(&parent)) {
                    links.later_parents.push((line(n), parent));
                }
            }
            links.ask_the_loader |= !ids.insert(id);
        }
        links.boundaries.extend(c.boundaries);
        links.ask_the_loader |= c.ask_the_loader;
        // The chunk's chain goes on from the chunk before, if that had entries.
        let chain = &mut links.chain;
        chain.broken |= c.chain.broken;
        if let Some(parent) = c.chain.first_parent {
            chain.broken |= chain.last.is_some() && parent != chain.last;
            chain.last = c.chain.last;
        }
        messages += chunk.messages;
        refused = chunk.refused.map(|r| Refused {
            line: line(r.line),
            ..r
        });
        before += chunk.lines;
    }
    let shape = Shape {
        chain_messages: (!links.chain.broken).then_some(messages),
        torn: refused.is_some(),
    };
    if let Some(r) = refused {
        if r.followed || ends_with_newline || !r.torn_if_last {
            return Err(TranscriptError::invalid(source, r.line, r.problem));
        }
        // Loading drops a torn last line before reading the others, and says so first.
        warnings.insert(
            0,
            LoadWarning {
                source: source.clone(),
                line: r.line,
                message: TORN_LAST_LINE.into(),
            },
        );
    }
    Ok(links.verdict(&ids, warnings, shape, source))
}

fn hash(id: &str) -> u64 {
    foldhash::fast::FixedState::default().hash_one(id)
}

/// What linking would find, kept as 64-bit hashes of ids: of one chunk while it is read, then
/// of the file as the chunks are put together (in file order: whether a parent comes before
/// its child is only known then).
#[derive(Default)]
struct Links {
    /// The chunk's ids, in file order.
    ids: Vec<u64>,
    /// Parents that are not the entry before their child in the chunk: (the child's place in
    /// `ids`, its line, the parent id). Few: an appended file is one chain, mostly.
    off_chain: Vec<(usize, usize, String)>,
    /// Of the file: parents not read before their child, (line, parent id).
    later_parents: Vec<(usize, String)>,
    /// The first kept entry of every compaction.
    boundaries: Vec<u64>,
    ask_the_loader: bool,
    chain: Chain,
}

/// Whether entries link as one chain, each to the one before it (v1 files by their position).
#[derive(Default)]
struct Chain {
    /// The first entry's parent (v2/v3).
    first_parent: Option<Option<u64>>,
    /// The last entry's id (v2/v3).
    last: Option<u64>,
    /// An entry links elsewhere, or is a compaction.
    broken: bool,
}

impl Chain {
    fn link(&mut self, id: u64, parent: Option<u64>) {
        match self.first_parent {
            None => self.first_parent = Some(parent),
            Some(_) => self.broken |= parent != self.last,
        }
        self.last = Some(id);
    }
}

impl Links {
    fn note(&mut self, id: &str, parent: Option<&str>, kept: Option<&str>, line: usize) {
        let parent_hash = parent.map(hash);
        if let Some(parent) = parent
            && (self.ids.is_empty() || parent_hash != self.chain.last)
        {
            self.off_chain
                .push((self.ids.len(), line, parent.to_string()));
        }
        let id = hash(id);
        self.ids.push(id);
        self.chain.link(id, parent_hash);
        if let Some(kept) = kept {
            self.boundaries.push(hash(kept));
        }
    }

    fn note_entry(&mut self, e: &Entry, line: usize, version: u32) {
        let compaction = e.entry_type() == "compaction";
        self.chain.broken |= compaction;
        if version == 1 {
            self.ask_the_loader |= compaction;
            return;
        }
        self.note(e.id(), e.parent_id(), e.first_kept_entry_id(), line);
    }

    /// Loading's verdict once every line is read (`ids`: all of them): its warnings with the
    /// missing parents added, or the full load when the hashes cannot settle it.
    fn verdict(
        self,
        ids: &HashSet<u64, foldhash::fast::FixedState>,
        mut warnings: Vec<LoadWarning>,
        shape: Shape,
        source: &str,
    ) -> Verdict {
        if self.ask_the_loader || self.boundaries.iter().any(|b| !ids.contains(b)) {
            return Verdict::AskTheLoader;
        }
        for (line, parent) in self.later_parents {
            if ids.contains(&hash(&parent)) {
                // Written after its child: fine, unless the links go round; loading knows.
                return Verdict::AskTheLoader;
            }
            warnings.push(LoadWarning {
                source: source.to_string(),
                line,
                message: missing_parent(&parent),
            });
        }
        Verdict::Valid(warnings, shape)
    }
}

#[cfg(test)]
mod tests;
