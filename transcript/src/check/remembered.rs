//! What a check verified of a file's first bytes, kept in a file of its own (one per
//! transcript, in a directory the caller names) so that a later check of the same file reads
//! only the bytes appended since: the same verdict at the cost of the new bytes.
//!
//! A record is of the bytes `[0, end)`, `end` just after a line break, and holds which file
//! they are (its canonical path, and its device and inode where the platform has them), a
//! hash of what they hold (all of it up to [`WHOLE_BELOW`]; beyond that the first and last
//! [`EDGE`] bytes and [`SAMPLES`] blocks spread between them), and the check's state at
//! `end`: its lines, messages and warnings so far, the chain, the parents and compaction
//! boundaries not found yet, and the sorted hashes of every id (8 bytes an entry: the resumed
//! check looks its new ids and parents up in them without building a table).
//!
//! A file that no longer starts with those bytes (shorter than `end`, replaced, rewritten
//! where the hash looks) is checked whole again. The limit: a big file rewritten in place at
//! the same length, changed only where the samples do not look, keeps the old verdict for
//! its first bytes. Transcripts are only appended to, and every rewrite ctxhost makes
//! replaces the file (a new inode).

use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::io::{Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use super::fold::{Chain, Folded, Ids, Links, SortedIds, hash};
use crate::error::LoadWarning;
use crate::read::Head;

/// Up to this many bytes, every byte of the prefix is hashed.
const WHOLE_BELOW: u64 = 4 << 20;
/// Bytes hashed at each end of a larger prefix: the header, and the last lines before `end`.
const EDGE: u64 = 64 << 10;
/// Blocks of [`SAMPLE`] bytes hashed between the edges of a larger prefix.
const SAMPLES: u64 = 512;
const SAMPLE: u64 = 4 << 10;

const MAGIC: &[u8] = b"ctxhost checked prefix\n";
const FORMAT: u64 = 1;

/// Which file a record is of: its canonical path, device and inode.
struct Identity {
    path: PathBuf,
    device: u64,
    inode: u64,
}

impl Identity {
    fn of(path: &Path, file: &File) -> Option<Self> {
        let meta = file.metadata().ok()?;
        #[cfg(unix)]
        let (device, inode) = {
            use std::os::unix::fs::MetadataExt;
            (meta.dev(), meta.ino())
        };
        #[cfg(not(unix))]
        let (device, inode) = {
            let _ = meta;
            (0, 0)
        };
        let path = std::fs::canonicalize(path).ok()?;
        Some(Self {
            path,
            device,
            inode,
        })
    }

    /// Where the record of this file is kept in `dir`.
    fn record_path(&self, dir: &Path) -> PathBuf {
        let key = hash(&self.path.to_string_lossy());
        dir.join(format!("{key:016x}.checked"))
    }
}

/// The hash of `file[..end]` (see the module docs for which bytes).
fn hash_prefix(file: &mut File, end: u64) -> std::io::Result<u64> {
    let mut hasher = foldhash::fast::FixedState::default().build_hasher();
    hasher.write_u64(end);
    let mut buf = Vec::new();
    for range in hashed_ranges(end) {
        buf.clear();
        file.seek(SeekFrom::Start(range.start))?;
        Read::take(&mut *file, range.end - range.start).read_to_end(&mut buf)?;
        if buf.len() as u64 != range.end - range.start {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        hasher.write(&buf);
    }
    Ok(hasher.finish())
}

/// The ranges of `[0, end)` [`hash_prefix`] hashes.
fn hashed_ranges(end: u64) -> Vec<Range<u64>> {
    let mut ranges = Vec::with_capacity(SAMPLES as usize + 2);
    if end <= WHOLE_BELOW {
        ranges.push(0..end);
        return ranges;
    }
    let stride = (end - 2 * EDGE) / SAMPLES;
    ranges.push(0..EDGE);
    ranges.extend((0..SAMPLES).map(|k| {
        let at = EDGE + k * stride;
        at..(at + SAMPLE).min(end - EDGE)
    }));
    ranges.push(end - EDGE..end);
    ranges
}

/// A probe of the id hash: a record written by a build whose hash differs is not read.
fn probe() -> u64 {
    hash("ctxhost: the id hash of a remembered check")
}

/// The state remembered for `path`'s first bytes, if the file still starts with them: the
/// check resumed there, and where (`end`). `file_bytes`: the file's length now.
pub(super) fn recall(
    dir: &Path,
    path: &Path,
    head: &Head,
    file_bytes: u64,
    source: &str,
) -> Option<(Folded, u64)> {
    let mut file = crate::read::open_transcript(path).ok()?;
    let identity = Identity::of(path, &file)?;
    let bytes = std::fs::read(identity.record_path(dir)).ok()?;
    let mut r = Reader(&bytes);
    let (end, prefix_hash) = r.prefix(&identity, head)?;
    if end > file_bytes || end <= head.body_start {
        return None;
    }
    if hash_prefix(&mut file, end).ok()? != prefix_hash {
        return None;
    }
    let state = r.state(bytes.len())?;
    Some((state.resume(source, bytes), end))
}

/// The check's state as a record keeps it, the ids left where they were read.
struct Remembered {
    lines: usize,
    messages: usize,
    links: Links,
    warnings: Vec<(usize, String)>,
    /// Where in the record the sorted ids start.
    ids_at: usize,
}

impl Remembered {
    /// The check resumed from this state; `record` is the record it was read from.
    fn resume(self, source: &str, record: Vec<u8>) -> Folded {
        let shared: std::sync::Arc<str> = source.into();
        let warnings = self
            .warnings
            .into_iter()
            .map(|(line, message)| LoadWarning {
                source: shared.clone(),
                line,
                message,
            });
        let ids = Ids {
            earlier: SortedIds::new(record, self.ids_at),
            ..Ids::default()
        };
        let (lines, messages) = (self.lines, self.messages);
        Folded::resume(
            source.to_string(),
            lines,
            ids,
            self.links,
            messages,
            warnings.collect(),
        )
    }
}

/// Keeps `folded`, the state after `path`'s first `end` bytes, for [`recall`]. Best effort: a
/// directory that cannot be written only costs the next check its time.
pub(super) fn remember(dir: &Path, path: &Path, head: &Head, end: u64, folded: &Folded) {
    let Ok(mut file) = crate::read::open_transcript(path) else {
        return;
    };
    let (Some(identity), Ok(prefix_hash)) =
        (Identity::of(path, &file), hash_prefix(&mut file, end))
    else {
        return;
    };
    let record = Record {
        identity,
        prefix_hash,
        head,
        end,
    };
    let target = record.identity.record_path(dir);
    write_replacing(dir, &target, |out| record.write(out, folded));
}

/// Writes `target` in `dir` whole or not at all: into a file beside it, renamed over it. A
/// failure leaves no file behind.
fn write_replacing(
    dir: &Path,
    target: &Path,
    write: impl FnOnce(&mut std::io::BufWriter<File>) -> std::io::Result<()>,
) {
    let tmp = target.with_extension(format!("tmp-{}", std::process::id()));
    let written = std::fs::create_dir_all(dir)
        .and_then(|()| File::create(&tmp))
        .and_then(|f| {
            // Written as it is made: a record of a big file is tens of MiB.
            let mut out = std::io::BufWriter::with_capacity(1 << 20, f);
            write(&mut out)?;
            out.flush()
        })
        .and_then(|()| std::fs::rename(&tmp, target));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// What a record says of the bytes it is of.
struct Record<'h> {
    identity: Identity,
    prefix_hash: u64,
    head: &'h Head,
    end: u64,
}

impl Record<'_> {
    /// The record of `folded` (the fields in the order [`recall`] reads them).
    fn write(&self, out: &mut impl Write, folded: &Folded) -> std::io::Result<()> {
        out.write_all(MAGIC)?;
        put_u64s(out, &[FORMAT, probe()])?;
        put_bytes(out, self.identity.path.to_string_lossy().as_bytes())?;
        put_u64s(
            out,
            &[
                self.identity.device,
                self.identity.inode,
                self.end,
                self.prefix_hash,
                self.head.body_start,
                self.head.line as u64,
                u64::from(self.head.header.version()),
                folded.lines as u64,
                folded.messages as u64,
            ],
        )?;
        put_chain(out, &folded.links.chain)?;
        let later_parents = folded.links.later_parents.iter();
        put_lined_texts(out, later_parents.map(|(l, t)| (*l, t.as_str())))?;
        let boundaries = folded.boundaries_not_found();
        put_u64s(out, &[boundaries.len() as u64])?;
        put_u64s(out, &boundaries)?;
        let warnings = folded.warnings.iter();
        put_lined_texts(out, warnings.map(|w| (w.line, w.message.as_str())))?;
        let ids = folded.ids.sorted();
        put_u64s(out, &[ids.len() as u64])?;
        put_u64s(out, &ids)
    }
}

/// The chain as [`Reader::chain`] reads it: which of its parts are known, then its first
/// parent and last entry.
fn put_chain(out: &mut impl Write, chain: &Chain) -> std::io::Result<()> {
    let flags = u8::from(chain.first_parent.is_some())
        | u8::from(chain.first_parent.flatten().is_some()) << 1
        | u8::from(chain.last.is_some()) << 2
        | u8::from(chain.broken) << 3;
    out.write_all(&[flags])?;
    let first_parent = chain.first_parent.flatten().unwrap_or(0);
    put_u64s(out, &[first_parent, chain.last.unwrap_or(0)])
}

fn put_u64s(out: &mut impl Write, values: &[u64]) -> std::io::Result<()> {
    values
        .iter()
        .try_for_each(|v| out.write_all(&v.to_le_bytes()))
}

fn put_bytes(out: &mut impl Write, bytes: &[u8]) -> std::io::Result<()> {
    put_u64s(out, &[bytes.len() as u64])?;
    out.write_all(bytes)
}

/// (line, text) pairs: missing parents, warnings.
fn put_lined_texts<'t>(
    out: &mut impl Write,
    items: impl ExactSizeIterator<Item = (usize, &'t str)>,
) -> std::io::Result<()> {
    put_u64s(out, &[items.len() as u64])?;
    for (line, text) in items {
        put_u64s(out, &[line as u64])?;
        put_bytes(out, text.as_bytes())?;
    }
    Ok(())
}

/// A record read front to back; None for anything short or out of place (a record cut
/// short by a crash, or not a record at all).
struct Reader<'b>(&'b [u8]);

impl<'b> Reader<'b> {
    /// The record's opening, when it is a record of this file's `identity` and `head` by this
    /// build: the end of the prefix it is of, and the prefix's hash.
    fn prefix(&mut self, identity: &Identity, head: &Head) -> Option<(u64, u64)> {
        (self.take(MAGIC.len())? == MAGIC).then_some(())?;
        (self.u64()? == FORMAT && self.u64()? == probe()).then_some(())?;
        let same_file = self.bytes()? == identity.path.to_string_lossy().as_bytes()
            && self.u64()? == identity.device
            && self.u64()? == identity.inode;
        let end = self.u64()?;
        let prefix_hash = self.u64()?;
        let same_head = self.u64()? == head.body_start
            && self.u64()? == head.line as u64
            && self.u64()? == u64::from(head.header.version());
        (same_file && same_head).then_some((end, prefix_hash))
    }

    /// The check's state after the opening; `record_len`: the whole record's length. The
    /// sorted ids end the record.
    fn state(&mut self, record_len: usize) -> Option<Remembered> {
        let lines = self.usize()?;
        let messages = self.usize()?;
        let chain = self.chain()?;
        let later_parents = self.lined_texts()?;
        let boundaries = self.u64s()?;
        let warnings = self.lined_texts()?;
        let count = self.usize()?;
        (self.0.len() == count.checked_mul(8)?).then_some(())?;
        Some(Remembered {
            lines,
            messages,
            links: Links::resumed(later_parents, boundaries, chain),
            warnings,
            ids_at: record_len - self.0.len(),
        })
    }

    /// The chain: its flags (see [`Record::write`]), first parent and last entry.
    fn chain(&mut self) -> Option<Chain> {
        let flags = self.take(1)?[0];
        let (first_parent, last) = (self.u64()?, self.u64()?);
        Some(Chain {
            first_parent: (flags & 1 != 0).then_some((flags & 2 != 0).then_some(first_parent)),
            last: (flags & 4 != 0).then_some(last),
            broken: flags & 8 != 0,
        })
    }

    fn take(&mut self, n: usize) -> Option<&'b [u8]> {
        let (taken, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(taken)
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn usize(&mut self) -> Option<usize> {
        self.u64()?.try_into().ok()
    }

    fn bytes(&mut self) -> Option<&'b [u8]> {
        let n = self.usize()?;
        self.take(n)
    }

    fn u64s(&mut self) -> Option<Vec<u64>> {
        let n = self.usize()?;
        let bytes = self.take(n.checked_mul(8)?)?;
        Some(
            bytes
                .as_chunks::<8>()
                .0
                .iter()
                .map(|b| u64::from_le_bytes(*b))
                .collect(),
        )
    }

    fn lined_texts(&mut self) -> Option<Vec<(usize, String)>> {
        let n = self.usize()?;
        // Each takes 16 bytes at least: a count beyond that is not a record's.
        let mut out = Vec::with_capacity(n.min(self.0.len() / 16));
        for _ in 0..n {
            let line = self.usize()?;
            let text = String::from_utf8(self.bytes()?.to_vec()).ok()?;
            out.push((line, text));
        }
        Some(out)
    }
}
