//! Where a runtime's history stands against the session's mirror: what `session.commitTurn` did,
//! the state every reply about the mirror carries, and the chain of fingerprints that tells one
//! history from another, middle included. A leaf: the protocol, the checks, the error data and
//! the mirror all speak of it.

use schemars::JsonSchema;
use serde::Serialize;
use sha2::{Digest, Sha256};

/// What `commit` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Commit {
    Committed,
    Duplicate,
}

/// Where the runtime's history stands against the mirror.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SyncState {
    /// The runtime's messages in the mirror.
    pub(crate) message_count: usize,
    /// The client's fingerprint of the last of them (opaque to the server).
    pub(crate) last_fingerprint: Option<String>,
    /// The chain of the fingerprints of all of them (see `chain`); absent while unknown: a
    /// commit without `fingerprints` leaves it so, until a reset that has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) chain: Option<String>,
}

/// What a commit or a sync says of its messages' fingerprints: one each (`fingerprints`), or
/// only the last one's (`lastFingerprint`, of clients before the chain).
#[derive(Debug, Clone, Default)]
pub(crate) struct Fingerprints {
    pub(crate) each: Option<Vec<String>>,
    pub(crate) last: Option<String>,
}

impl SyncState {
    /// The state once `added` messages with these fingerprints are appended.
    pub(crate) fn extended(&self, added: usize, fingerprints: &Fingerprints) -> SyncState {
        if added == 0 {
            return self.clone();
        }
        let known = self.message_count == 0 || self.chain.is_some();
        let chain = match (&fingerprints.each, known) {
            (Some(each), true) => (each.iter())
                .fold(self.chain.clone(), |previous, fingerprint| {
                    Some(chain(previous.as_deref(), fingerprint))
                }),
            _ => None,
        };
        let last = fingerprints.each.as_ref().and_then(|each| each.last());
        SyncState {
            message_count: self.message_count + added,
            last_fingerprint: last.cloned().or_else(|| fingerprints.last.clone()),
            chain,
        }
    }

    /// Whether a history of `message_count` messages, whose last fingerprint and chain are
    /// these, is the mirror's. What either side does not know is not compared.
    pub(crate) fn holds(
        &self,
        message_count: usize,
        last_fingerprint: Option<&str>,
        chain: Option<&str>,
    ) -> bool {
        let same = |theirs: Option<&str>, ours: Option<&str>| match (theirs, ours) {
            (Some(theirs), Some(ours)) => theirs == ours,
            _ => true,
        };
        message_count == self.message_count
            && same(last_fingerprint, self.last_fingerprint.as_deref())
            && same(chain, self.chain.as_deref())
    }
}

/// The chain of a history whose chain was `previous` (None when it was empty) once a message of
/// this fingerprint is appended: the first 16 hex digits of SHA-256 over `previous`
/// followed by `fingerprint`. Equal chains mean the same fingerprints in the same order.
pub(crate) fn chain(previous: Option<&str>, fingerprint: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(previous.unwrap_or("").as_bytes());
    hash.update(fingerprint.as_bytes());
    let digest = hash.finalize();
    digest[..8]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn each(fingerprints: &[&str]) -> Fingerprints {
        Fingerprints {
            each: Some(fingerprints.iter().map(|f| f.to_string()).collect()),
            last: None,
        }
    }

    #[test]
    fn the_chain_is_the_clients_vector() {
        // The same vector as the clients' tests (integrations/client, integrations/hermes).
        let first = chain(None, "0123456789abcdef");
        assert_eq!(first, "9f9f5111f7b27a78");
        assert_eq!(chain(Some(&first), "fedcba9876543210"), "6b2e2b6c22881712");
    }

    #[test]
    fn a_middle_rewritten_or_commits_swapped_change_the_chain_not_the_last_fingerprint() {
        let empty = SyncState::default();
        let held = empty.extended(4, &each(&["a", "b", "c", "d"]));
        let rewritten = empty.extended(4, &each(&["a", "x", "c", "d"]));
        let split = (empty.extended(2, &each(&["a", "b"])))
            .extended(1, &each(&["c"]))
            .extended(1, &each(&["d"]));
        assert_eq!(held, split, "the same messages, committed in other parts");
        let out_of_order = (empty.extended(1, &each(&["b"])))
            .extended(1, &each(&["a"]))
            .extended(2, &each(&["c", "d"]));
        for other in [&rewritten, &out_of_order] {
            assert_eq!(other.last_fingerprint, held.last_fingerprint);
            assert!(!held.holds(4, Some("d"), other.chain.as_deref()));
        }
        assert!(held.holds(4, Some("d"), held.chain.as_deref()));
        assert!(held.holds(4, Some("d"), None), "a client without the chain");
    }

    #[test]
    fn a_commit_without_fingerprints_leaves_the_chain_unknown_until_a_reset() {
        let lasts = Fingerprints {
            each: None,
            last: Some("b".into()),
        };
        let state = SyncState::default().extended(1, &each(&["a"]));
        let unknown = state.extended(1, &lasts);
        assert_eq!(unknown.chain, None);
        assert_eq!(unknown.last_fingerprint.as_deref(), Some("b"));
        assert_eq!(unknown.extended(1, &each(&["c"])).chain, None);
        assert_eq!(unknown.extended(0, &each(&[])), unknown);
        assert!(unknown.holds(2, Some("b"), Some("whatever")));
        let reset = SyncState::default().extended(1, &each(&["a"]));
        assert_eq!(reset.chain, state.chain);
    }
}
