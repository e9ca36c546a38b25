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
pub(super) struct MarkerEntry {
    pub(super) custom_type: Option<String>,
    #[serde(default)]
    pub(super) data: Marker,
}

/// What a commit ends with: how far the runtime's history reached. One type written by
/// `append` and read back by `scan`, so the two cannot drift apart.
#[derive(Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct Marker {
    /// The commit's idempotency key (a `sync` has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) advancement_key: Option<String>,
    /// The runtime's messages in the mirror after the commit.
    #[serde(default)]
    pub(super) message_count: usize,
    /// The fingerprint of the last of them, as the runtime computed it.
    pub(super) last_fingerprint: Option<String>,
    /// The chain of all their fingerprints, when known (absent in markers written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) chain: Option<String>,
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
                let Ok(marker) = serde_json::from_str::<MarkerEntry>(entry.line()) else {
                    continue;
                };
                if marker.custom_type.as_deref() != Some(MARKER) {
                    continue;
                }
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
