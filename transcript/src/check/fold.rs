//! The chunks' findings put together in file order, as loading would: the state of a check
//! after the bytes it has read so far, and the verdict once the file's last byte is read.

use std::collections::HashSet;
use std::hash::BuildHasher;

use crate::entry::Entry;
use crate::error::{LoadWarning, TranscriptError, push_warning};
use crate::lines::{TORN_LAST_LINE, missing_parent};

/// What the check found.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Loading accepts the file, with these warnings (in loading's order).
    Valid(Vec<LoadWarning>, Shape),
    /// Only the full load can say (see the module docs of `check`).
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

/// What one chunk holds; line numbers count from its first line (0).
#[derive(Default)]
pub(super) struct Chunk {
    /// Lines that start in the chunk, blank ones too.
    pub(super) lines: usize,
    /// Whether one of them is not blank.
    pub(super) any_text: bool,
    /// Whether its last line ends with a line break.
    pub(super) ends_with_newline: bool,
    /// Invalid UTF-8: (line, byte in the line).
    pub(super) bad_utf8: Option<(usize, usize)>,
    /// Loading's warnings for its lines, in order.
    pub(super) warnings: Vec<(usize, String)>,
    pub(super) links: Links,
    /// Entries sent to the model (context role, not a compaction).
    pub(super) messages: usize,
    pub(super) refused: Option<Refused>,
}

/// The first line that does not decode, held until it is known whether it is the file's torn
/// last line (which loading skips with a warning) and whether invalid UTF-8 follows (which
/// loading reports first).
pub(super) struct Refused {
    pub(super) line: usize,
    pub(super) problem: String,
    /// Not JSON at all, so a torn last line if nothing follows it.
    pub(super) torn_if_last: bool,
    /// A line that is not blank follows it.
    pub(super) followed: bool,
}

pub(super) fn hash(id: &str) -> u64 {
    foldhash::fast::FixedState::default().hash_one(id)
}

/// The hashes of every id read: those of a remembered prefix of the file and those read since.
#[derive(Default)]
pub(super) struct Ids {
    pub(super) earlier: SortedIds,
    pub(super) read: HashSet<u64, foldhash::fast::FixedState>,
}

/// Sorted id hashes as a record holds them, 8 bytes each (little-endian) from `start`, looked
/// up where they were read: no table is built and nothing is copied.
#[derive(Default)]
pub(super) struct SortedIds {
    bytes: Vec<u8>,
    start: usize,
}

impl SortedIds {
    /// `bytes[start..]`: the ids, sorted.
    pub(super) fn new(bytes: Vec<u8>, start: usize) -> Self {
        Self { bytes, start }
    }

    fn each(&self) -> &[[u8; 8]] {
        self.bytes[self.start..].as_chunks::<8>().0
    }

    fn contains(&self, id: u64) -> bool {
        let each = self.each();
        each.binary_search_by(|b| u64::from_le_bytes(*b).cmp(&id))
            .is_ok()
    }
}

impl Ids {
    fn contains(&self, id: u64) -> bool {
        self.read.contains(&id) || self.earlier.contains(id)
    }

    /// False when the id was read before.
    fn insert(&mut self, id: u64) -> bool {
        !self.earlier.contains(id) && self.read.insert(id)
    }

    /// All of them, sorted.
    pub(super) fn sorted(&self) -> Vec<u64> {
        let mut read: Vec<u64> = self.read.iter().copied().collect();
        read.sort_unstable();
        let earlier = self.earlier.each().iter().map(|b| u64::from_le_bytes(*b));
        let mut all = Vec::with_capacity(self.earlier.each().len() + read.len());
        let (mut a, mut b) = (earlier.peekable(), read.into_iter().peekable());
        while let (Some(&x), Some(&y)) = (a.peek(), b.peek()) {
            if x <= y {
                all.push(x);
                a.next();
            } else {
                all.push(y);
                b.next();
            }
        }
        all.extend(a.chain(b));
        all
    }
}

/// What linking would find, kept as 64-bit hashes of ids: of one chunk while it is read, then
/// of the file as the chunks are put together (in file order: whether a parent comes before
/// its child is only known then).
#[derive(Default)]
pub(super) struct Links {
    /// The chunk's ids, in file order.
    ids: Vec<u64>,
    /// Parents that are not the entry before their child in the chunk: (the child's place in
    /// `ids`, its line, the parent id). Few: an appended file is one chain, mostly.
    off_chain: Vec<(usize, usize, String)>,
    /// Of the file: parents not read before their child, (line, parent id).
    pub(super) later_parents: Vec<(usize, String)>,
    /// The first kept entry of every compaction.
    pub(super) boundaries: Vec<u64>,
    pub(super) ask_the_loader: bool,
    pub(super) chain: Chain,
}

/// Whether entries link as one chain, each to the one before it (v1 files by their position).
#[derive(Default)]
pub(super) struct Chain {
    /// The first entry's parent (v2/v3).
    pub(super) first_parent: Option<Option<u64>>,
    /// The last entry's id (v2/v3).
    pub(super) last: Option<u64>,
    /// An entry links elsewhere, or is a compaction.
    pub(super) broken: bool,
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
    /// Of a file whose first lines were checked before.
    pub(super) fn resumed(
        later_parents: Vec<(usize, String)>,
        boundaries: Vec<u64>,
        chain: Chain,
    ) -> Self {
        Self {
            later_parents,
            boundaries,
            chain,
            ..Self::default()
        }
    }

    pub(super) fn note(&mut self, id: &str, parent: Option<&str>, kept: Option<&str>, line: usize) {
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

    pub(super) fn note_entry(&mut self, e: &Entry, line: usize, version: u32) {
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
        ids: &Ids,
        mut warnings: Vec<LoadWarning>,
        shape: Shape,
        source: &str,
    ) -> Verdict {
        if self.ask_the_loader || self.boundaries.iter().any(|&b| !ids.contains(b)) {
            return Verdict::AskTheLoader;
        }
        for (line, parent) in self.later_parents {
            if ids.contains(hash(&parent)) {
                // Written after its child: fine, unless the links go round; loading knows.
                return Verdict::AskTheLoader;
            }
            push_warning(&mut warnings, source, line, missing_parent(&parent));
        }
        Verdict::Valid(warnings, shape)
    }
}

/// The file as far as its chunks have been put together.
pub(super) struct Folded {
    pub(super) source: String,
    /// Lines before the next chunk's first, the header's and those before it included.
    pub(super) lines: usize,
    pub(super) ids: Ids,
    /// Of the file (see [`Links`]).
    pub(super) links: Links,
    /// Entries sent to the model.
    pub(super) messages: usize,
    pub(super) warnings: Vec<LoadWarning>,
    refused: Option<Refused>,
    ends_with_newline: bool,
}

impl Folded {
    /// Before the first line after the header (on line `header_line`).
    pub(super) fn new(source: String, header_line: usize) -> Self {
        Self::resume(
            source,
            header_line,
            Ids::default(),
            Links::default(),
            0,
            Vec::new(),
        )
    }

    /// After lines that end with a line break, without a refused line among them.
    pub(super) fn resume(
        source: String,
        lines: usize,
        ids: Ids,
        links: Links,
        messages: usize,
        warnings: Vec<LoadWarning>,
    ) -> Self {
        Self {
            source,
            lines,
            ids,
            links,
            messages,
            warnings,
            refused: None,
            ends_with_newline: true,
        }
    }

    /// Nothing read so far is left to the full load or refused: what follows it can only add
    /// to the verdict, so the state may be remembered.
    pub(super) fn settled(&self) -> bool {
        self.refused.is_none() && !self.links.ask_the_loader
    }

    /// The next chunks, in file order.
    pub(super) fn add(&mut self, chunks: Vec<Chunk>) -> Result<(), TranscriptError> {
        // Sized once: a set grown step by step holds its old table and its new one at once.
        let new_ids = chunks.iter().map(|c| c.links.ids.len()).sum();
        self.ids.read.reserve(new_ids);
        // The warnings too: a vector grown by doubling is up to twice what it holds.
        let new_warnings = chunks.iter().map(|c| c.warnings.len()).sum();
        self.warnings.reserve_exact(new_warnings);
        chunks
            .into_iter()
            .try_for_each(|chunk| self.add_chunk(chunk))
    }

    fn add_chunk(&mut self, chunk: Chunk) -> Result<(), TranscriptError> {
        // Line `n` of the chunk is line `before + 1 + n`.
        let before = self.lines;
        let line = |n: usize| before + 1 + n;
        if let Some((n, at)) = chunk.bad_utf8 {
            return Err(crate::read::invalid_utf8(&self.source, line(n), at));
        }
        self.lines += chunk.lines;
        // A chunk inside a line that started before it says nothing of the file's end.
        self.ends_with_newline =
            chunk.ends_with_newline || (chunk.lines == 0 && self.ends_with_newline);
        if let Some(r) = &mut self.refused {
            r.followed |= chunk.any_text;
            return Ok(());
        }
        self.add_warnings(chunk.warnings, before);
        self.add_links(chunk.links, before);
        self.messages += chunk.messages;
        self.refused = chunk.refused.map(|r| Refused {
            line: line(r.line),
            ..r
        });
        Ok(())
    }

    /// A chunk's warnings (by line of the chunk), after the `before` lines read before it.
    fn add_warnings(&mut self, warnings: Vec<(usize, String)>, before: usize) {
        for (n, message) in warnings {
            push_warning(&mut self.warnings, &self.source, before + 1 + n, message);
        }
    }

    /// A chunk's links, after those of the `before` lines read before it.
    fn add_links(&mut self, c: Links, before: usize) {
        let (links, ids) = (&mut self.links, &mut self.ids);
        // The ids in file order, each parent off the chain looked up just before its child.
        let mut off_chain = c.off_chain.into_iter().peekable();
        for (k, id) in c.ids.into_iter().enumerate() {
            while let Some((_, n, parent)) = off_chain.next_if(|(at, ..)| *at == k) {
                if !ids.contains(hash(&parent)) {
                    links.later_parents.push((before + 1 + n, parent));
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
    }

    /// The boundaries whose entry has not been read yet (the others stay found).
    pub(super) fn boundaries_not_found(&self) -> Vec<u64> {
        let found = |b: &&u64| self.ids.contains(**b);
        self.links
            .boundaries
            .iter()
            .filter(|b| !found(b))
            .copied()
            .collect()
    }

    /// Loading's verdict, the file's last byte read.
    pub(super) fn verdict(self) -> Result<Verdict, TranscriptError> {
        let shape = Shape {
            chain_messages: (!self.links.chain.broken).then_some(self.messages),
            torn: self.refused.is_some(),
        };
        let mut warnings = self.warnings;
        if let Some(r) = self.refused {
            if r.followed || self.ends_with_newline || !r.torn_if_last {
                return Err(TranscriptError::invalid(&self.source, r.line, r.problem));
            }
            // Loading drops a torn last line before reading the others, and says so first.
            let torn = LoadWarning {
                source: self.source.as_str().into(),
                line: r.line,
                message: TORN_LAST_LINE.into(),
            };
            warnings.insert(0, torn);
        }
        Ok(self.links.verdict(&self.ids, warnings, shape, &self.source))
    }
}
