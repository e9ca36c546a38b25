//! A whole file checked as loading checks it, in one forward pass and bounded memory: what
//! `status` runs so that it refuses what every other command refuses, with the same words.
//!
//! Every line goes through the loader's own line reader ([`crate::transcript::read_line`]),
//! after the loader's UTF-8 check; the decoded entries are dropped at once, and only a 64-bit
//! hash of each id is kept to find what linking finds. What the hashes cannot settle exactly
//! (two ids with one hash, a parent written after its child, so maybe a cycle, a boundary
//! that is not an entry of the file, a v1 boundary, which is a line index) is handed to the
//! full load ([`Verdict::AskTheLoader`]): its answer is then the answer.

use std::collections::HashSet;
use std::hash::BuildHasher;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use serde::de::IgnoredAny;

use crate::entry::{Decode, Entry, Line};
use crate::error::{LoadWarning, TranscriptError};
use crate::read::Head;
use crate::transcript::{TORN_LAST_LINE, missing_parent, read_line, split_concatenated};

/// What the check found.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Loading accepts the file, with these warnings (in loading's order).
    Valid(Vec<LoadWarning>),
    /// Only the full load can say (see the module docs).
    AskTheLoader,
}

/// The first line that does not decode, held until it is known whether it is the file's torn
/// last line (which loading skips with a warning) and whether invalid UTF-8 follows (which
/// loading reports first).
struct Refused {
    error: TranscriptError,
    /// Not JSON at all, so a torn last line if nothing follows it.
    torn_if_last: bool,
    /// A line that is not blank follows it.
    followed: bool,
}

/// Checks the body of the file at `path` (its header, `head`, read and checked already).
pub(crate) fn check(path: &Path, head: &Head) -> Result<Verdict, TranscriptError> {
    let source = path.display().to_string();
    let io = |action| move |e| TranscriptError::io(path, action, e);
    let mut file = crate::read::open_transcript(path)?;
    file.seek(SeekFrom::Start(head.body_start))
        .map_err(io("cannot seek"))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let version = head.header.version();
    let mut links = Links::default();
    let mut warnings = Vec::new();
    let mut refused: Option<Refused> = None;
    let mut positions = 0usize;
    let mut line_no = head.line;
    let mut ends_with_newline = true;
    let mut bytes = Vec::new();
    loop {
        // Each line is read into a buffer of its own, which becomes its entry's text uncopied.
        bytes = Vec::with_capacity(bytes.capacity().max(256));
        let n = reader
            .read_until(b'\n', &mut bytes)
            .map_err(io("cannot read transcript"))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        ends_with_newline = bytes.last() == Some(&b'\n');
        if let Err(e) = std::str::from_utf8(&bytes) {
            return Err(crate::read::invalid_utf8(&source, line_no, e.valid_up_to()));
        }
        if let Some(r) = &mut refused {
            // Only invalid UTF-8 (reported first by loading) or the refused line's place
            // (last or not) can change the answer now.
            r.followed = r.followed || !is_blank(&bytes);
            continue;
        }
        crate::lenient::replace_lone_surrogates(&mut bytes);
        let mut line = std::mem::take(&mut bytes);
        if line.ends_with(b"\n") {
            line.pop();
        }
        if line.ends_with(b"\r") {
            line.pop();
        }
        let capacity = line.capacity();
        let text = String::from_utf8(line).expect("checked above");
        bytes = Vec::with_capacity(capacity); // the next line's size is likely alike
        if text.trim().is_empty() {
            continue;
        }
        let text = Arc::new(text);
        let line_of = |part: &str| {
            let start = part.as_ptr() as usize - text.as_ptr() as usize;
            Line::slice(&text, start..start + part.len())
        };
        let decode = Decode {
            version,
            index: positions,
            // v1 boundaries (line indices) are left to the full load.
            entry_count: usize::MAX,
        };
        let read = read_line(
            &text,
            line_no,
            &decode,
            &source,
            &line_of,
            &mut warnings,
            |e| links.note(&e, line_no, version),
        );
        positions += read.as_ref().copied().unwrap_or(0);
        if let Err(error) = read {
            let torn_if_last = serde_json::from_str::<IgnoredAny>(&text).is_err()
                && split_concatenated(&text).is_none();
            refused = Some(Refused {
                error,
                torn_if_last,
                followed: false,
            });
        }
    }
    if let Some(r) = refused {
        if r.followed || ends_with_newline || !r.torn_if_last {
            return Err(r.error);
        }
        // Loading drops a torn last line before reading the others, and says so first.
        let line = r.error.line().unwrap_or(line_no);
        warnings.insert(
            0,
            LoadWarning {
                source: source.clone(),
                line,
                message: TORN_LAST_LINE.into(),
            },
        );
    }
    Ok(links.verdict(warnings, &source))
}

fn hash(id: &str) -> u64 {
    foldhash::fast::FixedState::default().hash_one(id)
}

/// What linking would find, kept as 64-bit hashes of the ids read so far.
#[derive(Default)]
struct Links {
    ids: HashSet<u64, foldhash::fast::FixedState>,
    /// Parents not read before their child: (line, parent id); few in a file appended to.
    later_parents: Vec<(usize, String)>,
    /// The first kept entry of every compaction.
    boundaries: Vec<u64>,
    ask_the_loader: bool,
}

impl Links {
    fn note(&mut self, e: &Entry, line_no: usize, version: u32) {
        if version == 1 {
            self.ask_the_loader |= e.entry_type() == "compaction";
            return;
        }
        // The parent first: an entry that is its own parent is a cycle.
        if let Some(parent) = e.parent_id()
            && !self.ids.contains(&hash(parent))
        {
            self.later_parents.push((line_no, parent.to_string()));
        }
        self.ask_the_loader |= !self.ids.insert(hash(e.id()));
        if let Some(kept) = e.first_kept_entry_id() {
            self.boundaries.push(hash(kept));
        }
    }

    /// Loading's verdict once every line is read: its warnings with the missing parents added,
    /// or the full load when the hashes cannot settle it.
    fn verdict(self, mut warnings: Vec<LoadWarning>, source: &str) -> Verdict {
        if self.ask_the_loader || self.boundaries.iter().any(|b| !self.ids.contains(b)) {
            return Verdict::AskTheLoader;
        }
        for (line, parent) in self.later_parents {
            if self.ids.contains(&hash(&parent)) {
                // Written after its child: fine, unless the links go round; loading knows.
                return Verdict::AskTheLoader;
            }
            warnings.push(LoadWarning {
                source: source.to_string(),
                line,
                message: missing_parent(&parent),
            });
        }
        Verdict::Valid(warnings)
    }
}

fn is_blank(bytes: &[u8]) -> bool {
    std::str::from_utf8(bytes).is_ok_and(|t| t.trim().is_empty())
}
