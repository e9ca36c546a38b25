//! Errors and load warnings. Every problem names the file, the 1-based line and what is wrong,
//! so an operator can open the transcript at the right place.

use std::fmt;
use std::sync::Arc;

/// A transcript could not be read, validated or written.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptError {
    /// The content is wrong: bad JSON, a missing field, a dangling reference, a rejected append.
    #[error("{file}:{line}: {problem}")]
    Invalid {
        /// The source name given to `parse` (usually the path).
        file: String,
        /// 1-based line number (for appends: the line the new entry would have had).
        line: usize,
        problem: String,
    },
    /// Reading or writing the file failed. The OS error is part of the message and is not
    /// also reported as the `source`: error chains (`{:#}`) would print it twice.
    #[error("{file}: {action}: {error}")]
    Io {
        file: String,
        action: &'static str,
        error: std::io::Error,
    },
    /// Another writer appended to the file since this one read it: writing now would build on
    /// a tail this writer has not seen (a compaction would drop the other writer's entries from
    /// the context), so nothing was written.
    #[error(
        "{file}: another writer appended to it ({expected} bytes when this session read it, {found} now); nothing was written: open the session again to build on its entries"
    )]
    Changed {
        file: String,
        /// The length this writer left the file at.
        expected: u64,
        /// The length found.
        found: u64,
    },
}

impl TranscriptError {
    pub(crate) fn invalid(file: &str, line: usize, problem: impl Into<String>) -> Self {
        TranscriptError::Invalid {
            file: file.to_string(),
            line,
            problem: problem.into(),
        }
    }

    pub(crate) fn io(file: &std::path::Path, action: &'static str, error: std::io::Error) -> Self {
        TranscriptError::Io {
            file: file.display().to_string(),
            action,
            error,
        }
    }

    /// The source name (file) the error refers to.
    pub fn file(&self) -> &str {
        match self {
            TranscriptError::Invalid { file, .. }
            | TranscriptError::Io { file, .. }
            | TranscriptError::Changed { file, .. } => file,
        }
    }

    /// The 1-based line, when the error is about content.
    pub fn line(&self) -> Option<usize> {
        match self {
            TranscriptError::Invalid { line, .. } => Some(*line),
            TranscriptError::Io { .. } | TranscriptError::Changed { .. } => None,
        }
    }
}

/// Something odd but survivable found while loading (e.g. a torn last line); the load went on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadWarning {
    /// The file: one name shared by the warnings of one load.
    pub source: Arc<str>,
    pub line: usize,
    pub message: String,
}

/// Adds a warning about `line` of `source` to `warnings`, sharing the file's name with the
/// warning before it: a file with many warnings holds its name once (a copy each was 8 MB of
/// a status check of 131,582 warnings).
pub(crate) fn push_warning(
    warnings: &mut Vec<LoadWarning>,
    source: &str,
    line: usize,
    message: String,
) {
    let source = match warnings.last() {
        Some(last) if *last.source == *source => last.source.clone(),
        _ => Arc::from(source),
    };
    warnings.push(LoadWarning {
        source,
        line,
        message,
    });
}

impl fmt::Display for LoadWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.source, self.line, self.message)
    }
}

/// How many warnings are shown one by one; the rest are counted by kind, so a file with one
/// problem on every other line does not print a line for each.
pub const WARNINGS_SHOWN: usize = 10;

/// How many kinds of the warnings not shown one by one are named, the most frequent first.
const KINDS_NAMED: usize = 3;

/// A warning that can be counted with others of its kind when there are too many to show.
pub trait Warning: fmt::Display {
    /// What warnings of one kind share: the message with its figures set aside.
    fn kind(&self) -> String;
    /// Where `warnings` (not empty) are, to begin the line counting them.
    fn place_of(warnings: &[Self]) -> String
    where
        Self: Sized;
}

impl Warning for LoadWarning {
    fn kind(&self) -> String {
        kind_of(&self.message)
    }

    /// The file and the first and last line: a load adds some warnings (a missing parent)
    /// after those of later lines.
    fn place_of(warnings: &[Self]) -> String {
        let first = warnings.iter().map(|w| w.line).min().unwrap_or_default();
        let last = warnings.iter().map(|w| w.line).max().unwrap_or_default();
        format!("{}:{first}-{last}: ", warnings[0].source)
    }
}

/// A warning already written out, its place (if any) inside the text.
impl Warning for String {
    fn kind(&self) -> String {
        kind_of(self)
    }

    fn place_of(_: &[Self]) -> String {
        String::new()
    }
}

/// Warnings as a person reads them: the first [`WARNINGS_SHOWN`] in full, then one line for
/// the rest, counted by kind, with where they are.
pub fn shown_warnings<W: Warning>(warnings: &[W]) -> impl Iterator<Item = String> + '_ {
    let (shown, rest) = warnings.split_at(warnings.len().min(WARNINGS_SHOWN));
    let summary = (!rest.is_empty()).then(|| summary_of(rest));
    shown.iter().map(ToString::to_string).chain(summary)
}

/// One line for `rest` (not empty): where, how many, and of what kinds.
fn summary_of<W: Warning>(rest: &[W]) -> String {
    let mut counts = std::collections::HashMap::<String, usize>::new();
    for warning in rest {
        *counts.entry(warning.kind()).or_default() += 1;
    }
    let mut kinds: Vec<(String, usize)> = counts.into_iter().collect();
    kinds.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut named: Vec<String> = (kinds.iter().take(KINDS_NAMED))
        .map(|(kind, n)| format!("{n} × {kind}"))
        .collect();
    if let Some(others) = kinds.get(KINDS_NAMED..).filter(|o| !o.is_empty()) {
        let n: usize = others.iter().map(|(_, n)| n).sum();
        named.push(format!("{n} of {} other kinds", others.len()));
    }
    format!(
        "{}{} more warnings, not shown one by one: {}",
        W::place_of(rest),
        rest.len(),
        named.join("; ")
    )
}

/// A warning's message with its figures set aside (`usage.cacheRead N is not a plausible
/// token count`): warnings that differ only in them are of one kind.
fn kind_of(message: &str) -> String {
    let mut kind = String::with_capacity(message.len());
    let mut in_figure = false;
    for c in message.chars() {
        match (c.is_ascii_digit(), in_figure) {
            (true, true) => {}
            (true, false) => kind.push('N'),
            (false, _) => kind.push(c),
        }
        in_figure = c.is_ascii_digit();
    }
    kind
}

#[cfg(test)]
mod tests {
    use super::*;

    fn warning(line: usize, message: &str) -> LoadWarning {
        LoadWarning {
            source: "s.jsonl".into(),
            line,
            message: message.into(),
        }
    }

    #[test]
    fn a_few_warnings_are_shown_each_in_full() {
        let warnings: Vec<_> = (1..=WARNINGS_SHOWN).map(|n| warning(n, "torn")).collect();
        let shown: Vec<String> = shown_warnings(&warnings).collect();
        assert_eq!(shown.len(), WARNINGS_SHOWN);
        assert_eq!(shown[0], "s.jsonl:1: torn");
    }

    #[test]
    fn many_warnings_end_in_one_line_counting_the_rest_by_kind() {
        let mut warnings: Vec<_> = (1..=1000)
            .map(|n| {
                warning(
                    n,
                    &format!("usage.cacheRead {n} is not a plausible token count"),
                )
            })
            .collect();
        warnings.push(warning(2000, "a line was cut short"));
        // Added last, about an earlier line, as a load adds a missing parent's warning.
        warnings.push(warning(5, "a parent is missing"));
        let shown: Vec<String> = shown_warnings(&warnings).collect();
        assert_eq!(shown.len(), WARNINGS_SHOWN + 1, "{shown:#?}");
        assert_eq!(
            shown[WARNINGS_SHOWN],
            "s.jsonl:5-2000: 992 more warnings, not shown one by one: \
             990 × usage.cacheRead N is not a plausible token count; \
             1 × a line was cut short; 1 × a parent is missing"
        );
    }

    #[test]
    fn written_warnings_are_counted_by_kind_with_their_place_inside() {
        let warnings: Vec<String> = (1..=12)
            .map(|n| format!("l.jsonl:{n}: not a ledger record: expected value at column {n}"))
            .collect();
        let summary = shown_warnings(&warnings).last().unwrap();
        assert_eq!(
            summary,
            "2 more warnings, not shown one by one: \
             2 × l.jsonl:N: not a ledger record: expected value at column N"
        );
    }

    #[test]
    fn kinds_beyond_the_named_ones_are_counted_together() {
        let mut warnings: Vec<_> = (1..=WARNINGS_SHOWN).map(|n| warning(n, "torn")).collect();
        for (n, kind) in ["a", "b", "b", "c", "c", "c", "d", "e"].iter().enumerate() {
            warnings.push(warning(100 + n, &format!("kind {kind}")));
        }
        let summary = shown_warnings(&warnings).last().unwrap();
        assert!(
            summary.ends_with("3 × kind c; 2 × kind b; 1 × kind a; 2 of 2 other kinds"),
            "{summary}"
        );
    }

    #[test]
    fn messages_name_file_and_line() {
        let e = TranscriptError::invalid("a.jsonl", 7, "bad thing");
        assert_eq!(e.to_string(), "a.jsonl:7: bad thing");
        assert_eq!(e.file(), "a.jsonl");
        assert_eq!(e.line(), Some(7));
        let w = LoadWarning {
            source: "b.jsonl".into(),
            line: 3,
            message: "torn".into(),
        };
        assert_eq!(w.to_string(), "b.jsonl:3: torn");
    }

    #[test]
    fn the_os_cause_is_shown_once() {
        let e = TranscriptError::io(
            std::path::Path::new("/x/s.jsonl"),
            "cannot read transcript",
            std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        );
        // What an error-chain printer (anyhow's `{:#}`) shows: the message and its sources.
        let mut chain = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            chain.push_str(&format!(": {s}"));
            source = s.source();
        }
        assert_eq!(chain.matches("permission denied").count(), 1, "{chain}");
        assert_eq!(chain.matches("/x/s.jsonl").count(), 1, "{chain}");
    }
}
