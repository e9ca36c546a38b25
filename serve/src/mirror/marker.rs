//! The entry that closes every commit of the mirror, and what reading them back tells: how far
//! the runtime's history reached and which commits were made.

use std::collections::HashSet;

use ctxhost::transcript::Transcript;
use serde::{Deserialize, Serialize};

use crate::sync::SyncState;

/// `customType` of the entry that closes every commit.
pub(crate) const MARKER: &str = "ctxhost.mirror";

/// A `custom` entry of the mirror as far as `append` writes it and `scan` reads it: a marker
/// when its type is [`MARKER`].
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MarkerEntry {
    custom_type: Option<String>,
    #[serde(default)]
    data: Marker,
}

/// What a commit ends with: how far the runtime's history reached. One type written by
/// `append` and read back by `scan`, so the two cannot drift apart.
#[derive(Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Marker {
    /// The commit's idempotency key (a `sync` has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    advancement_key: Option<String>,
    /// The runtime's messages in the mirror after the commit.
    #[serde(default)]
    message_count: usize,
    /// The fingerprint of the last of them, as the runtime computed it.
    last_fingerprint: Option<String>,
    /// The chain of all their fingerprints, when known (absent in markers written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    chain: Option<String>,
}

/// The marker entry of a commit (`advancement_key`; None for a sync) that leaves the mirror at
/// `state`.
pub(super) fn entry(state: &SyncState, advancement_key: Option<&str>) -> serde_json::Value {
    let marker = MarkerEntry {
        custom_type: Some(MARKER.to_string()),
        data: Marker {
            advancement_key: advancement_key.map(str::to_string),
            message_count: state.message_count,
            last_fingerprint: state.last_fingerprint.clone(),
            chain: state.chain.clone(),
        },
    };
    serde_json::to_value(marker).expect("a marker serializes")
}

/// The mirror's position and its committed keys, from its markers.
pub(super) fn scan(transcript: &Transcript) -> (SyncState, HashSet<String>) {
    let mut state = SyncState::default();
    let mut committed = HashSet::new();
    for index in transcript.active_branch() {
        let entry = &transcript.entries()[index];
        match entry.entry_type() {
            "message" => state.message_count += 1,
            "custom" => {
                let marker = serde_json::from_str::<MarkerEntry>(entry.line()).ok();
                let Some(marker) = marker.filter(|m| m.custom_type.as_deref() == Some(MARKER))
                else {
                    continue;
                };
                state.last_fingerprint = marker.data.last_fingerprint;
                state.chain = marker.data.chain;
                if let Some(key) = marker.data.advancement_key {
                    committed.insert(key);
                }
            }
            _ => {}
        }
    }
    (state, committed)
}
