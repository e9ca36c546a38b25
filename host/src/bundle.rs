//! A context bundle: a session's context in one portable JSON file — the latest summary, the
//! newest checkpoint data, every context entry after the boundary (as AgentMessages) and where
//! it all came from — so a fresh session can start from it (`ctxhost context export` /
//! `import`, or an embedder doing the same).

use std::path::{Path, PathBuf};

use ctxhost_transcript::compaction::{CompactionRecord, Layer, Trigger};
use ctxhost_transcript::store::{TranscriptFile, rewrite_atomically};
use ctxhost_transcript::{NewCompaction, Transcript, TranscriptError};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::timestamp::now_iso;

/// The `format` every bundle names.
pub const BUNDLE_FORMAT: &str = "ctxhost-context-bundle";

/// The newest bundle format version this ctxhost writes and reads: a newer one may mean
/// members it would silently drop, so it is refused.
pub const BUNDLE_VERSION: u32 = 1;

/// A bundle as written to its file (member names in camelCase).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextBundle {
    /// Always [`BUNDLE_FORMAT`].
    pub format: String,
    /// The bundle format's version; 1 today. A bundle without one reads as 0.
    #[serde(default)]
    pub version: u32,
    /// When the bundle was written (RFC 3339, UTC).
    #[serde(default)]
    pub exported_at: String,
    /// The session the bundle came from.
    #[serde(default)]
    pub source: BundleSource,
    /// Figures of that session at export time.
    #[serde(default)]
    pub metadata: BundleMetadata,
    /// The summary of the latest compaction on the active branch.
    #[serde(default)]
    pub summary: Option<String>,
    /// The newest checkpoint an engine saved on the active branch, if any; import writes it back as
    /// a `custom` entry.
    #[serde(default)]
    pub checkpoint: Option<Checkpoint>,
    /// The context entries after the boundary, as the model gets them (AgentMessages).
    pub entries: Vec<Value>,
}

/// The session a bundle was exported from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BundleSource {
    /// The transcript file exported, as given.
    pub path: String,
    /// The session id in the transcript's header.
    pub session_id: String,
    /// The working directory in the transcript's header, when it names one.
    pub cwd: Option<String>,
    /// The transcript format version in its header.
    pub transcript_version: u32,
}

/// Figures of the exported session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BundleMetadata {
    /// The context's size in tokens when exported, measured against the model's window.
    pub context_tokens: u64,
    /// Compactions on the active branch.
    pub compaction_count: usize,
    /// Entries in the whole transcript file, every branch included.
    pub entries_in_file: usize,
}

/// The newest `custom` entry whose type names a checkpoint (an engine's saved state).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    /// The entry's `customType` (it contains "checkpoint").
    #[serde(default = "checkpoint_type")]
    pub custom_type: String,
    /// The engine's saved state, as the entry held it (null when it had none).
    #[serde(default)]
    pub data: Value,
}

fn checkpoint_type() -> String {
    "checkpoint".into()
}

/// A bundle that cannot be read or imported; every message names the bundle.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The bundle file cannot be read.
    #[error("cannot read {bundle}: {source}")]
    Read {
        /// Where the bundle came from (its path, or the name the caller gave).
        bundle: String,
        /// Why reading failed.
        source: std::io::Error,
    },
    /// The text is not JSON.
    #[error("{bundle}:{line}:{column}: not a JSON bundle: {source}")]
    Json {
        /// Where the bundle came from.
        bundle: String,
        /// The line of the syntax error, from 1.
        line: usize,
        /// The column of the syntax error, from 1.
        column: usize,
        /// What the parser found.
        source: serde_json::Error,
    },
    /// The JSON has no `format` naming a context bundle.
    #[error("{bundle}:1: not a context bundle (no \"format\": \"{BUNDLE_FORMAT}\")")]
    NotABundle {
        /// Where the bundle came from.
        bundle: String,
    },
    /// The bundle has no `entries` list.
    #[error("{bundle}: the bundle has no \"entries\" list")]
    NoEntries {
        /// Where the bundle came from.
        bundle: String,
    },
    /// A member holds the wrong kind of value.
    #[error("{bundle}: `{member}`: {source}")]
    Member {
        /// Where the bundle came from.
        bundle: String,
        /// The member's path in the bundle, e.g. `metadata.contextTokens`.
        member: String,
        /// What the deserializer expected.
        source: serde_json::Error,
    },
    /// An entry is not an AgentMessage the transcript accepts.
    #[error("{bundle}: entries[{index}]: {problem}")]
    Entry {
        /// Where the bundle came from.
        bundle: String,
        /// The entry's index in `entries`, from 0.
        index: usize,
        /// Why the transcript refused it, without the transcript's own location: the
        /// transcript being built is not a file the user knows.
        problem: String,
    },
    /// The bundle was written by a newer format than this ctxhost reads.
    #[error(
        "{bundle}: bundle version {version} is not supported (this ctxhost reads versions up to {BUNDLE_VERSION})"
    )]
    Version {
        /// Where the bundle came from.
        bundle: String,
        /// The version it declares.
        version: u64,
    },
    /// Import writes only a new session, and its transcript file already exists.
    #[error("{} already exists: import starts a fresh session", path.display())]
    SessionExists {
        /// The transcript file that exists.
        path: PathBuf,
    },
    /// The new session's directory cannot be created.
    #[error("cannot create {}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why creating it failed.
        #[source]
        cause: std::io::Error,
    },
    /// The bundle or the imported transcript cannot be written.
    #[error("cannot write {}", path.display())]
    Write {
        /// The file being written.
        path: PathBuf,
        /// Why writing failed.
        #[source]
        cause: TranscriptError,
    },
}

/// The newest checkpoint on the active branch: a `custom` entry whose type names one.
fn newest_checkpoint(transcript: &Transcript) -> Option<Checkpoint> {
    let entries = transcript.entries();
    (transcript.active_branch().into_iter().rev())
        .filter(|&i| entries[i].entry_type() == "custom")
        .filter_map(|i| serde_json::from_str::<Value>(entries[i].line()).ok())
        .find_map(|line| {
            let custom_type = line.get("customType")?.as_str()?;
            custom_type.contains("checkpoint").then(|| Checkpoint {
                custom_type: custom_type.to_string(),
                data: line.get("data").cloned().unwrap_or(Value::Null),
            })
        })
}

/// Every context entry but the compaction `boundary`, as its AgentMessage: all of them are
/// sent to the model, `custom_message` and `branch_summary` entries as much as messages.
fn messages_after(transcript: &Transcript, boundary: Option<usize>) -> Vec<Value> {
    let entries = transcript.entries();
    (transcript.context().iter())
        .filter(|&&i| Some(i) != boundary)
        .filter_map(|&i| serde_json::from_str::<Value>(&entries[i].message_json()).ok())
        .collect()
}

impl ContextBundle {
    /// The bundle of `transcript` (read from `path`), its context measured against `window`.
    pub fn export(transcript: &Transcript, path: &Path, window: u64) -> Self {
        let entries = transcript.entries();
        let boundary = (transcript.context().first().copied())
            .filter(|&i| entries[i].entry_type() == "compaction");
        let header = transcript.header();
        ContextBundle {
            format: BUNDLE_FORMAT.into(),
            version: BUNDLE_VERSION,
            exported_at: now_iso(),
            source: BundleSource {
                path: path.display().to_string(),
                session_id: header.id().to_string(),
                cwd: header.cwd().map(str::to_string),
                transcript_version: header.version(),
            },
            metadata: BundleMetadata {
                context_tokens: transcript.context_tokens_in_window(window),
                compaction_count: transcript.compaction_count(),
                entries_in_file: entries.len(),
            },
            summary: boundary.and_then(|b| entries[b].view()).map(|v| v.text),
            checkpoint: newest_checkpoint(transcript),
            entries: messages_after(transcript, boundary),
        }
    }

    /// Writes the bundle to `file` atomically (pretty-printed, one trailing newline).
    pub fn write(&self, file: &Path) -> Result<(), BundleError> {
        // A bundle is strings, numbers and JSON values: it always serializes.
        let text = serde_json::to_string_pretty(self).unwrap_or_default() + "\n";
        rewrite_atomically(file, &text)
            .map(|_backup| ())
            .map_err(|cause| BundleError::Write {
                path: file.to_path_buf(),
                cause,
            })
    }

    /// Reads the bundle in `file`.
    pub fn read(file: &Path) -> Result<Self, BundleError> {
        let bundle = file.display().to_string();
        let text = std::fs::read_to_string(file).map_err(|source| BundleError::Read {
            bundle: bundle.clone(),
            source,
        })?;
        Self::from_json(&text, &bundle)
    }

    /// The bundle in `text`; `name` says where it came from in errors.
    pub fn from_json(text: &str, name: &str) -> Result<Self, BundleError> {
        let bundle = || name.to_string();
        let value: Value = serde_json::from_str(text).map_err(|source| BundleError::Json {
            bundle: bundle(),
            line: source.line(),
            column: source.column(),
            source,
        })?;
        if value.get("format").and_then(Value::as_str) != Some(BUNDLE_FORMAT) {
            return Err(BundleError::NotABundle { bundle: bundle() });
        }
        let version = value.get("version").and_then(Value::as_u64).unwrap_or(0);
        if version > u64::from(BUNDLE_VERSION) {
            return Err(BundleError::Version {
                bundle: bundle(),
                version,
            });
        }
        if !value.get("entries").is_some_and(Value::is_array) {
            return Err(BundleError::NoEntries { bundle: bundle() });
        }
        serde_path_to_error::deserialize(value).map_err(|e| BundleError::Member {
            bundle: bundle(),
            member: e.path().to_string(),
            source: e.into_inner(),
        })
    }

    /// A fresh transcript holding the bundle: the entries, then (with a summary) a compaction
    /// whose first kept entry is the first of them, then the checkpoint data as a `custom`
    /// entry. `name` says where the bundle came from in errors.
    pub fn to_transcript(&self, session_id: &str, name: &str) -> Result<Transcript, BundleError> {
        let now = now_iso();
        let cwd = self.source.cwd.as_deref().unwrap_or("");
        let mut t = Transcript::new(session_id, cwd, &now);
        let entry_error = |index: usize| {
            move |source| BundleError::Entry {
                bundle: name.to_string(),
                index,
                problem: problem_of(source),
            }
        };
        for (n, message) in self.entries.iter().enumerate() {
            append_bundled(&mut t, message, &now).map_err(entry_error(n))?;
        }
        // What follows the entries is reported as the entry after the last.
        let appended = entry_error(self.entries.len());
        let first_kept = t.entries().first().map(|e| e.id().to_string());
        if let Some(compaction) = self.imported_compaction(first_kept) {
            t.append_compaction(&compaction, &now).map_err(appended)?;
        }
        if let Some(cp) = &self.checkpoint {
            let members = json!({"customType": cp.custom_type, "data": cp.data});
            t.append_other("custom", &members, &now).map_err(appended)?;
        }
        Ok(t)
    }

    /// The compaction holding the bundle's summary, keeping `first_kept` on; None without a
    /// summary or an entry to keep.
    fn imported_compaction(&self, first_kept: Option<String>) -> Option<NewCompaction> {
        let summary = self.summary.clone()?;
        let record = CompactionRecord {
            layer: Some(Layer::Import),
            trigger: Some(Trigger::Manual),
            imported_from: serde_json::to_value(&self.source).ok(),
            ..CompactionRecord::default()
        };
        Some(NewCompaction {
            summary,
            first_kept_entry_id: first_kept?,
            tokens_before: self.metadata.context_tokens,
            details: Some(record.to_value()),
        })
    }

    /// Starts a fresh session from the bundle in the transcript file `path` (for a session
    /// key, [`crate::Host::session_path`] says where), which must not exist yet; returns the
    /// new transcript's entry count. `name` says where the bundle came from in errors.
    pub fn create_session(
        &self,
        path: &Path,
        session_id: &str,
        name: &str,
    ) -> Result<usize, BundleError> {
        if path.exists() {
            return Err(BundleError::SessionExists {
                path: path.to_path_buf(),
            });
        }
        let transcript = self.to_transcript(session_id, name)?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|cause| BundleError::CreateDir {
                path: parent.to_path_buf(),
                cause,
            })?;
        }
        TranscriptFile::create(path, &transcript).map_err(|cause| BundleError::Write {
            path: path.to_path_buf(),
            cause,
        })?;
        Ok(transcript.entries().len())
    }
}

/// What a transcript found wrong with an entry, without where (its own scratch name).
fn problem_of(error: TranscriptError) -> String {
    match error {
        TranscriptError::Invalid { problem, .. } => problem,
        other => other.to_string(),
    }
}

/// Appends one bundled AgentMessage as the entry it came from: `custom` messages as
/// `custom_message` entries and branch summaries as `branch_summary` entries (what pi writes
/// for them), everything else as a `message` entry.
fn append_bundled(
    t: &mut Transcript,
    message: &Value,
    now: &str,
) -> Result<usize, TranscriptError> {
    let member = |k: &str| message.get(k).cloned().unwrap_or(Value::Null);
    match message.get("role").and_then(Value::as_str) {
        Some("custom") => {
            let mut members = json!({
                "customType": member("customType"),
                "content": member("content"),
                "display": message.get("display").cloned().unwrap_or(Value::Bool(true)),
            });
            if let Some(details) = message.get("details") {
                members["details"] = details.clone();
            }
            t.append_other("custom_message", &members, now)
        }
        Some("branchSummary") => t.append_other(
            "branch_summary",
            &json!({"summary": member("summary"), "fromId": member("fromId")}),
            now,
        ),
        _ => t.append_message(message, now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> Transcript {
        let text = ctxhost_transcript::generate::coding_session(4, 60);
        Transcript::parse(&text, "s.jsonl").unwrap()
    }

    #[test]
    fn a_bundle_round_trips_through_its_text_and_a_fresh_transcript() {
        let t = session();
        let bundle = ContextBundle::export(&t, Path::new("s.jsonl"), 200_000);
        assert_eq!(bundle.entries.len(), t.context().len());
        let text = serde_json::to_string_pretty(&bundle).unwrap();
        let again = ContextBundle::from_json(&text, "b.json").unwrap();
        assert_eq!(again, bundle);
        let fresh = again.to_transcript("new", "b.json").unwrap();
        assert_eq!(fresh.context().len(), t.context().len());
        assert_eq!(fresh.context_tokens(), t.context_tokens());
    }

    #[test]
    fn errors_name_the_bundle_and_the_member() {
        let err = |text: &str| {
            ContextBundle::from_json(text, "b.json")
                .unwrap_err()
                .to_string()
        };
        assert!(
            err("{").starts_with("b.json:1:1: not a JSON bundle"),
            "{}",
            err("{")
        );
        assert_eq!(
            err("{}"),
            "b.json:1: not a context bundle (no \"format\": \"ctxhost-context-bundle\")"
        );
        let no_entries = r#"{"format": "ctxhost-context-bundle"}"#;
        assert_eq!(
            err(no_entries),
            "b.json: the bundle has no \"entries\" list"
        );
        let bad_summary = r#"{"format": "ctxhost-context-bundle", "version": 1, "exportedAt": "", "summary": 3, "entries": []}"#;
        assert!(
            err(bad_summary).starts_with("b.json: `summary`: "),
            "{}",
            err(bad_summary)
        );
        let bad_entry = r#"{"format": "ctxhost-context-bundle", "version": 1, "exportedAt": "", "entries": [{"role": 3}]}"#;
        let bundle = ContextBundle::from_json(bad_entry, "b.json").unwrap();
        let problem = bundle
            .to_transcript("new", "b.json")
            .unwrap_err()
            .to_string();
        assert!(problem.starts_with("b.json: entries[0]: "), "{problem}");
        // The transcript being built is nobody's file: not named.
        assert!(!problem.contains("<session"), "{problem}");
        let newer = r#"{"format": "ctxhost-context-bundle", "version": 99, "entries": []}"#;
        assert_eq!(
            err(newer),
            "b.json: bundle version 99 is not supported (this ctxhost reads versions up to 1)"
        );
    }
}
