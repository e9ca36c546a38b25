//! The record a compaction leaves in its entry's `details`: how it was made (layer, trigger,
//! summarizer, tier), what it did (tokens after, messages compacted, pruned tool outputs), the
//! running counts and the degradation report. The built-in compaction writes it, the host adds
//! what it measured, and everything that reads a compaction (`status`, `history`, the counts,
//! the next compaction) reads it through [`CompactionRecord`].
//!
//! Other writers put anything in `details`: keys this module does not know, and known keys
//! whose values it cannot read, are kept verbatim in [`CompactionRecord::extra`] and written
//! back unchanged. A leaf: it depends on nothing else in the crate.

use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What started a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    /// The operator or the agent asked for it.
    Manual,
    /// The context crossed the runtime's threshold.
    Auto,
    /// The model refused a call as too long.
    Overflow,
}

/// Which layer of the policy runs (or, for [`Layer::Import`], where the summary came from).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    /// Phase 1 only.
    Prune,
    /// Phase 1 then Phase 2, keeping `summarizeKeepRecentTokens`.
    Summarize,
    /// Phase 1 then Phase 2, keeping `fullKeepRecentTokens`, pinned messages carried over.
    Full,
    /// Not a layer the policy runs: the summary of a context bundle a fresh session starts
    /// from (`ctxhost context import`).
    Import,
}

/// How much a summary could be trusted: the fallback tier that produced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Full,
    /// Oversized messages were left out (noted in the summary).
    Partial,
    /// The summarizer failed: a plain note plus the extractive summary.
    Note,
}

/// Degradation risk from repeated summarizing compactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Risk {
    Low,
    Medium,
    High,
    Critical,
}

/// The names as written on disk (`prune`, `auto`, `partial`, `high`, ...): the serde names,
/// written through the formatter, so there is one spelling per variant.
macro_rules! display_by_serde_name {
    ($($name:ty),*) => {$(
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.serialize(f)
            }
        }
    )*};
}
display_by_serde_name!(Trigger, Layer, Tier, Risk);

/// The degradation report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Degradation {
    /// Summarizing compactions so far.
    pub count: u64,
    pub risk: Risk,
    pub recommendation: String,
}

/// A compaction entry's `details`. Fields are in the order they are written; every one is
/// optional, since entries written by other tools have none of them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", from = "Map<String, Value>")]
pub struct CompactionRecord {
    /// Prune-only compactions: whether the summary carried over is a real one (false: only a
    /// note that outputs were pruned).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub carries_summary: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary_tier: Option<Tier>,
    /// The cut fell inside the newest turn.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub split_turn: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub summarizer_errors: Vec<String>,
    /// Files read and modified, cumulative across the summarizing compactions of a branch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_files: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modified_files: Option<Vec<String>>,
    /// The context after, as the host counted it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_after: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layer: Option<Layer>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trigger: Option<Trigger>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub messages_compacted: Option<u64>,
    /// The engine that compacted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// `None`: not recorded; `Some(None)`: recorded as none (a prune calls no summarizer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summarizer: Option<Option<String>>,
    /// The custom instruction the built-in compaction was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub focus: Option<String>,
    /// Tool results whose output this compaction replaced by [`crate::PRUNED_TEXT`] in the
    /// context.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pruned_entry_ids: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pruned_tokens: Option<u64>,
    /// Compactions on the branch up to and including this one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction_count: Option<u64>,
    /// Summarizing (non-prune) compactions up to and including this one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary_count: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub degradation: Option<Degradation>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// What the engine said the context would be, when the host counted otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine_tokens_after: Option<u64>,
    /// The custom instruction the session's `compact` was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom_instructions: Option<String>,
    /// For [`Layer::Import`]: the bundle's `source` (path, session id, cwd).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imported_from: Option<Value>,
    /// Keys of other writers, and known keys whose values are not of the known shape, as
    /// written.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl CompactionRecord {
    /// The record in a `details` value; `None` when it is not an object.
    pub fn from_details(details: &Value) -> Option<Self> {
        match details {
            Value::Object(map) => Some(Self::from(map.clone())),
            _ => None,
        }
    }

    /// The record in a `details` member as JSON text; `None` when it is not an object.
    pub fn from_json(text: &str) -> Option<Self> {
        serde_json::from_str::<Map<String, Value>>(text)
            .ok()
            .map(Self::from)
    }

    /// The record as the `details` value written to the transcript.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or_else(|_| Value::Object(Map::new()))
    }

    /// Whether this compaction only pruned tool outputs (summarized nothing).
    pub fn is_prune(&self) -> bool {
        self.layer == Some(Layer::Prune)
    }
}

/// Every known key is taken out of the map and read; one that does not read as its type stays
/// in `extra`, so nothing another writer put there is lost.
impl From<Map<String, Value>> for CompactionRecord {
    fn from(mut map: Map<String, Value>) -> Self {
        let map = &mut map;
        CompactionRecord {
            carries_summary: take(map, "carriesSummary"),
            summary_tier: take(map, "summaryTier"),
            split_turn: take(map, "splitTurn").unwrap_or(false),
            summarizer_errors: take(map, "summarizerErrors").unwrap_or_default(),
            read_files: take(map, "readFiles"),
            modified_files: take(map, "modifiedFiles"),
            tokens_after: take(map, "tokensAfter"),
            layer: take(map, "layer"),
            trigger: take(map, "trigger"),
            messages_compacted: take(map, "messagesCompacted"),
            engine: take(map, "engine"),
            summarizer: take(map, "summarizer"),
            focus: take(map, "focus"),
            pruned_entry_ids: take(map, "prunedEntryIds").unwrap_or_default(),
            pruned_tokens: take(map, "prunedTokens"),
            compaction_count: take(map, "compactionCount"),
            summary_count: take(map, "summaryCount"),
            degradation: take(map, "degradation"),
            warnings: take(map, "warnings").unwrap_or_default(),
            engine_tokens_after: take(map, "engineTokensAfter"),
            custom_instructions: take(map, "customInstructions"),
            imported_from: take(map, "importedFrom"),
            extra: std::mem::take(map),
        }
    }
}

/// `key`'s value as a `T`, removed from the map; left in place when it is not one.
fn take<T: DeserializeOwned>(map: &mut Map<String, Value>, key: &str) -> Option<T> {
    let value = map.get(key)?;
    let read = T::deserialize(value).ok()?;
    map.shift_remove(key);
    Some(read)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `details` of a summarizing compaction as ctxhost wrote it before the record was
    /// typed, with a key of another writer.
    const WRITTEN: &str = r#"{"summaryTier":"partial","splitTurn":true,"summarizerErrors":["HTTP 500"],"readFiles":["a.rs"],"modifiedFiles":["b.rs"],"tokensAfter":24000,"layer":"full","trigger":"overflow","messagesCompacted":412,"engine":"legacy","summarizer":"extractive","focus":"the parser","prunedEntryIds":["t1","t2"],"prunedTokens":9000,"compactionCount":4,"summaryCount":3,"degradation":{"count":3,"risk":"high","recommendation":"consider a fresh session"},"warnings":["w"],"engineTokensAfter":23000,"customInstructions":"the parser","vendorKey":{"n":1}}"#;

    #[test]
    fn a_written_record_round_trips_byte_for_byte() {
        let record = CompactionRecord::from_json(WRITTEN).unwrap();
        assert_eq!(record.layer, Some(Layer::Full));
        assert_eq!(record.trigger, Some(Trigger::Overflow));
        assert_eq!(record.summary_tier, Some(Tier::Partial));
        assert_eq!(record.degradation.as_ref().unwrap().risk, Risk::High);
        assert_eq!(record.pruned_entry_ids, ["t1", "t2"]);
        assert_eq!(record.summarizer, Some(Some("extractive".into())));
        assert_eq!(record.extra.len(), 1, "{:?}", record.extra);
        assert_eq!(serde_json::to_string(&record).unwrap(), WRITTEN);
    }

    #[test]
    fn a_prune_record_keeps_its_null_summarizer() {
        let written = r#"{"carriesSummary":false,"tokensAfter":10,"layer":"prune","trigger":"auto","messagesCompacted":0,"summarizer":null,"prunedEntryIds":["t1"],"prunedTokens":5,"compactionCount":1,"summaryCount":0,"degradation":{"count":0,"risk":"low","recommendation":"r"}}"#;
        let record = CompactionRecord::from_json(written).unwrap();
        assert!(record.is_prune());
        assert_eq!(record.summarizer, Some(None));
        assert_eq!(serde_json::to_string(&record).unwrap(), written);
    }

    #[test]
    fn values_of_another_shape_are_kept_not_lost() {
        let written = r#"{"layer":"checkpoint","compactionCount":"three","prunedEntryIds":["t1"]}"#;
        let record = CompactionRecord::from_json(written).unwrap();
        assert_eq!(record.layer, None);
        assert_eq!(record.compaction_count, None);
        assert_eq!(record.pruned_entry_ids, ["t1"]);
        let again: Value = serde_json::from_str(&serde_json::to_string(&record).unwrap()).unwrap();
        assert_eq!(again["layer"], "checkpoint");
        assert_eq!(again["compactionCount"], "three");
        assert!(CompactionRecord::from_json("[1]").is_none());
    }

    #[test]
    fn names_display_as_written() {
        assert_eq!(Layer::Summarize.to_string(), "summarize");
        assert_eq!(Layer::Import.to_string(), "import");
        assert_eq!(Trigger::Overflow.to_string(), "overflow");
        assert_eq!(Tier::Note.to_string(), "note");
        assert_eq!(Risk::Critical.to_string(), "critical");
    }
}
