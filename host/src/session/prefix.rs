//! How much of each request repeats the previous one from its first byte (what a provider's
//! prompt cache bills at the cached rate), measured per turn, and the request in brief that a
//! later process compares its first turn with.

use std::hash::{Hash, Hasher};

use serde::{Deserialize, Serialize};

use super::{AssembledItem, Assembly, AssemblyShape, Session};

/// How much of a request is a byte-identical prefix of the previous turn's request: what a
/// provider's prompt cache can bill at the cached rate. Measured over the tools the runtime
/// offers (by name: their schemas are the runtime's), the engine's system-prompt addition, then
/// the messages in order; the runtime's own prompt is taken as stable.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct Prefix {
    /// The previous request is an exact prefix of this one (false on a session's first turn).
    pub kept_previous: bool,
    /// Tokens of the leading part shared with the previous request.
    pub shared_tokens: u64,
    /// Tokens of this request's engine part.
    pub request_tokens: u64,
}

impl Prefix {
    /// `shared_tokens` as a share of `request_tokens` (1.0 for an empty request).
    pub fn share(&self) -> f64 {
        if self.request_tokens == 0 {
            1.0
        } else {
            self.shared_tokens as f64 / self.request_tokens as f64
        }
    }
}

/// A request in brief: its number of parts and one hash over their fingerprints, which is all
/// the next turn needs to tell whether it extends it. The ledger keeps it, so a new process (a
/// sidecar per `pi` or `openclaw agent --local` run) measures its first turn against the last.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequestDigest {
    /// Parts of the request (the tool list, the engine's addition, each message).
    pub parts: usize,
    /// The hash over their fingerprints, as 16 hex digits (exact in any JSON reader).
    pub hash: String,
}

impl RequestDigest {
    /// The digest of a request whose fingerprints chain to `chain` ([`link`]).
    fn chained(parts: usize, chain: u64) -> Self {
        Self {
            parts,
            hash: format!("{chain:016x}"),
        }
    }

    /// Whether `fingerprints` begin with the request this digest was made of. Digests written
    /// before they were chained (one hash over the fingerprints) are recognised too, so a
    /// ledger written by an earlier version still counts as the previous request.
    fn describes(&self, fingerprints: &[u64]) -> bool {
        let Some(request) = fingerprints.get(..self.parts) else {
            return false;
        };
        let chain = request.iter().fold(CHAIN_SEED, |c, &f| link(c, f));
        *self == Self::chained(self.parts, chain)
            || self.hash == format!("{:016x}", fingerprint(request))
    }
}

/// Where a request's chain of fingerprints starts.
const CHAIN_SEED: u64 = 0x9E37_79B9_7F4A_7C15;

/// The digest of a request's first parts followed by `fingerprint`: a request extended by a
/// part is digested in that part's time, not the request's.
fn link(chain: u64, fingerprint: u64) -> u64 {
    // splitmix64's finalizer: every bit of both inputs reaches every bit of the output.
    let mut z = chain.rotate_left(23) ^ fingerprint;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The previous request, one fingerprint per part: a kept entry is rendered from the append-only
/// transcript, so its index and pruned flag stand for its bytes; anything else is hashed.
#[derive(Debug, Default)]
pub(super) struct PrefixTracker {
    /// None before a session's first turn.
    previous: Option<Previous>,
}

#[derive(Debug)]
enum Previous {
    /// This process's previous turn.
    Parts(Parts),
    /// Another process's last turn, from the ledger.
    Digest(RequestDigest),
}

/// A request's parts as the tracker keeps them, extended in place when the next request only
/// appends to it.
#[derive(Debug)]
struct Parts {
    fingerprints: Vec<u64>,
    /// At `i`, the tokens of the first `i` parts (one more than the parts).
    tokens: Vec<u64>,
    /// The digest chain over `fingerprints`.
    chain: u64,
    /// How many leading parts are the tools and the addition, and the shape of the assembly
    /// after them: a request with the same leading parts and an assembly extending that shape
    /// extends this request.
    head: usize,
    shape: AssemblyShape,
}

impl Parts {
    fn new(parts: &[(u64, u32)]) -> Self {
        let mut new = Self {
            fingerprints: Vec::with_capacity(parts.len()),
            tokens: Vec::with_capacity(parts.len() + 1),
            chain: CHAIN_SEED,
            head: 0,
            shape: AssemblyShape::default(),
        };
        new.tokens.push(0);
        parts.iter().for_each(|&part| new.push(part));
        new
    }

    fn push(&mut self, (fingerprint, tokens): (u64, u32)) {
        self.fingerprints.push(fingerprint);
        let total = self.tokens.last().copied().unwrap_or(0);
        self.tokens.push(total + u64::from(tokens));
        self.chain = link(self.chain, fingerprint);
    }

    fn prefix(&self, shared: usize, kept_previous: bool) -> (Prefix, RequestDigest) {
        let prefix = Prefix {
            kept_previous,
            shared_tokens: self.tokens[shared],
            request_tokens: self.tokens[self.fingerprints.len()],
        };
        let digest = RequestDigest::chained(self.fingerprints.len(), self.chain);
        (prefix, digest)
    }
}

impl PrefixTracker {
    /// Compares `parts` (fingerprint, tokens) with the previous request and keeps them.
    fn observe(&mut self, parts: Vec<(u64, u32)>) -> (Prefix, RequestDigest) {
        let now = Parts::new(&parts);
        let fingerprints = &now.fingerprints;
        let (kept_previous, shared) = match self.previous.take() {
            None => (false, 0),
            Some(Previous::Parts(previous)) => {
                let shared = (fingerprints.iter().zip(&previous.fingerprints))
                    .take_while(|(now, before)| now == before)
                    .count();
                (shared == previous.fingerprints.len(), shared)
            }
            // Only the whole previous request can be compared: shared is all of it or nothing.
            Some(Previous::Digest(digest)) => {
                let kept = digest.describes(fingerprints);
                (kept, if kept { digest.parts } else { 0 })
            }
        };
        let observed = now.prefix(shared, kept_previous);
        self.previous = Some(Previous::Parts(now));
        observed
    }

    /// [`PrefixTracker::observe`] for a request of `head` parts (the tools, the addition), then
    /// `assembly`'s items, each made a part by `part`. When the previous request had the same
    /// head and `assembly` extends its assembly, only the appended items are made parts; the
    /// figures are the ones comparing every part gives.
    fn observe_assembly(
        &mut self,
        head: Vec<(u64, u32)>,
        assembly: &Assembly,
        part: impl Fn(AssembledItem) -> (u64, u32),
    ) -> (Prefix, RequestDigest) {
        let extends = self.extended_items(&head, assembly);
        let (observed, mut now) = match (extends, self.previous.take()) {
            (Some(items), Some(Previous::Parts(mut previous))) => {
                let shared = previous.fingerprints.len();
                (assembly.items().skip(items)).for_each(|item| previous.push(part(item)));
                (previous.prefix(shared, true), previous)
            }
            (_, previous) => {
                self.previous = previous;
                let parts = head.iter().copied().chain(assembly.items().map(part));
                let observed = self.observe(parts.collect());
                let Some(Previous::Parts(now)) = self.previous.take() else {
                    unreachable!("observe keeps the request it saw")
                };
                (observed, now)
            }
        };
        now.head = head.len();
        now.shape = assembly.shape();
        self.previous = Some(Previous::Parts(now));
        observed
    }

    /// How many items of `assembly` the previous request's assembly held, when `assembly`
    /// extends it after the same `head`.
    fn extended_items(&self, head: &[(u64, u32)], assembly: &Assembly) -> Option<usize> {
        match &self.previous {
            Some(Previous::Parts(previous))
                if previous.head == head.len()
                    && (previous.fingerprints.iter().zip(head))
                        .all(|(was, (now, _))| was == now) =>
            {
                assembly.extension_of(&previous.shape)
            }
            _ => None,
        }
    }

    /// Takes another process's last request (from the ledger) as the previous one, unless this
    /// process has had a turn already.
    pub(super) fn resume(&mut self, digest: RequestDigest) {
        self.previous.get_or_insert(Previous::Digest(digest));
    }
}

/// A kept entry's fingerprint without hashing (this runs for every entry of every assemble):
/// its index and pruned flag under a tag that keeps it apart from the hashed parts.
fn entry_fingerprint(index: usize, pruned: bool) -> u64 {
    const ENTRY_TAG: u64 = 0xE7 << 56;
    ENTRY_TAG | (index as u64) << 1 | u64::from(pruned)
}

fn fingerprint(value: impl Hash) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

impl Session {
    /// Measures the next turn's prefix against `digest`, another process's last request of this
    /// session (its ledger's), when this session has had no turn yet.
    pub fn resume_prefix(&mut self, digest: RequestDigest) {
        self.prefix.resume(digest);
    }

    /// The prefix this assembly, after these tools, shares with the previous turn's.
    pub(super) fn observe_prefix(
        &mut self,
        tools: &[String],
        assembly: &Assembly,
    ) -> (Prefix, RequestDigest) {
        let transcript = self.shared.read();
        let entries = transcript.entries();
        let part = |item| match item {
            AssembledItem::Entry(index) => {
                let entry = &entries[index];
                (entry_fingerprint(index, entry.is_pruned()), entry.tokens())
            }
            AssembledItem::Inserted(json) => (
                fingerprint(("inserted", &*json)),
                ctxhost_transcript::tokens::estimate_text(&json),
            ),
        };
        (self.prefix).observe_assembly(head_parts(tools, assembly), assembly, part)
    }
}

/// What a request sends before the assembled messages, as parts: the tools (first in a
/// provider's request: a changed list changes everything after), then the engine's addition.
fn head_parts(tools: &[String], assembly: &Assembly) -> Vec<(u64, u32)> {
    let tools = (!tools.is_empty()).then(|| {
        let names: usize = tools.iter().map(String::len).sum();
        (
            fingerprint(("tools", tools)),
            u32::try_from(names / 4).unwrap_or(u32::MAX),
        )
    });
    let addition = assembly.system_prompt_addition.iter().map(|text| {
        (
            fingerprint(("addition", text)),
            ctxhost_transcript::tokens::estimate_text(text),
        )
    });
    tools.into_iter().chain(addition).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::Arc;

    use ctxhost_runtime::contract::{AssembleResult, Context, ContextEntry, ContextItem, Role};

    /// An assembly of `items` over a context of `rows` entries (entry `i` of `i + 1` tokens).
    fn planned(rows: u32, revision: u64, items: &[ContextItem]) -> Assembly {
        let entries = (0..rows).map(|entry| ContextEntry {
            entry,
            role: Role::User,
            tokens: entry + 1,
            tool: 0,
            is_error: false,
            pruned: false,
        });
        let context = Arc::new(Context {
            entries: entries.collect(),
            tool_names: Vec::new(),
        });
        let result = AssembleResult {
            items: items.to_vec(),
            estimated_tokens: 0,
            system_prompt_addition: None,
        };
        super::super::validate::assembly(&context, revision, result, usize::MAX).unwrap()
    }

    fn item_part(item: AssembledItem) -> (u64, u32) {
        match item {
            AssembledItem::Entry(i) => (entry_fingerprint(i, false), i as u32 + 1),
            AssembledItem::Inserted(json) => (fingerprint(("inserted", &*json)), 3),
        }
    }

    #[test]
    fn an_extended_assembly_gives_the_figures_comparing_every_part_gives() {
        let run = |first, last| ContextItem::KeepPositions { first, last };
        let note = || ContextItem::Insert(r#"{"role":"user","content":"note"}"#.into());
        let tools = vec![(77, 5)];
        let steps: Vec<(Vec<(u64, u32)>, Assembly)> = vec![
            (vec![], planned(3, 1, &[run(0, 2)])),
            (vec![], planned(4, 1, &[run(0, 3)])),
            (vec![], planned(5, 1, &[run(0, 3), note(), run(4, 4)])),
            (vec![], planned(6, 1, &[run(0, 3), note(), run(4, 5)])),
            // Another context revision (a compaction), other tools, a plan that starts later.
            (vec![], planned(6, 2, &[run(0, 5)])),
            (tools.clone(), planned(7, 2, &[run(0, 6)])),
            (tools.clone(), planned(8, 2, &[run(0, 7)])),
            (tools.clone(), planned(8, 2, &[run(1, 7)])),
            (tools, planned(9, 2, &[run(1, 8)])),
        ];
        let mut incremental = PrefixTracker::default();
        let mut whole = PrefixTracker::default();
        for (n, (head, assembly)) in steps.into_iter().enumerate() {
            let parts = head.iter().copied().chain(assembly.items().map(item_part));
            let expected = whole.observe(parts.collect());
            let got = incremental.observe_assembly(head, &assembly, item_part);
            assert_eq!(got, expected, "step {n}");
        }
    }

    fn parts(fingerprints: &[u64]) -> Vec<(u64, u32)> {
        fingerprints.iter().map(|&f| (f, 10)).collect()
    }

    #[test]
    fn an_appended_turn_keeps_the_previous_request() {
        let mut tracker = PrefixTracker::default();
        let first = tracker.observe(parts(&[1, 2])).0;
        assert!(!first.kept_previous, "nothing to keep on the first turn");
        assert_eq!(first.shared_tokens, 0);
        let second = tracker.observe(parts(&[1, 2, 3])).0;
        assert!(second.kept_previous);
        assert_eq!((second.shared_tokens, second.request_tokens), (20, 30));
    }

    #[test]
    fn a_changed_early_part_breaks_the_prefix_where_it_changed() {
        let mut tracker = PrefixTracker::default();
        tracker.observe(parts(&[9, 1, 2]));
        let changed = tracker.observe(parts(&[8, 1, 2, 3])).0;
        assert!(!changed.kept_previous);
        assert_eq!(changed.shared_tokens, 0);
        let tail = tracker.observe(parts(&[8, 1, 7])).0;
        assert!(
            !tail.kept_previous,
            "a shorter request cannot extend the previous"
        );
        assert_eq!(tail.shared_tokens, 20);
    }

    #[test]
    fn an_empty_first_request_is_kept_by_the_next() {
        let mut tracker = PrefixTracker::default();
        assert!(!tracker.observe(Vec::new()).0.kept_previous);
        assert!(tracker.observe(parts(&[1])).0.kept_previous);
    }

    #[test]
    fn another_processs_last_request_is_compared_by_its_digest() {
        let mut first = PrefixTracker::default();
        let (_, digest) = first.observe(parts(&[1, 2, 3]));
        let mut next = PrefixTracker::default();
        next.resume(digest.clone());
        let (grown, _) = next.observe(parts(&[1, 2, 3, 4]));
        assert!(grown.kept_previous);
        assert_eq!(grown.shared_tokens, 30);
        let mut changed = PrefixTracker::default();
        changed.resume(digest.clone());
        let (prefix, _) = changed.observe(parts(&[1, 9, 3, 4]));
        assert!(!prefix.kept_previous);
        assert_eq!(
            prefix.shared_tokens, 0,
            "a digest cannot say how much was shared"
        );
        // A digest an earlier version wrote (one hash over the fingerprints) is recognised.
        let mut upgraded = PrefixTracker::default();
        upgraded.resume(RequestDigest {
            parts: 3,
            hash: format!("{:016x}", fingerprint(&[1u64, 2, 3][..])),
        });
        let (prefix, _) = upgraded.observe(parts(&[1, 2, 3, 4]));
        assert!(prefix.kept_previous);
        // A process that had a turn already compares with that one.
        let mut busy = PrefixTracker::default();
        busy.observe(parts(&[7]));
        busy.resume(digest);
        assert!(busy.observe(parts(&[7, 8])).0.kept_previous);
    }
}
