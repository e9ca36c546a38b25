//! The per-turn ledger: one JSON line per turn a runtime drove through `serve`, beside the
//! session's transcript (`<transcript>.ledger.jsonl`), saying which engine ran, whether it
//! served the turn or the runtime went without it and why, what it assembled, how much a prompt
//! cache keeps, what compaction did, and the time spent. An operator reads it with
//! `ctxhost context history`; `ctxhost report` plots it.
//!
//! Append-only and crash-safe: a record is one `write` of one whole line; a line cut short by a
//! crash is dropped when the ledger is read and cut off before the next append. Bounded: past
//! [`MAX_LEDGER_BYTES`] the file becomes `<transcript>.ledger.1.jsonl` (one generation kept).

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::session::{Prefix, RequestDigest};

/// The size at which a ledger file is rotated: about 3,000 turns.
pub const MAX_LEDGER_BYTES: u64 = 1024 * 1024;

/// What became of a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum TurnOutcome {
    /// The configured engine assembled the context.
    Ok,
    /// Another engine served: the configured one is quarantined (`plugins.contextEngineFallback`).
    Fallback,
    /// No context came back (the engine faulted, its circuit is open, or the host failed): the
    /// runtime goes on without the engine for this turn.
    Failed,
}

/// A compaction a turn ran or asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LedgerCompaction {
    /// Whether a compaction entry was written.
    pub compacted: bool,
    /// Which layer of the built-in compaction made it (prune, extractive, model…), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<String>,
    /// The context before it, in tokens.
    pub tokens_before: u64,
    /// The context after it, in tokens.
    pub tokens_after: u64,
    /// Why nothing was written, when nothing was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LedgerRecord {
    /// When the turn was answered (RFC 3339).
    pub at: String,
    /// The engine that served (or failed) the turn.
    pub engine: String,
    /// Its contract version.
    pub contract: String,
    /// The engine the config selects, when another one served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configured_engine: Option<String>,
    /// What became of the turn.
    pub outcome: TurnOutcome,
    /// Why the turn was degraded (the error, or the quarantine's cause).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Messages in the session when the turn ran (the runtime's history, the prompt not yet in).
    #[serde(default)]
    pub messages: usize,
    /// The engine's estimate of the context it assembled, in tokens.
    #[serde(default)]
    pub assembled_tokens: u32,
    /// How much of the request repeats the previous turn's from its first byte.
    #[serde(default)]
    pub prefix: Prefix,
    /// The request in brief, so the next turn (in this process or a new one) can tell whether
    /// it extends it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<RequestDigest>,
    /// The compaction the turn ran, when it ran one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction: Option<LedgerCompaction>,
    /// Time in the engine, in microseconds.
    #[serde(default)]
    pub engine_micros: u64,
    /// Time the host spent answering the turn, engine included, in microseconds.
    #[serde(default)]
    pub bridge_micros: u64,
}

/// Where the ledger of the transcript at `transcript` lives.
pub fn ledger_path(transcript: &Path) -> PathBuf {
    with_suffix(transcript, ".ledger.jsonl")
}

/// The previous generation, kept after a rotation.
fn rotated_path(transcript: &Path) -> PathBuf {
    with_suffix(transcript, ".ledger.1.jsonl")
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// A session's ledger, open for appending.
#[derive(Debug)]
pub struct Ledger {
    transcript: PathBuf,
    file: Option<File>,
    bytes: u64,
}

impl Ledger {
    /// The ledger of the transcript at `transcript`; the file is opened (and a torn last line
    /// cut off) on the first append.
    pub fn new(transcript: &Path) -> Self {
        Self {
            transcript: transcript.to_path_buf(),
            file: None,
            bytes: 0,
        }
    }

    /// Appends one record as one whole line.
    pub fn append(&mut self, record: &LedgerRecord) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(record).map_err(std::io::Error::other)?;
        line.push(b'\n');
        if self.bytes + line.len() as u64 > MAX_LEDGER_BYTES && self.bytes > 0 {
            self.rotate()?;
        }
        let file = match &mut self.file {
            Some(file) => file,
            None => {
                let (file, bytes) = open_repaired(&ledger_path(&self.transcript))?;
                self.bytes = bytes;
                self.file.insert(file)
            }
        };
        file.write_all(&line)?;
        self.bytes += line.len() as u64;
        Ok(())
    }

    /// Closes the file until the next append reopens it: a session gone idle holds no
    /// descriptor.
    pub fn release_handle(&mut self) {
        self.file = None;
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        self.file = None;
        std::fs::rename(
            ledger_path(&self.transcript),
            rotated_path(&self.transcript),
        )?;
        self.bytes = 0;
        Ok(())
    }
}

/// Opens `path` for appending, creating it, with anything after its last newline (a record a
/// crash cut short) cut off. Returns the file and its length.
fn open_repaired(path: &Path) -> std::io::Result<(File, u64)> {
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)?;
    let len = file.metadata()?.len();
    let whole = whole_lines_len(&mut file, len)?;
    if whole != len {
        tracing::warn!(
            "{}: cut a torn record of {} bytes at its end",
            path.display(),
            len - whole
        );
        file.set_len(whole)?;
    }
    Ok((file, whole))
}

/// The length of `file` up to and including its last newline.
fn whole_lines_len(file: &mut File, len: u64) -> std::io::Result<u64> {
    let mut end = len;
    let mut buffer = [0u8; 4096];
    while end > 0 {
        let start = end.saturating_sub(buffer.len() as u64);
        let chunk = &mut buffer[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        std::io::Read::read_exact(file, chunk)?;
        if let Some(at) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(start + at as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

/// The ledger's last whole record, read from the end of the file (a missing or unreadable
/// ledger has none): what a new process resumes the prefix measure from.
pub fn last_record(transcript: &Path) -> Option<LedgerRecord> {
    /// Far more than one record; the read stays small whatever the ledger's size.
    const TAIL: u64 = 64 * 1024;
    let mut file = File::open(ledger_path(transcript)).ok()?;
    let len = file.metadata().ok()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(TAIL))).ok()?;
    let mut tail = Vec::new();
    std::io::Read::read_to_end(&mut file, &mut tail).ok()?;
    let whole = &tail[..tail.iter().rposition(|&b| b == b'\n')?];
    let line = whole.rsplit(|&b| b == b'\n').next()?;
    serde_json::from_slice(line).ok()
}

/// A ledger as read: its records, oldest first, and what could not be read.
#[derive(Debug, Default)]
pub struct LedgerHistory {
    /// Every whole record, the rotated generation's first.
    pub records: Vec<LedgerRecord>,
    /// Lines that are not records, each named by file and line.
    pub warnings: Vec<String>,
}

/// Reads the ledger of the transcript at `transcript` (both generations). A missing ledger is an
/// empty history; a torn last line is left out silently (the next append cuts it), any other
/// bad line is left out with a warning naming it.
pub fn read_history(transcript: &Path) -> std::io::Result<LedgerHistory> {
    let mut history = LedgerHistory::default();
    for path in [rotated_path(transcript), ledger_path(transcript)] {
        match File::open(&path) {
            Ok(file) => history.read(BufReader::new(file), &path)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(history)
}

impl LedgerHistory {
    /// The records of one ledger file (at `path`), up to a torn last line.
    fn read(&mut self, mut reader: impl BufRead, path: &Path) -> std::io::Result<()> {
        let mut line = Vec::new();
        let mut number = 0;
        loop {
            line.clear();
            if reader.read_until(b'\n', &mut line)? == 0 || !line.ends_with(b"\n") {
                return Ok(());
            }
            number += 1;
            match serde_json::from_slice::<LedgerRecord>(&line) {
                Ok(record) => self.records.push(record),
                Err(e) => self.warnings.push(format!(
                    "{}:{number}: not a ledger record: {e}",
                    path.display()
                )),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(tokens: u32) -> LedgerRecord {
        LedgerRecord {
            at: "2026-11-26T00:00:00.000Z".into(),
            engine: "legacy".into(),
            contract: "0.2.0".into(),
            configured_engine: None,
            outcome: TurnOutcome::Ok,
            error: None,
            messages: 0,
            assembled_tokens: tokens,
            prefix: Prefix::default(),
            request: None,
            compaction: None,
            engine_micros: 10,
            bridge_micros: 20,
        }
    }

    #[test]
    fn records_read_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let transcript = dir.path().join("s.jsonl");
        let mut ledger = Ledger::new(&transcript);
        for tokens in 1..=3 {
            ledger.append(&record(tokens)).unwrap();
        }
        let history = read_history(&transcript).unwrap();
        let tokens: Vec<u32> = history.records.iter().map(|r| r.assembled_tokens).collect();
        assert_eq!(tokens, [1, 2, 3]);
        assert!(history.warnings.is_empty());
    }

    #[test]
    fn a_torn_record_is_skipped_on_read_and_cut_before_the_next_append() {
        let dir = tempfile::tempdir().unwrap();
        let transcript = dir.path().join("s.jsonl");
        Ledger::new(&transcript).append(&record(1)).unwrap();
        let path = ledger_path(&transcript);
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(br#"{"at":"2026-11-26T0"#).unwrap();
        drop(file);
        let history = read_history(&transcript).unwrap();
        assert_eq!(history.records.len(), 1);
        assert!(history.warnings.is_empty(), "{:?}", history.warnings);

        Ledger::new(&transcript).append(&record(2)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        let history = read_history(&transcript).unwrap();
        assert_eq!(history.records.len(), 2);
    }

    #[test]
    fn a_bad_line_is_named_and_the_rest_read() {
        let dir = tempfile::tempdir().unwrap();
        let transcript = dir.path().join("s.jsonl");
        let mut ledger = Ledger::new(&transcript);
        ledger.append(&record(1)).unwrap();
        let path = ledger_path(&transcript);
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"not json\n").unwrap();
        drop(file);
        ledger.append(&record(2)).unwrap();
        let history = read_history(&transcript).unwrap();
        assert_eq!(history.records.len(), 2);
        assert_eq!(history.warnings.len(), 1);
        assert!(
            history.warnings[0].contains(":2: not a ledger record"),
            "{:?}",
            history.warnings
        );
    }

    #[test]
    fn it_rotates_past_its_bound_and_keeps_one_generation() {
        let dir = tempfile::tempdir().unwrap();
        let transcript = dir.path().join("s.jsonl");
        let mut ledger = Ledger::new(&transcript);
        let line = serde_json::to_vec(&record(1)).unwrap().len() as u64 + 1;
        let per_file = MAX_LEDGER_BYTES / line;
        let total = per_file * 2 + 5;
        for n in 0..total {
            ledger.append(&record(n as u32)).unwrap();
        }
        for path in [ledger_path(&transcript), rotated_path(&transcript)] {
            assert!(std::fs::metadata(&path).unwrap().len() <= MAX_LEDGER_BYTES);
        }
        let history = read_history(&transcript).unwrap();
        assert!(
            history.records.len() as u64 >= per_file,
            "one whole generation is kept"
        );
        assert_eq!(
            history.records.last().unwrap().assembled_tokens,
            total as u32 - 1
        );
        let tokens: Vec<u32> = history.records.iter().map(|r| r.assembled_tokens).collect();
        assert!(
            tokens.windows(2).all(|w| w[0] + 1 == w[1]),
            "in order, none missing"
        );
    }

    #[test]
    fn the_last_whole_record_is_read_from_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let transcript = dir.path().join("s.jsonl");
        assert!(last_record(&transcript).is_none());
        let mut ledger = Ledger::new(&transcript);
        for tokens in 1..=3 {
            ledger.append(&record(tokens)).unwrap();
        }
        let mut file = OpenOptions::new()
            .append(true)
            .open(ledger_path(&transcript))
            .unwrap();
        file.write_all(br#"{"at":"torn"#).unwrap();
        assert_eq!(last_record(&transcript).unwrap().assembled_tokens, 3);
    }

    #[test]
    fn a_missing_ledger_is_an_empty_history() {
        let dir = tempfile::tempdir().unwrap();
        let history = read_history(&dir.path().join("none.jsonl")).unwrap();
        assert!(history.records.is_empty());
    }
}
