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
//!
//! [`check_remembering`] keeps the state after the lines checked in a record of its own
//! (`remembered`), so that the next check of the same file goes on from there: only the bytes
//! appended since are read, and the verdict is the one a whole check gives (`fold` puts the
//! findings together the same way from either start).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::de::IgnoredAny;

use crate::entry::{Decode, FastIds, Line, fast_ids};
use crate::error::TranscriptError;
use crate::lines::{read_line, split_concatenated};
use crate::read::Head;

mod fold;
mod remembered;

use fold::{Chunk, Folded, Refused};
pub(crate) use fold::{Shape, Verdict};

/// Bytes per chunk: small enough that the buffers of all workers stay a few MiB, large enough
/// that a chunk holds thousands of lines.
const CHUNK: u64 = 256 << 10;

/// A remembered prefix is brought up to date once this many more bytes have been checked:
/// writing the record costs about what checking a megabyte does.
const REMEMBER_STEP: u64 = 1 << 20;

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

impl Body<'_> {
    /// How the line reader decodes a line of the body. A v1 line's position shapes only its
    /// ids, which the check does not keep for v1; v1 boundaries (line indices) are left to the
    /// full load.
    #[inline]
    fn decode(&self) -> Decode {
        Decode {
            version: self.version,
            index: 0,
            entry_count: usize::MAX,
        }
    }
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
    let source = path.display().to_string();
    let mut folded = Folded::new(source, head.line);
    let end = file_bytes.max(head.body_start);
    folded.add(check_range(path, head, head.body_start..end, chunk)?)?;
    folded.verdict()
}

/// [`check`], resumed after the bytes an earlier check of this file verified if it still
/// starts with them, and remembering in `dir` what this one verified (see `remembered`).
pub(crate) fn check_remembering(
    path: &Path,
    head: &Head,
    file_bytes: u64,
    dir: &Path,
) -> Result<Verdict, TranscriptError> {
    check_remembering_in_chunks(path, head, file_bytes, dir, CHUNK)
}

fn check_remembering_in_chunks(
    path: &Path,
    head: &Head,
    file_bytes: u64,
    dir: &Path,
    chunk: u64,
) -> Result<Verdict, TranscriptError> {
    let source = path.display().to_string();
    let end = file_bytes.max(head.body_start);
    let recalled = remembered::recall(dir, path, head, end, &source);
    let recalled_end = recalled.as_ref().map(|(_, at)| *at);
    let (mut folded, from) =
        recalled.unwrap_or_else(|| (Folded::new(source, head.line), head.body_start));
    // The lines that end with a line break are remembered; the last one, maybe torn or still
    // being written, is checked each time.
    let lines_end = lines_end(path, from, end)?;
    folded.add(check_range(path, head, from..lines_end, chunk)?)?;
    let grown = recalled_end.is_none_or(|at| lines_end >= at + REMEMBER_STEP);
    if grown && lines_end > head.body_start && folded.settled() {
        remembered::remember(dir, path, head, lines_end, &folded);
    }
    folded.add(check_range(path, head, lines_end..end, chunk)?)?;
    folded.verdict()
}

/// Just after the last line break of `file[from..end]`; `from` if there is none.
fn lines_end(path: &Path, from: u64, end: u64) -> Result<u64, TranscriptError> {
    let mut file = crate::read::open_transcript(path)?;
    let mut buf = Vec::new();
    let mut to = end;
    while to > from {
        let at = to.saturating_sub(64 << 10).max(from);
        read_range(&mut file, path, at, to, &mut buf)?;
        if let Some(n) = memchr::memrchr(b'\n', &buf) {
            return Ok(at + n as u64 + 1);
        }
        to = at;
    }
    Ok(from)
}

/// The findings of the chunks of `range` of the body, in file order, checked on every core.
fn check_range(
    path: &Path,
    head: &Head,
    range: std::ops::Range<u64>,
    chunk: u64,
) -> Result<Vec<Chunk>, TranscriptError> {
    let body = Body {
        path,
        chunk,
        source: path.display().to_string(),
        start: range.start,
        end: range.end,
        version: head.header.version(),
    };
    let mut done = check_chunks_on_every_core(&body);
    done.sort_unstable_by_key(|(k, _)| *k);
    done.into_iter().map(|(_, c)| c).collect()
}

/// The findings of every chunk of `body`, by index, in the order they were done: the chunks
/// are taken in turn by up to four threads.
fn check_chunks_on_every_core(body: &Body<'_>) -> Vec<(usize, Result<Chunk, TranscriptError>)> {
    let count = (body.end - body.start).div_ceil(body.chunk) as usize;
    let next = AtomicUsize::new(0);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    std::thread::scope(|scope| {
        let work = || work(body, &next, count);
        // Where threads cannot be made (a wasm guest), the calling thread does all the work.
        let helpers: Vec<_> = (1..workers.min(count))
            .filter_map(|_| std::thread::Builder::new().spawn_scoped(scope, work).ok())
            .collect();
        let mut done = work();
        for h in helpers {
            done.extend(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        }
        done
    })
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
    let Some(first) = first_line_start(buf, k) else {
        return Ok(Chunk::default()); // inside a line that started before
    };
    read_to_line_end(file, body, hi, buf)?;
    let mut chunk = Chunk {
        ends_with_newline: buf.last() == Some(&b'\n'),
        ..Chunk::default()
    };
    let region = &buf[first..];
    // Loading checks the whole file's UTF-8 before reading any line, and says so first.
    match std::str::from_utf8(region) {
        Ok(text) => chunk.check_lines(text, body),
        Err(e) => chunk.bad_utf8 = Some(line_and_byte(region, e.valid_up_to())),
    }
    Ok(chunk)
}

/// Where in `buf` (chunk `k` from the byte before it) the first line that starts in the chunk
/// starts; None when the chunk lies inside a line that started before it.
#[inline]
fn first_line_start(buf: &[u8], k: usize) -> Option<usize> {
    if k == 0 {
        return Some(0);
    }
    match memchr::memchr(b'\n', buf) {
        Some(n) if n + 1 < buf.len() => Some(n + 1),
        _ => None,
    }
}

/// Reads on from `at` until the last line in `buf` ends (or the body does), so the last line
/// that starts in a chunk is read whole.
fn read_to_line_end(
    file: &mut File,
    body: &Body<'_>,
    mut at: u64,
    buf: &mut Vec<u8>,
) -> Result<(), TranscriptError> {
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
    Ok(())
}

/// The line (from 0) of byte `at` of `region`, and the byte within that line.
fn line_and_byte(region: &[u8], at: usize) -> (usize, usize) {
    let line_start = memchr::memrchr(b'\n', &region[..at]).map_or(0, |n| n + 1);
    let line = memchr::memchr_iter(b'\n', &region[..at]).count();
    (line, at - line_start)
}

impl Chunk {
    /// The lines of the chunk's `text`: its line count, whether any holds text, and each one
    /// that does, until a line is refused.
    fn check_lines(&mut self, text: &str, body: &Body<'_>) {
        let unended = (!self.ends_with_newline && !text.is_empty()).then_some(text.len());
        let ends = memchr::memchr_iter(b'\n', text.as_bytes()).chain(unended);
        let mut start = 0;
        for (n, end) in ends.enumerate() {
            self.lines = n + 1;
            let line = &text[start..end];
            start = end + 1;
            let line = line.strip_suffix('\r').unwrap_or(line);
            if line.trim().is_empty() {
                continue;
            }
            self.any_text = true;
            match &mut self.refused {
                // Only invalid UTF-8 (reported first by loading) or the refused line's place
                // (last or not) can change the answer now.
                Some(r) => r.followed = true,
                None => self.line(line, n, body),
            }
        }
    }

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
        let text = lenient_line(text);
        let line_of = |part: &str| {
            let start = part.as_ptr() as usize - text.as_ptr() as usize;
            Line::slice(&text, start..start + part.len())
        };
        let decode = body.decode();
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
            self.refused = Some(refusal(&text, n, error));
        }
    }
}

/// A line as loading reads it: lone surrogate escapes replaced.
fn lenient_line(text: &str) -> Arc<String> {
    let mut bytes = text.as_bytes().to_vec();
    crate::lenient::replace_lone_surrogates(&mut bytes);
    Arc::new(String::from_utf8(bytes).expect("ASCII replaced by ASCII keeps UTF-8"))
}

/// Line `n` (`text`), refused by the line reader with `error`.
fn refusal(text: &str, n: usize, error: TranscriptError) -> Refused {
    let torn_if_last =
        serde_json::from_str::<IgnoredAny>(text).is_err() && split_concatenated(text).is_none();
    Refused {
        line: n,
        problem: problem_of(error),
        torn_if_last,
        followed: false,
    }
}

fn problem_of(e: TranscriptError) -> String {
    match e {
        TranscriptError::Invalid { problem, .. } => problem,
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests;
