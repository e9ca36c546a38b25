//! A file's lines after its header, read into entries: every line through [`read_line`] (the
//! full load and `check` both read lines there, so they accept and refuse the same ones), on
//! two threads for a large v2/v3 file, with the words loading uses for what it repairs.

use serde::de::IgnoredAny;
use serde_json::Value;

use crate::entry::{Decode, Entry, Line};
use crate::error::{LoadWarning, TranscriptError, push_warning};

pub(crate) use crate::read::split_concatenated;

/// `s` as a JSON string.
pub(crate) fn quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

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
    each: impl FnMut(Entry),
) -> Result<usize, TranscriptError> {
    let mut out = LineOut {
        source,
        line_no,
        warnings,
        each,
    };
    match Entry::decode(line_of(text), line_no, decode) {
        Ok(e) => {
            out.emit(e);
            Ok(1)
        }
        Err(problem) => read_concatenated(text, problem, decode, line_of, &mut out),
    }
}

/// Where the entries and warnings of one line go.
struct LineOut<'a, F> {
    source: &'a str,
    line_no: usize,
    warnings: &'a mut Vec<LoadWarning>,
    each: F,
}

impl<F: FnMut(Entry)> LineOut<'_, F> {
    fn warn(&mut self, message: String) {
        push_warning(self.warnings, self.source, self.line_no, message);
    }

    /// The entry to `each`, what it noted while decoding to the warnings.
    #[inline]
    fn emit(&mut self, mut e: Entry) {
        if let Some(note) = e.take_note() {
            self.warn(note);
        }
        (self.each)(e);
    }

    fn invalid(&self, problem: String) -> TranscriptError {
        TranscriptError::invalid(self.source, self.line_no, problem)
    }
}

/// A line that did not decode as one entry, read as several written without a line break
/// between them (a v1 line of several is kept whole, at no position); else `problem` is its
/// error.
fn read_concatenated(
    text: &str,
    problem: String,
    decode: &Decode,
    line_of: &dyn Fn(&str) -> Line,
    out: &mut LineOut<'_, impl FnMut(Entry)>,
) -> Result<usize, TranscriptError> {
    let Some(parts) = split_concatenated(text) else {
        return Err(out.invalid(problem));
    };
    if decode.version == 1 {
        return keep_v1_line(&parts, decode, out);
    }
    out.warn(concatenated_warning(parts.len()));
    let decoded = (parts.into_iter())
        .map(|part| Entry::decode(line_of(part), out.line_no, decode))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|p| out.invalid(p))?;
    let positions = decoded.len();
    for e in decoded {
        out.emit(e);
    }
    Ok(positions)
}

/// A v1 line of several entries, kept whole at no position (see [`kept_v1_line`]).
fn keep_v1_line(
    parts: &[&str],
    decode: &Decode,
    out: &mut LineOut<'_, impl FnMut(Entry)>,
) -> Result<usize, TranscriptError> {
    out.warn(kept_v1_line_warning(parts.len()));
    let kept = kept_v1_line(parts, out.line_no, decode).map_err(|p| out.invalid(p))?;
    out.emit(kept);
    Ok(0)
}

/// Files from this size on are read on two threads (see [`Lines::read_in_two`]).
pub(crate) const READ_IN_TWO_FROM: usize = 8 << 20;

/// A file's lines after its header, read into entries.
pub(crate) struct Lines<'a> {
    pub(crate) version: u32,
    pub(crate) entry_count: usize,
    pub(crate) source: &'a str,
    pub(crate) line_of: &'a (dyn Fn(&str) -> Line + Sync),
}

impl Lines<'_> {
    /// `lines` read into entries; on two threads when `in_two` and the version allows it.
    pub(crate) fn read_body(
        &self,
        lines: &[(usize, &str)],
        in_two: bool,
        warnings: &mut Vec<LoadWarning>,
    ) -> Result<Vec<Entry>, TranscriptError> {
        if self.version >= 2 && in_two {
            self.read_in_two(lines, warnings)
        } else {
            self.read(lines, warnings)
        }
    }

    /// `lines` in order, each through [`read_line`].
    fn read(
        &self,
        lines: &[(usize, &str)],
        warnings: &mut Vec<LoadWarning>,
    ) -> Result<Vec<Entry>, TranscriptError> {
        let mut entries = Vec::with_capacity(lines.len());
        let mut positions = 0;
        for &(line_no, text) in lines {
            let decode = self.decode_at(positions);
            let push = |e| entries.push(e);
            positions += read_line(
                text,
                line_no,
                &decode,
                self.source,
                self.line_of,
                warnings,
                push,
            )?;
        }
        Ok(entries)
    }

    /// How the line at v1 position `index` decodes: v1 ids and parents follow the position
    /// among the entries read.
    fn decode_at(&self, index: usize) -> Decode {
        Decode {
            version: self.version,
            index,
            entry_count: self.entry_count,
        }
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
        let (entries, later) = std::thread::scope(|scope| {
            let helper =
                std::thread::Builder::new().spawn_scoped(scope, || self.read_apart(second));
            let entries = self.read(first, warnings);
            // Where no thread can be made, this one reads the second half too.
            let later = match helper {
                Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                Err(_) => self.read_apart(second),
            };
            (entries, later)
        });
        let mut entries = entries?;
        let (more, more_warnings) = later?;
        entries.extend(more);
        warnings.extend(more_warnings);
        Ok(entries)
    }

    /// [`Lines::read`] with warnings of its own, to be put after those of the lines before.
    fn read_apart(
        &self,
        lines: &[(usize, &str)],
    ) -> Result<(Vec<Entry>, Vec<LoadWarning>), TranscriptError> {
        let mut warnings = Vec::new();
        self.read(lines, &mut warnings).map(|e| (e, warnings))
    }
}

/// The lines of `text` that are not blank, numbered from 1, without `\r`.
pub(crate) fn numbered_lines(text: &str) -> Vec<(usize, &str)> {
    split_lines(text)
        .enumerate()
        .map(|(i, l)| (i + 1, l.strip_suffix('\r').unwrap_or(l)))
        .filter(|(_, l)| !l.trim().is_empty())
        .collect()
}

/// Drops a torn last line with a warning. A crash mid-write leaves a last line without its
/// newline; if it is not JSON it is the torn tail of an append, not corruption of what came
/// before. A lone line is the header, judged as such (a torn header would otherwise read as an
/// empty file).
pub(crate) fn drop_torn_last_line(
    text: &str,
    lines: &mut Vec<(usize, &str)>,
    source: &str,
    warnings: &mut Vec<LoadWarning>,
) {
    if !text.ends_with('\n')
        && lines.len() > 1
        && let Some(&(line, last)) = lines.last()
        && serde_json::from_str::<IgnoredAny>(last).is_err()
        && split_concatenated(last).is_none()
    {
        push_warning(warnings, source, line, TORN_LAST_LINE.into());
        lines.pop();
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

/// What loading says of a v2/v3 line of `n` entries.
fn concatenated_warning(n: usize) -> String {
    format!("{n} JSON entries on one line (no line break between them); read as {n} entries")
}

/// What loading says of a v1 line of `n` entries.
fn kept_v1_line_warning(n: usize) -> String {
    format!(
        "{n} JSON entries on one line (no line break between them); left out of the context as \
         pi leaves them out, and kept whole (a \"custom\" entry of type {KEPT_V1_LINE:?}) when \
         the file is rewritten"
    )
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
