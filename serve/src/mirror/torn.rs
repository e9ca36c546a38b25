//! A commit a crash cut short: found by its missing marker and set aside whole, so the mirror
//! resumes from its last complete commit and nothing written is lost.

use std::path::Path;

use ctxhost::Session;
use ctxhost::error::{Error, Result};
use serde::Deserialize;

use super::marker::MARKER;

/// Moves messages after the last complete commit (a write a crash cut short) to
/// `<file>.torn-<time>`, so the mirror resumes from its last marker and nothing is lost.
pub(super) fn set_aside_torn_commit(path: &Path) -> Result<()> {
    let text = std::fs::read(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let Some(cut) = torn_commit_start(&text) else {
        return Ok(());
    };
    let aside = Session::set_aside_tail(path, cut, "torn")?;
    tracing::warn!(
        "{}: a commit was cut short (the process stopped while writing it); its {} bytes were moved to {} and the mirror continues from its last complete commit",
        path.display(),
        text.len() - cut,
        aside.display()
    );
    Ok(())
}

/// The byte offset of the first message line after the last marker line (or, with no marker,
/// of the first message line), or of a torn last line: where an incomplete commit starts.
pub(super) fn torn_commit_start(text: &[u8]) -> Option<usize> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Kind {
        #[serde(rename = "type")]
        kind: Option<String>,
        custom_type: Option<String>,
    }
    let mut offset = 0;
    let mut start = None;
    for (n, line) in text.split_inclusive(|&b| b == b'\n').enumerate() {
        let here = offset;
        offset += line.len();
        if n == 0 {
            continue; // the header
        }
        let complete = line.ends_with(b"\n");
        match serde_json::from_slice::<Kind>(line) {
            Ok(kind) if complete => {
                let is_marker = kind.kind.as_deref() == Some("custom")
                    && kind.custom_type.as_deref() == Some(MARKER);
                if is_marker {
                    start = None;
                } else if kind.kind.as_deref() == Some("message") {
                    start = start.or(Some(here));
                }
            }
            _ => {
                // A torn or unreadable line: everything from the open commit (or here) goes.
                start = start.or(Some(here));
                break;
            }
        }
    }
    start
}
