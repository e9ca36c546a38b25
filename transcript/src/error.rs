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

#[cfg(test)]
mod tests {
    use super::*;

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
