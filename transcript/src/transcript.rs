//! The in-memory transcript: parse (v1/v2/v3, migrated to v3), the entry tree, boundary loading
//! of the context, token accounting and appends. Everything per entry is decoded once at parse
//! or append time so `context()` and `context_tokens()` are plain walks over indices.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::path::Path;
use std::sync::Arc;

use serde::de::IgnoredAny;
use serde_json::Value;

use crate::entry::{Decode, Entry, Header, Line};
use crate::error::{LoadWarning, TranscriptError};
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

fn quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

pub(crate) use crate::read::split_concatenated;

/// One line of a file's body (not blank, without its line break) as every reader reads it:
/// each entry it holds goes to `each` (several when entries were written without a line break
/// between them), and what was odd but readable to `warnings`. Returns how many v1 positions
/// the line takes (see [`kept_v1_line`]). `line_of` makes an entry's line from a slice of
/// `text`. The full load and `status`'s check of a whole file both read every line here, so
/// they accept and refuse the same lines with the same words.
pub(crate) fn read_line(
    text: &str,
    line_no: usize,
    decode: &Decode,
    source: &str,
    line_of: &dyn Fn(&str) -> Line,
    warnings: &mut Vec<LoadWarning>,
    mut each: impl FnMut(Entry),
) -> Result<usize, TranscriptError> {
    let warning = |message: String| LoadWarning {
        source: source.to_string(),
        line: line_no,
        message,
    };
    let mut emit = |mut e: Entry, warnings: &mut Vec<LoadWarning>| {
        if let Some(note) = e.take_note() {
            warnings.push(warning(note));
        }
        each(e);
    };
    let decoded = match Entry::decode(line_of(text), line_no, decode) {
        Ok(e) => {
            emit(e, warnings);
            return Ok(1);
        }
        Err(problem) => {
            let Some(parts) = split_concatenated(text) else {
                return Err(TranscriptError::invalid(source, line_no, problem));
            };
            let n = parts.len();
            if decode.version == 1 {
                warnings.push(warning(format!(
                    "{n} JSON entries on one line (no line break between them); left out of \
                     the context as pi leaves them out, and kept whole (a \"custom\" entry \
                     of type {KEPT_V1_LINE:?}) when the file is rewritten"
                )));
                let kept = kept_v1_line(&parts, line_no, decode)
                    .map_err(|p| TranscriptError::invalid(source, line_no, p))?;
                emit(kept, warnings);
                return Ok(0);
            }
            warnings.push(warning(format!(
                "{n} JSON entries on one line (no line break between them); read as {n} entries"
            )));
            parts
                .into_iter()
                .map(|part| Entry::decode(line_of(part), line_no, decode))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|p| TranscriptError::invalid(source, line_no, p))?
        }
    };
    let positions = decoded.len();
    for e in decoded {
        emit(e, warnings);
    }
    Ok(positions)
}

/// Files from this size on are read on two threads (see [`Lines::read_in_two`]).
const READ_IN_TWO_FROM: usize = 8 << 20;

/// A file's lines after its header, read into entries.
struct Lines<'a> {
    version: u32,
    entry_count: usize,
    source: &'a str,
    line_of: &'a (dyn Fn(&str) -> Line + Sync),
}

impl Lines<'_> {
    /// `lines` in order, each through [`read_line`].
    fn read(
        &self,
        lines: &[(usize, &str)],
        warnings: &mut Vec<LoadWarning>,
    ) -> Result<Vec<Entry>, TranscriptError> {
        let mut entries = Vec::with_capacity(lines.len());
        let mut positions = 0;
        for &(line_no, text) in lines {
            let decode = Decode {
                version: self.version,
                // v1 ids and parents follow the position among the entries read.
                index: positions,
                entry_count: self.entry_count,
            };
            positions += read_line(
                text,
                line_no,
                &decode,
                self.source,
                self.line_of,
                warnings,
                |e| entries.push(e),
            )?;
        }
        Ok(entries)
    }

    /// [`Lines::read`] with the second half on another thread: a v2/v3 line decodes the same
    /// wherever it sits (only v1 ids follow positions), so the halves are read apart and put
    /// together in order, the first error in the file first.
    fn read_in_two(
        &self,
        lines: &[(usize, &str)],
        warnings: &mut Vec<LoadWarning>,
    ) -> Result<Vec<Entry>, TranscriptError> {
        let (first, second) = lines.split_at(lines.len() / 2);
        let read_second = || {
            let mut warnings = Vec::new();
            self.read(second, &mut warnings).map(|e| (e, warnings))
        };
        let (entries, later) = std::thread::scope(|scope| {
            let helper = std::thread::Builder::new().spawn_scoped(scope, read_second);
            let entries = self.read(first, warnings);
            // Where no thread can be made, this one reads the second half too.
            let later = match helper {
                Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                Err(_) => read_second(),
            };
            (entries, later)
        });
        let mut entries = entries?;
        let (more, more_warnings) = later?;
        entries.extend(more);
        warnings.extend(more_warnings);
        Ok(entries)
    }
}

/// `text.split('\n')`, with the line breaks found by `memchr` (vector instructions): the
/// split of a whole file is one of loading's passes over it.
fn split_lines(text: &str) -> impl Iterator<Item = &str> {
    let mut start = 0;
    memchr::memchr_iter(b'\n', text.as_bytes())
        .map(Some)
        .chain([None])
        .map(move |newline| {
            let end = newline.unwrap_or(text.len());
            let line = &text[start..end];
            start = end + 1;
            line
        })
}

/// The `customType` of a v1 line of several entries, kept whole.
pub(crate) const KEPT_V1_LINE: &str = "ctxhost.v1-line";

/// A v1 line holding several entries (written without a line break between them), as an
/// entry that keeps them. pi skips such a line, and v1 boundaries count entries by position
/// as pi reads them, so the line takes no position: it hangs off the entry before it, beside
/// the branch, as a `custom` entry (which no model is sent) holding its entries verbatim. A
/// rewrite as v3 so keeps every byte of them without changing the context, for ctxhost or pi.
fn kept_v1_line(parts: &[&str], line_no: usize, decode: &Decode) -> Result<Entry, String> {
    let parent = decode.index.checked_sub(1).map(crate::entry::v1_id);
    let line = format!(
        "{{\"type\":\"custom\",\"id\":{},\"parentId\":{},\"customType\":{},\"data\":{{\"entries\":[{}]}}}}",
        // Not a position's id (eight hex digits): it cannot collide with one.
        quote(&format!("v1-line-{line_no}")),
        parent.as_deref().map_or_else(|| "null".to_string(), quote),
        quote(KEPT_V1_LINE),
        parts.join(",")
    );
    let as_v3 = Decode {
        version: 3,
        index: decode.index,
        entry_count: decode.entry_count,
    };
    Entry::decode(Line::from(line), line_no, &as_v3)
}

/// What loading says of a torn last line (it skips it).
pub(crate) const TORN_LAST_LINE: &str = "torn last line (no trailing newline, not JSON) ignored";

/// What loading says of an entry whose parent is not in the file.
pub(crate) fn missing_parent(parent: &str) -> String {
    format!("parentId {parent:?} not found; entry treated as a root")
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
        let line_of = |part: &str| {
            let start = part.as_ptr() as usize - whole.as_ptr() as usize;
            Line::slice(&buf, start..start + part.len())
        };
        // Windows editors start UTF-8 files with a byte order mark; it is not content.
        let text = whole.strip_prefix(crate::read::BOM).unwrap_or(whole);
        let mut lines: Vec<(usize, &str)> = split_lines(text)
            .enumerate()
            .map(|(i, l)| (i + 1, l.strip_suffix('\r').unwrap_or(l)))
            .filter(|(_, l)| !l.trim().is_empty())
            .collect();
        let mut warnings = Vec::new();
        // A crash mid-write leaves a last line without its newline; if it is not JSON it is
        // the torn tail of an append, not corruption of what came before. A lone line is the
        // header, judged as such (a torn header would otherwise read as an empty file).
        if !text.ends_with('\n')
            && lines.len() > 1
            && let Some(&(line, last)) = lines.last()
            && serde_json::from_str::<IgnoredAny>(last).is_err()
            && split_concatenated(last).is_none()
        {
            warnings.push(LoadWarning {
                source: source.to_string(),
                line,
                message: TORN_LAST_LINE.into(),
            });
            lines.pop();
        }
        let Some(&(header_line, header_text)) = lines.first() else {
            return Err(TranscriptError::invalid(
                source,
                1,
                "empty file: no session header",
            ));
        };
        let header = Header::parse(header_text)
            .map_err(|p| TranscriptError::invalid(source, header_line, p))?;
        let reader = Lines {
            version: header.version(),
            entry_count: lines.len() - 1,
            source,
            line_of: &line_of,
        };
        let entries = if header.version() >= 2 && whole.len() >= in_two {
            reader.read_in_two(&lines[1..], &mut warnings)?
        } else {
            reader.read(&lines[1..], &mut warnings)?
        };
        let mut t = Self::unlinked(source.to_string(), header, entries, warnings);
        t.link(partial)?;
        Ok(t)
    }

    /// Index ids, resolve parents and compaction boundaries, reject duplicates and cycles.
    fn link(&mut self, partial: bool) -> Result<(), TranscriptError> {
        let src = self.source.clone();
        let mut by_id = IdIndex::with_capacity_and_hasher(self.entries.len(), Default::default());
        for (i, e) in self.entries.iter().enumerate() {
            if let Some(&first) = by_id.get(e.id()) {
                let first_line = self.entries.get(first).map_or(0, Entry::line_number);
                return Err(TranscriptError::invalid(
                    &src,
                    e.line_number(),
                    format!(
                        "duplicate id {:?} (first used on line {first_line})",
                        e.id()
                    ),
                ));
            }
            by_id.insert(e.id().to_string(), i);
        }
        let mut warnings = Vec::new();
        for e in &mut self.entries {
            e.parent = match e.parent_id() {
                None => None,
                Some(p) => {
                    let found = by_id.get(p).copied();
                    if found.is_none() && !partial {
                        warnings.push(LoadWarning {
                            source: src.clone(),
                            line: e.line_number(),
                            message: missing_parent(p),
                        });
                    }
                    found
                }
            };
            if let Some(k) = e.first_kept_entry_id() {
                let Some(&idx) = by_id.get(k) else {
                    if partial {
                        continue;
                    }
                    return Err(TranscriptError::invalid(
                        &src,
                        e.line_number(),
                        format!("compaction firstKeptEntryId {k:?} is not an entry of this file"),
                    ));
                };
                e.first_kept = Some(idx);
            }
        }
        self.warnings.extend(warnings);
        self.by_id = by_id;
        self.check_cycles()?;
        self.apply_prunes();
        self.set_context(self.walk_context());
        self.revision += 1;
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
        let on_branch: std::collections::HashSet<usize> = branch.iter().copied().collect();
        let mut marks = Vec::new();
        for &i in &branch {
            if let Some(meta) = self.entries[i].compaction_record() {
                marks.extend(
                    meta.pruned_entry_ids
                        .iter()
                        .filter_map(|id| self.by_id.get(id).copied())
                        .filter(|j| *j < i && on_branch.contains(j)),
                );
            }
        }
        for j in marks {
            let e = &mut self.entries[j];
            if e.context_role() == Some(Role::ToolResult) {
                e.pruned = true;
            }
        }
    }

    /// Parent links must form a forest; a cycle would make the active branch endless.
    fn check_cycles(&self) -> Result<(), TranscriptError> {
        const NEW: u8 = 0;
        const ON_PATH: u8 = 1;
        const DONE: u8 = 2;
        let mut state = vec![NEW; self.entries.len()];
        let mut path = Vec::new();
        for start in 0..self.entries.len() {
            let mut cur = Some(start);
            while let Some(c) = cur {
                match state[c] {
                    DONE => break,
                    ON_PATH => {
                        let e = &self.entries[c];
                        return Err(TranscriptError::invalid(
                            &self.source,
                            e.line_number(),
                            format!("parentId cycle through entry {:?}", e.id()),
                        ));
                    }
                    _ => {}
                }
                state[c] = ON_PATH;
                path.push(c);
                cur = self.entries[c].parent;
            }
            for p in path.drain(..) {
                state[p] = DONE;
            }
        }
        Ok(())
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

    /// Root..leaf by parentId.
    pub fn active_branch(&self) -> Vec<usize> {
        let mut out = Vec::new();
        let mut cur = self.leaf();
        // Links were checked acyclic; the bound only guards against future mistakes.
        while let Some(i) = cur
            && out.len() <= self.entries.len()
        {
            out.push(i);
            cur = self.entries[i].parent;
        }
        out.reverse();
        out
    }

    fn latest_compaction(&self, branch: &[usize]) -> Option<usize> {
        branch
            .iter()
            .rposition(|&i| self.entries[i].entry_type() == "compaction")
    }

    /// Position in `branch[..before]` of the first entry kept by the compaction at `branch[p]`.
    fn first_kept_position(&self, branch: &[usize], p: usize) -> Option<usize> {
        let k = self.entries[branch[p]].first_kept?;
        branch[..p].iter().position(|&i| i == k)
    }

    fn is_message_context(&self, i: usize) -> bool {
        let e = &self.entries[i];
        e.context_role().is_some() && e.entry_type() != "compaction"
    }

    /// What is sent to the model, by boundary loading: with a compaction on the active branch,
    /// the latest compaction followed by the context entries from its first kept entry on
    /// (older compactions are not repeated); otherwise every context entry of the branch.
    pub fn context(&self) -> &[usize] {
        &self.context
    }

    /// Changes whenever the context changes other than by appending to it: a compaction moved
    /// its boundary (and may have pruned entries), or its entries were re-counted. While it
    /// stays the same, what a reader derived from `context()[..n]` still holds, so a reader
    /// can keep that and look only at what was appended since.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Replaces the context (recomputed from the branch), its token total and usage anchor.
    pub(crate) fn set_context(&mut self, context: Vec<usize>) {
        self.context = context;
        self.recount_context();
    }

    /// The context's token total and usage anchor, from its entries as they are now.
    pub(crate) fn recount_context(&mut self) {
        self.context_total = self.sum_of_context();
        let boundary = (self.context.first().copied())
            .filter(|&i| self.entries[i].entry_type() == "compaction");
        let mut through = self.context_total;
        self.usage_anchor = None;
        for (position, &i) in self.context.iter().enumerate().rev() {
            let e = &self.entries[i];
            if e.usage_total().is_some() && boundary.is_none_or(|b| i > b) {
                self.usage_anchor = Some((position, through));
                return;
            }
            through -= u64::from(e.tokens());
        }
    }

    /// Extends the context by entry `index`, appended last (so after any compaction).
    pub(crate) fn push_context(&mut self, index: usize) {
        self.context.push(index);
        let e = &self.entries[index];
        self.context_total += u64::from(e.tokens());
        if e.usage_total().is_some() {
            self.usage_anchor = Some((self.context.len() - 1, self.context_total));
        }
    }

    /// The tokens of the context's entries, summed now.
    pub(crate) fn sum_of_context(&self) -> u64 {
        (self.context.iter())
            .map(|&i| u64::from(self.entries[i].tokens()))
            .sum()
    }

    /// [`Transcript::context`] from the active branch, for when the branch's shape changed.
    fn walk_context(&self) -> Vec<usize> {
        let branch = self.active_branch();
        let Some(p) = self.latest_compaction(&branch) else {
            return branch
                .into_iter()
                .filter(|&i| self.is_message_context(i))
                .collect();
        };
        let mut out = Vec::with_capacity(branch.len() + 1);
        out.push(branch[p]);
        // Like pi: a first kept entry not found before the boundary keeps only what follows it.
        let from = self.first_kept_position(&branch, p).unwrap_or(p + 1);
        out.extend(
            branch[from..]
                .iter()
                .copied()
                .filter(|&i| i != branch[p] && self.is_message_context(i)),
        );
        out
    }

    /// Context size by the TRANSCRIPTS.md rule over `context()`: the last valid assistant
    /// usage plus estimates of what follows it; estimates of everything without one.
    ///
    /// Recorded usage stands for the context only while it measured this context: usage
    /// recorded before the latest compaction measured the uncompacted context, and with a
    /// window set (`set_context_window`) a latest usage above it was measured at another,
    /// larger window (a replayed or moved session keeps its original figures); in both cases
    /// the context is estimated instead.
    pub fn context_tokens(&self) -> u64 {
        match self.window {
            Some(w) => self.context_tokens_in_window(w),
            None => self.context_tokens_with(u64::MAX),
        }
    }

    /// [`Transcript::context_tokens`] for a context window of `window` tokens.
    pub fn context_tokens_in_window(&self, window: u64) -> u64 {
        self.context_tokens_with(window)
    }

    fn context_tokens_with(&self, window: u64) -> u64 {
        let Some((position, through)) = self.usage_anchor else {
            return self.context_total;
        };
        let anchor = &self.entries[self.context[position]];
        match anchor.usage_total() {
            // The latest measurement does not fit this window: the figures on this stretch
            // are another window's, so none of them is used.
            Some(total) if total > window => self.context_total,
            Some(total) => total.saturating_add(self.context_total.saturating_sub(through)),
            None => self.context_total,
        }
    }

    /// Measure `context_tokens` for this context window from now on (None: any window).
    pub fn set_context_window(&mut self, window: Option<u64>) {
        self.window = window;
    }

    /// The AgentMessage of entry `index` as the model gets it: pruned tool results carry the
    /// placeholder, everything else is [`Entry::message_json`]. "" for an index out of range.
    pub fn context_message_json(&self, index: usize) -> std::borrow::Cow<'_, str> {
        self.entries
            .get(index)
            .map_or(std::borrow::Cow::Borrowed(""), Entry::context_message_json)
    }

    /// Select exact BPE counting (or chars/4 with `None`); every entry is re-counted, and
    /// appends are counted the same way from now on.
    pub fn set_token_counter(&mut self, counter: Option<TokenCounter>) {
        for e in &mut self.entries {
            let tokens = match &counter {
                Some(c) => c.count_entry(e),
                None => e
                    .message_json_for_count()
                    .and_then(|j| crate::tokens::summarize(&j).ok())
                    .map(|s| if s.excluded { 0 } else { s.tokens }),
            };
            if let Some(t) = tokens {
                e.set_tokens(t);
            }
        }
        self.counter = counter;
        self.recount_context();
        self.revision += 1;
    }

    pub fn token_counter(&self) -> Option<&TokenCounter> {
        self.counter.as_ref()
    }

    /// Compaction counts on the active branch.
    pub fn compaction_stats(&self) -> CompactionStats {
        let mut stats = CompactionStats::default();
        for i in self.active_branch() {
            let e = &self.entries[i];
            if e.context_role() == Some(Role::User) {
                stats.auto_in_run = 0;
            }
            if e.entry_type() != "compaction" {
                continue;
            }
            stats.total += 1;
            let record = e.compaction_record();
            if record.is_some_and(CompactionRecord::is_prune) {
                continue;
            }
            stats.summarizing += 1;
            if matches!(
                record.and_then(|r| r.trigger),
                Some(Trigger::Auto | Trigger::Overflow)
            ) {
                stats.auto_in_run += 1;
            }
        }
        stats
    }

    /// Compaction entries on the active branch.
    pub fn compaction_count(&self) -> usize {
        self.active_branch()
            .into_iter()
            .filter(|&i| self.entries[i].entry_type() == "compaction")
            .count()
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

#[cfg(test)]
mod tests;
