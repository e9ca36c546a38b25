//! The in-memory transcript: parse (v1/v2/v3, migrated to v3), the entry tree, boundary loading
//! of the context, token accounting and appends. Everything per entry is decoded once at parse
//! or append time so `context()` and `context_tokens()` are plain walks over indices.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use crate::entry::{Decode, Entry, Header, Line};
use crate::error::{LoadWarning, TranscriptError, push_warning};
use crate::lines::{
    Lines, READ_IN_TWO_FROM, drop_torn_last_line, missing_parent, numbered_lines, quote,
};
use crate::record::{CompactionRecord, Trigger};
use crate::role::Role;
use crate::tokens::TokenCounter;

/// Entry index by id. Ids are hashed once per entry on every load: foldhash is several times
/// faster than the default SipHash and still seeded per process.
type IdIndex = HashMap<String, usize, foldhash::fast::RandomState>;

/// A session transcript.
#[derive(Debug, Clone)]
pub struct Transcript {
    source: String,
    header: Header,
    entries: Vec<Entry>,
    by_id: IdIndex,
    warnings: Vec<LoadWarning>,
    /// Exact token counting, when selected; None is chars/4.
    counter: Option<TokenCounter>,
    /// The window the context is measured for, when known (see `set_context_window`).
    window: Option<u64>,
    /// [`Transcript::context`], kept current: computed when the file is linked and extended
    /// by appends (every append goes under the leaf, so the branch only grows at its end), so
    /// the per-turn reads (assemble, measuring, compaction) need no walk of the branch.
    context: Vec<usize>,
    /// The tokens of `context`'s entries, kept with it (a turn reads it when the latest usage
    /// does not fit the window; summing 20,000 entries per turn grew with the history).
    context_total: u64,
    /// The latest entry of the context with a usage figure (after its compaction), as its
    /// position in `context` and the context's total through it: with `context_total`, what
    /// `context_tokens` needs, kept as the context grows instead of walked back every turn.
    usage_anchor: Option<(usize, u64)>,
    /// See [`Transcript::revision`].
    revision: u64,
}

/// How many compactions a branch has seen (see [`Transcript::compaction_stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactionStats {
    /// Every compaction entry on the active branch.
    pub total: usize,
    /// Those that summarized (every layer but `prune`): what degrades the context.
    pub summarizing: usize,
    /// Automatic (trigger `auto` / `overflow`) summarizing compactions since the last user
    /// message: what `maxAutoCompactions` caps.
    pub auto_in_run: usize,
}

/// A compaction to append (see [`Transcript::append_compaction`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NewCompaction {
    pub summary: String,
    pub first_kept_entry_id: String,
    pub tokens_before: u64,
    pub details: Option<Value>,
}

impl Transcript {
    /// An empty version 3 transcript.
    pub fn new(session_id: &str, cwd: &str, timestamp_iso: &str) -> Transcript {
        Self::unlinked(
            format!("<session {session_id}>"),
            Header::new_v3(session_id, cwd, timestamp_iso),
            Vec::new(),
            Vec::new(),
        )
    }

    /// A transcript of these entries before [`Transcript::link`] indexes them and walks the
    /// context (an empty one needs no linking).
    fn unlinked(
        source: String,
        header: Header,
        entries: Vec<Entry>,
        warnings: Vec<LoadWarning>,
    ) -> Transcript {
        Transcript {
            source,
            header,
            entries,
            by_id: IdIndex::default(),
            warnings,
            counter: None,
            window: None,
            context: Vec::new(),
            context_total: 0,
            usage_anchor: None,
            revision: 0,
        }
    }

    /// Read a transcript from disk; errors name the path. The header is checked before the
    /// rest of the file is read.
    pub fn load(path: &Path) -> Result<Transcript, TranscriptError> {
        let text = crate::read::read_text(path)?;
        Transcript::parse_inner(text, &path.display().to_string(), false)
    }

    /// Parse JSONL of any supported version; v1/v2 are migrated to v3 in memory. `source`
    /// names the file in errors and warnings.
    pub fn parse(text: &str, source: &str) -> Result<Transcript, TranscriptError> {
        Transcript::parse_inner(text.to_string(), source, false)
    }

    /// Parse the header plus the tail of a file (see `status`): references to entries before
    /// the tail (parents, older boundaries) are left unresolved without complaint.
    pub(crate) fn parse_tail(text: String, source: &str) -> Result<Transcript, TranscriptError> {
        Transcript::parse_inner(text, source, true)
    }

    fn parse_inner(
        text: String,
        source: &str,
        partial: bool,
    ) -> Result<Transcript, TranscriptError> {
        Transcript::parse_with(text, source, partial, READ_IN_TWO_FROM)
    }

    /// Parse `text`; every entry's line is a slice of it (see [`Line`]). Lone surrogate
    /// escapes are read as every other reader reads them (see `lenient`). From `in_two`
    /// bytes on, a v2/v3 file's lines are read on two threads.
    pub(crate) fn parse_with(
        text: String,
        source: &str,
        partial: bool,
        in_two: usize,
    ) -> Result<Transcript, TranscriptError> {
        let buf = Arc::new(crate::lenient::text(text));
        let whole = buf.as_str();
        let line_of = |part: &str| line_in(&buf, part);
        let mut warnings = Vec::new();
        let lines = file_lines(whole, source, &mut warnings);
        let header = read_header(&lines, source)?;
        let reader = Lines {
            version: header.version(),
            entry_count: lines.len() - 1,
            source,
            line_of: &line_of,
        };
        let entries = reader.read_body(&lines[1..], whole.len() >= in_two, &mut warnings)?;
        let mut t = Self::unlinked(source.to_string(), header, entries, warnings);
        t.link(partial)?;
        Ok(t)
    }

    /// Index ids, resolve parents and compaction boundaries, reject duplicates and cycles.
    fn link(&mut self, partial: bool) -> Result<(), TranscriptError> {
        self.by_id = self.index_ids()?;
        self.resolve_links(partial)?;
        self.check_cycles()?;
        self.apply_prunes();
        self.set_context(self.walk_context());
        self.revision += 1;
        Ok(())
    }

    /// Each entry's index by id; a duplicate id is an error naming both lines.
    fn index_ids(&self) -> Result<IdIndex, TranscriptError> {
        let mut by_id = IdIndex::with_capacity_and_hasher(self.entries.len(), Default::default());
        for (i, e) in self.entries.iter().enumerate() {
            if let Some(&first) = by_id.get(e.id()) {
                let first_line = self.entries.get(first).map_or(0, Entry::line_number);
                let problem = format!(
                    "duplicate id {:?} (first used on line {first_line})",
                    e.id()
                );
                return Err(TranscriptError::invalid(
                    &self.source,
                    e.line_number(),
                    problem,
                ));
            }
            by_id.insert(e.id().to_string(), i);
        }
        Ok(by_id)
    }

    /// Each entry's parent and first kept entry, by index. A missing parent makes a root (with
    /// a warning); a missing first kept entry is an error. With `partial`, references before
    /// the text read are left unresolved without complaint.
    fn resolve_links(&mut self, partial: bool) -> Result<(), TranscriptError> {
        for e in &mut self.entries {
            e.parent = e.parent_id().and_then(|p| self.by_id.get(p).copied());
            if let Some(p) = e.parent_id().filter(|_| e.parent.is_none() && !partial) {
                push_warning(
                    &mut self.warnings,
                    &self.source,
                    e.line_number(),
                    missing_parent(p),
                );
            }
            let Some(k) = e.first_kept_entry_id() else {
                continue;
            };
            match self.by_id.get(k) {
                Some(&idx) => e.first_kept = Some(idx),
                None if partial => {}
                None => return Err(missing_first_kept(&self.source, e, k)),
            }
        }
        Ok(())
    }

    /// Mark the tool results pruned by compactions on the active branch. The branch only
    /// grows (appends go under the leaf), so marks are only ever added.
    fn apply_prunes(&mut self) {
        let branch = self.active_branch();
        // Only a compaction's record names pruned entries: most branches have none, and the
        // set below would cost a hash per entry of the branch.
        if !branch
            .iter()
            .any(|&i| self.entries[i].compaction_record().is_some())
        {
            return;
        }
        let marks = self.pruned_on(&branch);
        self.mark_tool_results_pruned(marks);
    }

    /// The entries of `branch` its compactions pruned (each one before the compaction).
    fn pruned_on(&self, branch: &[usize]) -> Vec<usize> {
        let on_branch: std::collections::HashSet<usize> = branch.iter().copied().collect();
        let mut marks = Vec::new();
        for &i in branch {
            if let Some(meta) = self.entries[i].compaction_record() {
                marks.extend(
                    meta.pruned_entry_ids
                        .iter()
                        .filter_map(|id| self.by_id.get(id).copied())
                        .filter(|j| *j < i && on_branch.contains(j)),
                );
            }
        }
        marks
    }

    /// Marks the tool results among `entries` as pruned (a pruned entry of another kind stays
    /// as it is).
    fn mark_tool_results_pruned(&mut self, entries: impl IntoIterator<Item = usize>) {
        for j in entries {
            let e = &mut self.entries[j];
            if e.context_role() == Some(Role::ToolResult) {
                e.pruned = true;
            }
        }
    }

    /// Parent links must form a forest; a cycle would make the active branch endless.
    fn check_cycles(&self) -> Result<(), TranscriptError> {
        let mut state = vec![Walk::New; self.entries.len()];
        let mut path = Vec::new();
        for start in 0..self.entries.len() {
            if let Some(c) = self.cycle_from(start, &mut state, &mut path) {
                let e = &self.entries[c];
                let problem = format!("parentId cycle through entry {:?}", e.id());
                return Err(TranscriptError::invalid(
                    &self.source,
                    e.line_number(),
                    problem,
                ));
            }
            for p in path.drain(..) {
                state[p] = Walk::Done;
            }
        }
        Ok(())
    }

    /// Walks the parents up from `start`, onto `path`, to a root or an entry walked before;
    /// an entry met twice on the way is a cycle's, returned.
    fn cycle_from(&self, start: usize, state: &mut [Walk], path: &mut Vec<usize>) -> Option<usize> {
        let mut cur = Some(start);
        while let Some(c) = cur {
            match state[c] {
                Walk::Done => return None,
                Walk::OnPath => return Some(c),
                Walk::New => {}
            }
            state[c] = Walk::OnPath;
            path.push(c);
            cur = self.entries[c].parent;
        }
        None
    }

    /// The name errors and warnings use for this transcript.
    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// File order; the index is the engine-facing entry reference.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub fn warnings(&self) -> &[LoadWarning] {
        &self.warnings
    }

    /// For a file the next write rewrites: lines the reader repaired (a torn last line
    /// dropped, entries on one line split or skipped) are not silently lost, say so.
    pub(crate) fn note_torn_tail_backup(&mut self) {
        for w in &mut self.warnings {
            if w.message.starts_with("torn last line") || w.message.contains("entries on one line")
            {
                w.message.push_str(
                    "; the next write rewrites the file and keeps its bytes in a backup beside it",
                );
            }
        }
    }

    /// Whether the file was an older version (writing it back produces different bytes).
    pub fn is_migrated(&self) -> bool {
        self.header.version() < 3
    }

    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.by_id.get(id).copied()
    }

    /// The last entry of the file.
    pub fn leaf(&self) -> Option<usize> {
        self.entries.len().checked_sub(1)
    }

    /// The whole transcript as version 3 JSONL (v3 lines verbatim, migrated ones rewritten).
    pub fn to_v3_string(&self) -> String {
        let header = self.header.v3_line();
        let len = header.len()
            + 1
            + self
                .entries
                .iter()
                .map(|e| e.v3_line().len() + 1)
                .sum::<usize>();
        let mut out = String::with_capacity(len);
        out.push_str(&header);
        out.push('\n');
        for e in &self.entries {
            out.push_str(e.v3_line());
            out.push('\n');
        }
        out
    }
}

mod append;
mod context;

/// The error of a compaction whose first kept entry `k` is not in the file.
fn missing_first_kept(source: &str, e: &Entry, k: &str) -> TranscriptError {
    let problem = format!("compaction firstKeptEntryId {k:?} is not an entry of this file");
    TranscriptError::invalid(source, e.line_number(), problem)
}

/// Where an entry stands in [`Transcript::check_cycles`]'s walk.
#[derive(Clone, Copy)]
enum Walk {
    New,
    OnPath,
    Done,
}

/// `part` of the text in `buf` as a line sharing it.
fn line_in(buf: &Arc<String>, part: &str) -> Line {
    let start = part.as_ptr() as usize - buf.as_ptr() as usize;
    Line::slice(buf, start..start + part.len())
}

/// The lines of a file's text that are not blank (see [`numbered_lines`]), a torn last line
/// dropped with a warning. Windows editors start UTF-8 files with a byte order mark; it is
/// not content.
fn file_lines<'t>(
    whole: &'t str,
    source: &str,
    warnings: &mut Vec<LoadWarning>,
) -> Vec<(usize, &'t str)> {
    let text = whole.strip_prefix(crate::read::BOM).unwrap_or(whole);
    let mut lines = numbered_lines(text);
    drop_torn_last_line(text, &mut lines, source, warnings);
    lines
}

/// The session header, the first of the file's `lines`.
fn read_header(lines: &[(usize, &str)], source: &str) -> Result<Header, TranscriptError> {
    let Some(&(header_line, header_text)) = lines.first() else {
        return Err(TranscriptError::invalid(
            source,
            1,
            "empty file: no session header",
        ));
    };
    Header::parse(header_text).map_err(|p| TranscriptError::invalid(source, header_line, p))
}

#[cfg(test)]
mod tests;
