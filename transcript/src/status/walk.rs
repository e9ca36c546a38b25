//! The backward walk (see the module docs of `status`): from the leaf back along the active
//! branch to the latest compaction and its first kept entry, or to the root. It runs only on
//! a file the check found valid, and the check's warnings are the status's, so the walk
//! reports nothing itself: what it cannot settle is answered by the full load (`None`).

use std::borrow::Cow;
use std::fs::File;
use std::hash::BuildHasher;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use super::skim::{
    CompactionLine, Light, may_hold_two, member_name, skim, skip_value, skip_ws, string_value,
};
use super::{Backwards, CountSource, Status, from_transcript, io};
use crate::Transcript;
use crate::error::TranscriptError;
use crate::lines::split_concatenated;
use crate::read::Head;
use crate::record::CompactionRecord;

/// The status of the file from its tail; None when only the full load can tell.
pub(super) fn walk(
    path: &Path,
    window: Option<u64>,
    file: File,
    file_bytes: u64,
    head: &Head,
) -> Result<Option<Status>, TranscriptError> {
    let mut lines = Backwards::new(file, path, file_bytes);
    let ends_with_newline =
        file_bytes == 0 || last_byte(&mut lines.file, path, file_bytes)? == b'\n';
    let mut w = Walk::new(head, window, file_bytes, ends_with_newline);
    while let Some((offset, line)) = lines.prev()? {
        if offset < head.body_start {
            w.at_header = true;
            break;
        }
        match w.line(offset, line) {
            Some(Flow::Next) => {}
            Some(Flow::Done) => break,
            None => return Ok(None),
        }
    }
    w.finish(path, file_bytes)
}

fn last_byte(file: &mut File, path: &Path, file_bytes: u64) -> Result<u8, TranscriptError> {
    let mut last = [0u8; 1];
    file.seek(SeekFrom::Start(file_bytes - 1))
        .and_then(|_| file.read_exact(&mut last))
        .map_err(io(path, "cannot read transcript"))?;
    Ok(last[0])
}

/// What to do after a line.
enum Flow {
    Next,
    /// The tail is known (and the counts, or the branch's root was reached).
    Done,
}

/// What the walk has learnt so far, going back.
struct Walk<'h> {
    head: &'h Head,
    window: Option<u64>,
    /// v1: no ids; each entry's parent is the entry before it.
    v1: bool,
    ends_with_newline: bool,
    /// The next entry of the active branch, going back.
    want: Option<String>,
    /// The leaf (the file's last entry) was read.
    leaf_read: bool,
    /// The last line was judged (torn or not).
    last_judged: bool,
    /// The active branch's root was reached.
    chain_done: bool,
    /// The first kept id of the latest compaction, and whether its line was passed.
    boundary: Option<String>,
    boundary_found: bool,
    /// The latest compaction records the running counts.
    recorded: bool,
    /// Compactions on the branch, and prunes among them.
    total: u64,
    prunes: u64,
    /// Where the tail to parse (or the part measured) starts.
    start: u64,
    at_header: bool,
    stream: Stream,
    /// 32-bit hashes of the ids passed, to tell a parent outside the file from one before
    /// its child.
    ids_passed: Vec<u32>,
    /// An entry of the branch was reached (the root if its parent is missing).
    branch_reached: bool,
    /// A line of several entries was passed: ids after its first are not in `ids_passed`.
    hidden_ids: bool,
}

fn id_hash(id: &str) -> u32 {
    foldhash::fast::FixedState::default().hash_one(id) as u32
}

/// Whether `line` holds several entries (written without a line break between them).
fn holds_several(line: &[u8]) -> bool {
    std::str::from_utf8(line)
        .ok()
        .and_then(split_concatenated)
        .is_some()
}

impl<'h> Walk<'h> {
    fn new(head: &'h Head, window: Option<u64>, file_bytes: u64, ends_with_newline: bool) -> Self {
        Walk {
            head,
            window,
            v1: head.header.version() == 1,
            ends_with_newline,
            want: None,
            leaf_read: false,
            last_judged: false,
            chain_done: false,
            boundary: None,
            boundary_found: false,
            recorded: false,
            total: 0,
            prunes: 0,
            start: file_bytes,
            at_header: false,
            stream: Stream::new(window),
            ids_passed: Vec::new(),
            branch_reached: false,
            hidden_ids: false,
        }
    }

    /// One line, going back; None: only the full load can tell.
    fn line(&mut self, offset: u64, line: &[u8]) -> Option<Flow> {
        if line.iter().all(u8::is_ascii_whitespace) {
            return Some(Flow::Next);
        }
        if !std::mem::replace(&mut self.last_judged, true) && self.torn(line) {
            // Loading skips a torn last line (the check reported it).
            self.start = offset;
            return Some(Flow::Next);
        }
        let light = skim(line, self.v1).ok()?;
        if !self.boundary_found {
            self.start = offset;
        }
        if self.v1 {
            return self.v1_line(line, &light);
        }
        self.branch_line(line, light)
    }

    /// A last line without its line break that is not JSON, judged as loading judges it (the
    /// line as a whole, not a skim of its start).
    fn torn(&self, line: &[u8]) -> bool {
        !self.ends_with_newline
            && serde_json::from_slice::<serde::de::IgnoredAny>(line).is_err()
            && !holds_several(line)
    }

    /// A v1 line: the whole file is the branch. A v1 boundary is a line index and a line of
    /// two entries is skipped by v1 readers: both are left to the full load.
    fn v1_line(&mut self, line: &[u8], light: &Light<'_>) -> Option<Flow> {
        let compaction = light.kind.as_deref() == Some("compaction");
        if compaction || (may_hold_two(line) && holds_several(line)) {
            return None;
        }
        self.stream.entry(line, light.kind.as_deref(), 1);
        Some(Flow::Next)
    }

    /// A v2/v3 line: followed when it is the next entry of the active branch.
    fn branch_line(&mut self, line: &[u8], light: Light<'_>) -> Option<Flow> {
        let id = light.id.as_deref().unwrap_or("");
        self.ids_passed.push(id_hash(id));
        self.hidden_ids |= may_hold_two(line) && holds_several(line);
        if !std::mem::replace(&mut self.leaf_read, true) {
            // The leaf is the last entry of the file; on a line of several, a skim sees only
            // the first, so such a file is left to the full load.
            if holds_several(line) {
                return None;
            }
            self.want = Some(id.to_string());
        }
        if self.boundary.as_deref() == Some(id) {
            self.boundary_found = true;
        }
        if !self.chain_done && self.want.as_deref() == Some(id) {
            self.on_branch(line, light)?;
        }
        let tail_known = self.boundary_found || (self.boundary.is_none() && self.chain_done);
        let done = tail_known && (self.recorded || self.chain_done);
        Some(if done { Flow::Done } else { Flow::Next })
    }

    /// An entry of the active branch.
    fn on_branch(&mut self, line: &[u8], light: Light<'_>) -> Option<()> {
        self.branch_reached = true;
        let compaction = light.kind.as_deref() == Some("compaction");
        if self.boundary.is_none() && !compaction {
            let version = self.head.header.version();
            self.stream.entry(line, light.kind.as_deref(), version);
        }
        self.want = light.parent_id.map(Cow::into_owned);
        self.chain_done = self.want.is_none();
        if compaction {
            self.compaction(line)?;
        }
        Some(())
    }

    /// A compaction of the active branch: the latest gives the boundary (and maybe the counts
    /// so far); each is counted.
    fn compaction(&mut self, line: &[u8]) -> Option<()> {
        // The first value of the line: another entry glued after it is not this one.
        let c = serde_json::Deserializer::from_slice(line)
            .into_iter::<CompactionLine<'_>>()
            .next()?
            .ok()?;
        let record = c
            .details
            .and_then(|d| CompactionRecord::from_json(d.get()))
            .unwrap_or_default();
        if self.boundary.is_none() {
            self.boundary = Some(c.first_kept.unwrap_or_default());
            self.recorded = record.compaction_count.is_some() && record.summary_count.is_some();
        }
        self.total += 1;
        self.prunes += u64::from(record.is_prune());
        Some(())
    }

    /// Once the walk stopped: the status from what it gathered, or from the tail parsed.
    fn finish(mut self, path: &Path, file_bytes: u64) -> Result<Option<Status>, TranscriptError> {
        if self.v1 {
            // Every line was read back to the header, and none was a compaction.
            return Ok(self.streamed(file_bytes, self.head.body_start));
        }
        if self.root_outside_the_file() {
            // Loading makes the entry a root (and says so; the check did).
            self.chain_done = true;
        }
        drop(std::mem::take(&mut self.ids_passed));
        if self.at_header {
            if !self.leaf_read {
                self.start = self.head.body_start; // a header and nothing else
            } else if (self.boundary.is_some() && !self.boundary_found) || !self.chain_done {
                // A boundary not before its compaction, a parent written after its child:
                // what the full load says about such a file is the answer.
                return Ok(None);
            }
        }
        if self.boundary.is_none() && self.chain_done {
            // No compaction on the branch: the walk gathered its whole context.
            return Ok(self.streamed(file_bytes, self.start));
        }
        self.tail(path, file_bytes)
    }

    /// The branch ends at an entry whose parent no line of the file has.
    fn root_outside_the_file(&self) -> bool {
        self.at_header
            && self.leaf_read
            && !self.chain_done
            && !self.hidden_ids
            && self.branch_reached
            && self
                .want
                .as_deref()
                .is_some_and(|parent| !self.ids_passed.contains(&id_hash(parent)))
    }

    /// The status of a branch without a compaction, from what the walk gathered.
    fn streamed(&self, file_bytes: u64, start: u64) -> Option<Status> {
        if self.stream.broken {
            return None;
        }
        let header = &self.head.header;
        Some(Status {
            session_id: header.id().to_string(),
            version: header.version(),
            file_bytes,
            bytes_scanned: file_bytes - start,
            context_tokens: self.stream.context_tokens(),
            context_messages: self.stream.messages,
            compaction_count: 0,
            summary_count: 0,
            count_source: CountSource::ActiveBranch,
            last_compaction: None,
            warnings: Vec::new(),
        })
    }

    /// Header + tail parsed as one transcript: the same rules as a full load.
    fn tail(&self, path: &Path, file_bytes: u64) -> Result<Option<Status>, TranscriptError> {
        let text = self.read_tail(path, file_bytes)?;
        let source = path.display().to_string();
        let Ok(text) = String::from_utf8(text) else {
            return Ok(None);
        };
        let Ok(mut t) = Transcript::parse_tail(text, &source) else {
            return Ok(None);
        };
        t.set_context_window(self.window);
        let mut status = from_transcript(&t, file_bytes, CountSource::Details);
        status.bytes_scanned = file_bytes - self.start;
        self.count_compactions(&mut status);
        Ok(Some(status))
    }

    /// The header line, then the file from where the tail starts.
    fn read_tail(&self, path: &Path, file_bytes: u64) -> Result<Vec<u8>, TranscriptError> {
        let tail_bytes = file_bytes - self.start;
        let mut f = crate::read::open_transcript(path)?;
        f.seek(SeekFrom::Start(self.start))
            .map_err(io(path, "cannot seek"))?;
        let mut text = Vec::with_capacity(self.head.text.len() + 1 + tail_bytes as usize);
        text.extend_from_slice(self.head.text.as_bytes());
        text.push(b'\n');
        f.take(tail_bytes)
            .read_to_end(&mut text)
            .map_err(io(path, "cannot read transcript"))?;
        Ok(text)
    }

    /// The compaction counts: as the latest compaction records them, else as the walk counted
    /// them on the branch.
    fn count_compactions(&self, status: &mut Status) {
        let details = status
            .last_compaction
            .as_ref()
            .and_then(|c| c.details.as_ref());
        match details.and_then(|d| Some((d.compaction_count?, d.summary_count?))) {
            Some((total, summaries)) => {
                // Compactions after the latest boundary cannot exist (it is the latest).
                status.compaction_count = total;
                status.summary_count = summaries;
            }
            None => {
                status.compaction_count = self.total;
                status.summary_count = self.total - self.prunes;
                status.count_source = CountSource::ActiveBranch;
            }
        }
    }
}

/// The `role` of a `message` entry's message, skimmed: the members before it are skipped, the
/// message's content is never read when (as written by pi and ctxhost) the role comes first.
fn message_role(line: &[u8]) -> Option<Cow<'_, str>> {
    let message = value_start(line, 0, "message")?;
    let role = value_start(line, message, "role")?;
    let literal = &line[role..skip_value(line, role)?];
    (literal.first() == Some(&b'"'))
        .then(|| string_value(literal))
        .flatten()
}

/// Where the value of member `want` of the object at `b[at]` starts (values before it are
/// skipped, the one found is not read).
fn value_start(b: &[u8], at: usize, want: &str) -> Option<usize> {
    let open = skip_ws(b, at);
    if b.get(open) != Some(&b'{') {
        return None;
    }
    let mut i = skip_ws(b, open + 1);
    loop {
        let (key, start) = member_name(b, i)?;
        if key.as_ref() == want.as_bytes() {
            return Some(start);
        }
        i = skip_ws(b, skip_value(b, start)?);
        if b.get(i) != Some(&b',') {
            return None;
        }
        i = skip_ws(b, i + 1);
    }
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
            broken: false,
        }
    }

    fn needs_estimates(&self) -> bool {
        self.usage.is_none_or(|u| u > self.window)
    }

    /// One entry of the active branch, going back.
    fn entry(&mut self, line: &[u8], kind: Option<&str>, version: u32) {
        if self.broken {
            return;
        }
        if kind == Some("message") && !self.needs_estimates() && self.counted_by_role(line) {
            return;
        }
        let decode = crate::entry::Decode {
            version,
            index: 0,
            entry_count: 0,
        };
        let decoded = std::str::from_utf8(line)
            .ok()
            .and_then(|text| crate::entry::Entry::decode(text.into(), 0, &decode).ok());
        match decoded {
            Some(e) => self.add_decoded(&e),
            None => self.broken = true,
        }
    }

    /// A message counted by its role alone, its body skipped; false when only decoding can
    /// tell (a bash execution may be excluded, a role may not be skimmed).
    #[inline]
    fn counted_by_role(&mut self, line: &[u8]) -> bool {
        let role = message_role(line);
        match role.as_deref().map(crate::role::Role::parse) {
            Some(Some(crate::role::Role::BashExecution)) | None => false,
            Some(Some(_)) => {
                self.messages += 1;
                true
            }
            Some(None) => true, // an unknown role: kept, not sent
        }
    }

    /// An entry decoded as loading decodes it: counted, and estimated while estimates count.
    fn add_decoded(&mut self, e: &crate::entry::Entry) {
        if e.context_role().is_some() && e.entry_type() != "compaction" {
            self.messages += 1;
        }
        if !self.needs_estimates() {
            return;
        }
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

    /// The context size by the rule of `Transcript::context_tokens`.
    fn context_tokens(&self) -> u64 {
        match self.usage {
            Some(u) if u <= self.window => u.saturating_add(self.estimates),
            _ => self.estimates,
        }
    }
}
