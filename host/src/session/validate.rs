//! Engine output is checked before anything is applied: a plan may only keep entries it was
//! given, each once; inserted messages must be AgentMessages; a compaction must keep an entry of
//! the current context. A rejected output leaves the transcript untouched.
//!
//! A valid plan becomes an [`Assembly`]: runs of kept positions over the context the plan was
//! made for (shared, not copied) and the inserted messages, so a pass-through of any length is
//! one run, checked by its ends.

use std::sync::Arc;

use ctxhost_runtime::contract::{
    AssembleResult, Compaction, Context, ContextEntry, ContextItem, Role,
};

/// One element of an assembled context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AssembledItem {
    /// A transcript entry, by index: rendered byte-identically from the transcript.
    Entry(usize),
    /// A message the engine inserted (AgentMessage JSON).
    Inserted(Arc<str>),
}

/// A stretch of an assembly: context positions `start..end` kept in a row, or one message.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Kept { start: u32, end: u32 },
    Inserted(Arc<str>),
}

/// What an engine assembled for the next model call, validated: runs of entries of the
/// context it was planned over, and the messages the engine inserted. The context is the
/// session's own, shared: holding an assembly across the session's next `assemble` makes that
/// call copy the context once (it is extended in place otherwise).
#[derive(Clone)]
pub struct Assembly {
    context: Arc<Context>,
    context_revision: u64,
    parts: Vec<Part>,
    len: usize,
    /// The engine's estimate of its tokens.
    pub estimated_tokens: u32,
    /// Text the runtime adds to the system prompt for this call.
    pub system_prompt_addition: Option<String>,
}

/// An assembly's order of runs and messages without its context: what a later assembly is
/// compared with to tell that it only appends to this one ([`Assembly::extension_of`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AssemblyShape {
    /// 0: no assembly (extended by none).
    context_revision: u64,
    parts: Vec<Part>,
    len: usize,
}

impl Assembly {
    /// The context in order.
    pub fn items(&self) -> Items<'_> {
        Items {
            context: &self.context.entries,
            parts: &self.parts,
            offset: 0,
            remaining: self.len,
        }
    }
    /// How many items the context has.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the context is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// How many items are transcript entries.
    pub fn kept(&self) -> usize {
        self.len - self.inserted()
    }
    /// How many items the engine inserted.
    pub fn inserted(&self) -> usize {
        (self.parts.iter())
            .filter(|p| matches!(p, Part::Inserted(_)))
            .count()
    }
    /// Names the context the assembly was planned over: it stays the same while the session's
    /// context only grows at its end, and changes whenever anything else changed it.
    pub fn context_revision(&self) -> u64 {
        self.context_revision
    }
    /// This assembly's shape, to compare a later one with.
    pub fn shape(&self) -> AssemblyShape {
        AssemblyShape {
            context_revision: self.context_revision,
            parts: self.parts.clone(),
            len: self.len,
        }
    }
    /// When `earlier`'s items are, provably and in order, the first items of this assembly
    /// (planned over the same context, which only grew since; the same runs and messages, the
    /// last run perhaps longer): how many they are. Work in the number of runs, not items.
    /// None when that cannot be told this way, whatever the items are.
    pub fn extension_of(&self, earlier: &AssemblyShape) -> Option<usize> {
        if earlier.context_revision == 0
            || earlier.context_revision != self.context_revision
            || earlier.parts.len() > self.parts.len()
        {
            return None;
        }
        let last = earlier.parts.len().checked_sub(1);
        let same =
            (earlier.parts.iter().zip(&self.parts).enumerate()).all(|(i, (was, now))| {
                match (was, now) {
                    _ if was == now => true,
                    (Part::Kept { start, end }, Part::Kept { start: s, end: e }) => {
                        Some(i) == last && start == s && end <= e
                    }
                    _ => false,
                }
            });
        same.then_some(earlier.len)
    }
}

impl PartialEq for Assembly {
    /// The same items, estimate and addition (whatever runs they were checked in).
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len
            && self.estimated_tokens == other.estimated_tokens
            && self.system_prompt_addition == other.system_prompt_addition
            && self.items().eq(other.items())
    }
}

impl std::fmt::Debug for Assembly {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Assembly")
            .field("items", &self.items().collect::<Vec<_>>())
            .field("estimated_tokens", &self.estimated_tokens)
            .field("system_prompt_addition", &self.system_prompt_addition)
            .finish()
    }
}

/// The items of an [`Assembly`] in order ([`Assembly::items`]); skipping is work in runs.
#[derive(Debug, Clone)]
pub struct Items<'a> {
    context: &'a [ContextEntry],
    parts: &'a [Part],
    /// Items of `parts[0]` already given.
    offset: usize,
    remaining: usize,
}

impl Iterator for Items<'_> {
    type Item = AssembledItem;

    fn next(&mut self) -> Option<AssembledItem> {
        let (part, rest) = self.parts.split_first()?;
        let item = match part {
            Part::Kept { start, end } => {
                let position = *start as usize + self.offset;
                self.offset += 1;
                if position + 1 >= *end as usize {
                    (self.parts, self.offset) = (rest, 0);
                }
                AssembledItem::Entry(self.context[position].entry as usize)
            }
            Part::Inserted(json) => {
                self.parts = rest;
                AssembledItem::Inserted(json.clone())
            }
        };
        self.remaining -= 1;
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }

    fn nth(&mut self, mut n: usize) -> Option<AssembledItem> {
        while let Some((part, rest)) = self.parts.split_first() {
            let left = match part {
                Part::Kept { start, end } => (*end - *start) as usize - self.offset,
                Part::Inserted(_) => 1,
            };
            if n < left {
                if let Part::Kept { .. } = part {
                    self.offset += n;
                    self.remaining -= n;
                    n = 0;
                }
                break;
            }
            n -= left;
            self.remaining -= left;
            (self.parts, self.offset) = (rest, 0);
        }
        if n > 0 {
            return None;
        }
        self.next()
    }
}

impl ExactSizeIterator for Items<'_> {}

/// Token figures above this are not estimates but garbage (no model has such a window).
pub(super) const ABSURD_TOKENS: u32 = 100_000_000;

/// Refuses results that hand the host more than `max_bytes` (the `hostBytesPerCall` limit).
fn check_size(bytes: usize, max_bytes: usize) -> Result<(), String> {
    if bytes > max_bytes {
        return Err(format!(
            "it hands the host {bytes} bytes, over the engine's limit of {max_bytes} (plugins.entries.<id>.limits.{})",
            ctxhost_runtime::limits::HOST_BYTES_PER_CALL.key
        ));
    }
    Ok(())
}

/// Items kept per plan item as the host counts what a plan hands it: a kept run hands as much
/// as a `keep` per entry would.
fn handed_bytes(result: &AssembleResult) -> usize {
    (result.items.iter())
        .map(|item| match item {
            ContextItem::Keep(_) => 4,
            ContextItem::KeepPositions { first, last } => {
                4 * (u64::from(last.saturating_sub(*first)) as usize + 1)
            }
            ContextItem::Insert(json) => json.len(),
        })
        .sum::<usize>()
        + (result.system_prompt_addition.as_ref()).map_or(0, String::len)
}

/// Checks the plan `result` made over `context` (of `context_revision`) for a transcript of
/// `transcript_len` entries. A plan of runs and messages whose runs do not overlap is checked
/// by the runs' ends; any other (single keeps, from engines before 0.4 or a 0.4 plan that
/// keeps some) entry by entry, and every refusal is worded by that check.
pub(super) fn assembly(
    context: &Arc<Context>,
    context_revision: u64,
    transcript_len: usize,
    result: AssembleResult,
    max_bytes: usize,
) -> Result<Assembly, String> {
    check_size(handed_bytes(&result), max_bytes)?;
    let given = &context.entries;
    let parts = match runs(given.len(), &result.items) {
        Some(()) => by_runs(result.items)?,
        None => by_entry(given, transcript_len, result.items)?,
    };
    if result.estimated_tokens > ABSURD_TOKENS {
        return Err(format!(
            "estimated-tokens {} is not a plausible token count",
            result.estimated_tokens
        ));
    }
    let len = (parts.iter())
        .map(|p| match p {
            Part::Kept { start, end } => (end - start) as usize,
            Part::Inserted(_) => 1,
        })
        .sum();
    Ok(Assembly {
        context: context.clone(),
        context_revision,
        parts,
        len,
        estimated_tokens: result.estimated_tokens,
        system_prompt_addition: result.system_prompt_addition,
    })
}

/// Some when `items` keep only runs of positions, each within the `given` rows and no two
/// overlapping: then no entry is kept twice or kept without being given.
fn runs(given: usize, items: &[ContextItem]) -> Option<()> {
    let mut ordered = true;
    let mut next = 0u64;
    for item in items {
        match item {
            ContextItem::Keep(_) => return None,
            ContextItem::Insert(_) => {}
            &ContextItem::KeepPositions { first, last } => {
                if first > last || last as usize >= given {
                    return None;
                }
                ordered &= u64::from(first) >= next;
                next = u64::from(last) + 1;
            }
        }
    }
    if ordered {
        return Some(());
    }
    let mut spans: Vec<(u32, u32)> = (items.iter())
        .filter_map(|item| match *item {
            ContextItem::KeepPositions { first, last } => Some((first, last)),
            _ => None,
        })
        .collect();
    spans.sort_unstable();
    spans
        .windows(2)
        .all(|pair| pair[0].1 < pair[1].0)
        .then_some(())
}

/// Appends kept positions `start..end` to `parts`, joined to a run they continue.
fn keep(parts: &mut Vec<Part>, start: u32, end: u32) {
    match parts.last_mut() {
        Some(Part::Kept { end: last, .. }) if *last == start => *last = end,
        _ => parts.push(Part::Kept { start, end }),
    }
}

/// A plan of runs checked by [`runs`]: only its messages remain to check. A refusal names the
/// item as the entry-by-entry check counts items (a run as one item per entry).
fn by_runs(items: Vec<ContextItem>) -> Result<Vec<Part>, String> {
    let mut parts = Vec::with_capacity(items.len());
    let mut position = 0usize;
    for item in items {
        match item {
            ContextItem::KeepPositions { first, last } => {
                keep(&mut parts, first, last + 1);
                position += (last - first) as usize + 1;
            }
            ContextItem::Insert(json) => {
                inserted(&mut parts, position, json)?;
                position += 1;
            }
            ContextItem::Keep(_) => unreachable!("a plan with single keeps is checked by entry"),
        }
    }
    Ok(parts)
}

fn inserted(parts: &mut Vec<Part>, position: usize, json: String) -> Result<(), String> {
    check_message(&json)
        .map_err(|problem| format!("item {position} inserts an invalid message: {problem}"))?;
    parts.push(Part::Inserted(json.into()));
    Ok(())
}

/// Any plan, entry by entry: a state per transcript entry (not given, given at a position, or
/// kept), each run counted as one item per entry it keeps.
fn by_entry(
    given: &[ContextEntry],
    transcript_len: usize,
    items: Vec<ContextItem>,
) -> Result<Vec<Part>, String> {
    const NOT_GIVEN: u32 = 0;
    const KEPT: u32 = u32::MAX;
    // 1 + the entry's position in `given`, or one of the two above.
    let mut state = vec![NOT_GIVEN; transcript_len];
    for (position, entry) in given.iter().enumerate() {
        if let Some(slot) = state.get_mut(entry.entry as usize) {
            *slot = position as u32 + 1;
        }
    }
    let mut parts = Vec::with_capacity(items.len());
    let mut take =
        |parts: &mut Vec<Part>, position: usize, r: u32| match state.get(r as usize).copied() {
            Some(KEPT) => Err(format!("item {position} keeps entry {r} a second time")),
            Some(NOT_GIVEN) | None => Err(format!(
                "item {position} keeps entry {r}, which is not in the context it was given"
            )),
            Some(at) => {
                state[r as usize] = KEPT;
                keep(parts, at - 1, at);
                Ok(())
            }
        };
    let mut position = 0usize;
    for item in items {
        match item {
            ContextItem::Keep(r) => {
                take(&mut parts, position, r)?;
                position += 1;
            }
            ContextItem::KeepPositions { first, last } => {
                if first > last {
                    return Err(format!(
                        "item {position} keeps positions {first} to {last}, which run backwards"
                    ));
                }
                for at in first..=last {
                    let Some(entry) = given.get(at as usize) else {
                        return Err(format!(
                            "item {position} keeps position {at}, past the {} entries of the context it was given",
                            given.len()
                        ));
                    };
                    take(&mut parts, position, entry.entry)?;
                    position += 1;
                }
            }
            ContextItem::Insert(json) => {
                inserted(&mut parts, position, json)?;
                position += 1;
            }
        }
    }
    Ok(parts)
}

fn check_message(json: &str) -> Result<(), String> {
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("not JSON: {e}"))?;
    let role = value
        .get("role")
        .and_then(|r| r.as_str())
        .ok_or("no string `role` field")?;
    if !Role::NAMES.contains(&role) {
        return Err(format!(
            "unknown role `{role}` (expected one of {})",
            Role::NAMES.join(", ")
        ));
    }
    Ok(())
}

/// A compaction may keep from any message of the current context (not the summary preamble).
pub(super) fn compaction(
    context: &[ContextEntry],
    compaction: &Compaction,
    max_bytes: usize,
) -> Result<(), String> {
    check_size(
        compaction.summary.len() + compaction.details.as_ref().map_or(0, String::len),
        max_bytes,
    )?;
    let first = compaction.first_kept_entry;
    let keeps_message = context
        .iter()
        .any(|e| e.entry == first && e.role != Role::CompactionSummary);
    if !keeps_message {
        return Err(format!(
            "first-kept-entry {first} is not a message of the current context"
        ));
    }
    if compaction.summary.trim().is_empty() {
        return Err("the summary is empty".into());
    }
    if compaction.tokens_before > ABSURD_TOKENS || compaction.tokens_after > ABSURD_TOKENS {
        return Err(format!(
            "token figures {} -> {} are not plausible",
            compaction.tokens_before, compaction.tokens_after
        ));
    }
    // A compaction that says it made the context bigger is either wrong or not a compaction;
    // either way it must not replace the history.
    if compaction.tokens_after > compaction.tokens_before {
        return Err(format!(
            "tokens-after {} is larger than tokens-before {}: a compaction must make the context smaller",
            compaction.tokens_after, compaction.tokens_before
        ));
    }
    if let Some(details) = &compaction.details {
        match serde_json::from_str::<serde_json::Value>(details) {
            Ok(v) if v.is_object() => {}
            _ => return Err("details must be a JSON object".into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAP: usize = 1 << 20;

    fn capped_assembly(
        given: &[ContextEntry],
        len: usize,
        result: AssembleResult,
    ) -> Result<Assembly, String> {
        let context = Arc::new(Context {
            entries: given.to_vec(),
            tool_names: Vec::new(),
        });
        assembly(&context, 1, len, result, CAP)
    }

    fn capped_compaction(context: &[ContextEntry], c: &Compaction) -> Result<(), String> {
        compaction(context, c, CAP)
    }

    #[test]
    fn results_over_the_host_bytes_limit_are_refused() {
        let big = format!(r#"{{"role":"user","content":"{}"}}"#, "x".repeat(CAP));
        let err = capped_assembly(&[], 0, result(vec![ContextItem::Insert(big)])).unwrap_err();
        assert!(err.contains("hostBytesPerCall"), "{err}");
    }

    fn entries(refs: &[u32]) -> Vec<ContextEntry> {
        refs.iter()
            .map(|&entry| ContextEntry {
                entry,
                role: Role::User,
                tokens: 10,
                tool: 0,
                is_error: false,
                pruned: false,
            })
            .collect()
    }

    fn result(items: Vec<ContextItem>) -> AssembleResult {
        AssembleResult {
            items,
            estimated_tokens: 20,
            system_prompt_addition: None,
        }
    }

    #[test]
    fn keeps_of_offered_entries_and_valid_inserts_pass() {
        let out = capped_assembly(
            &entries(&[1, 2, 3]),
            4,
            result(vec![
                ContextItem::Insert(r#"{"role":"user","content":"hi"}"#.into()),
                ContextItem::Keep(3),
                ContextItem::Keep(1),
            ]),
        )
        .unwrap();
        assert_eq!(out.kept(), 2);
        assert_eq!(out.inserted(), 1);
        assert_eq!(out.items().nth(1), Some(AssembledItem::Entry(3)));
    }

    fn run(first: u32, last: u32) -> ContextItem {
        ContextItem::KeepPositions { first, last }
    }

    #[test]
    fn runs_are_checked_by_their_ends_and_read_as_their_entries() {
        let given = entries(&[9, 1, 2, 3, 4]);
        let note = || ContextItem::Insert(r#"{"role":"user","content":"note"}"#.into());
        let out = capped_assembly(&given, 10, result(vec![run(0, 1), note(), run(2, 4)])).unwrap();
        let items: Vec<_> = out.items().collect();
        assert_eq!(items.len(), 6);
        assert_eq!(items[0], AssembledItem::Entry(9));
        assert!(matches!(items[2], AssembledItem::Inserted(_)));
        assert_eq!(items[5], AssembledItem::Entry(4));
        assert_eq!((out.len(), out.kept(), out.inserted()), (6, 5, 1));
        for skip in 0..=6 {
            assert_eq!(out.items().skip(skip).collect::<Vec<_>>(), items[skip..]);
        }
        // The same plan as single keeps is the same assembly.
        let singles = [9, 1].map(ContextItem::Keep).into_iter().chain([note()]);
        let singles = singles.chain([2, 3, 4].map(ContextItem::Keep)).collect();
        assert_eq!(capped_assembly(&given, 10, result(singles)).unwrap(), out);
        // Out of order runs pass; overlapping ones are refused as the entry-by-entry check words it.
        assert!(capped_assembly(&given, 10, result(vec![run(3, 4), run(0, 2)])).is_ok());
        let err = capped_assembly(&given, 10, result(vec![run(0, 2), run(2, 3)])).unwrap_err();
        assert_eq!(err, "item 3 keeps entry 2 a second time");
        let err =
            capped_assembly(&given, 10, result(vec![run(0, 0), ContextItem::Keep(9)])).unwrap_err();
        assert_eq!(err, "item 1 keeps entry 9 a second time");
        let err = capped_assembly(&given, 10, result(vec![run(4, 5)])).unwrap_err();
        assert!(err.contains("past the 5 entries"), "{err}");
        let err = capped_assembly(
            &given,
            10,
            result(vec![run(0, 1), ContextItem::Insert("x".into())]),
        )
        .unwrap_err();
        assert!(err.starts_with("item 2 inserts"), "{err}");
    }

    #[test]
    fn an_assembly_extends_an_earlier_one_only_when_its_runs_do() {
        let given = entries(&[1, 2, 3, 4]);
        let note = || ContextItem::Insert(r#"{"role":"user","content":"note"}"#.into());
        let earlier =
            capped_assembly(&given, 10, result(vec![run(0, 0), note(), run(1, 2)])).unwrap();
        let shape = earlier.shape();
        let later =
            capped_assembly(&given, 10, result(vec![run(0, 0), note(), run(1, 3)])).unwrap();
        assert_eq!(later.extension_of(&shape), Some(4));
        let more = capped_assembly(
            &given,
            10,
            result(vec![run(0, 0), note(), run(1, 2), note()]),
        )
        .unwrap();
        assert_eq!(more.extension_of(&shape), Some(4));
        for other in [
            vec![run(0, 0), note(), run(2, 3)],
            vec![run(0, 1), note(), run(2, 3)],
            vec![note(), run(0, 0), note(), run(1, 3)],
            vec![run(0, 0), note()],
        ] {
            let other = capped_assembly(&given, 10, result(other)).unwrap();
            assert_eq!(other.extension_of(&shape), None, "{other:?}");
        }
        assert_eq!(later.extension_of(&AssemblyShape::default()), None);
    }

    #[test]
    fn forged_duplicate_and_out_of_range_refs_are_rejected() {
        let given = entries(&[1, 2]);
        let err = capped_assembly(&given, 4, result(vec![ContextItem::Keep(0)])).unwrap_err();
        assert!(err.contains("entry 0"), "{err}");
        let err =
            capped_assembly(&given, 4, result(vec![ContextItem::Keep(9_999_999)])).unwrap_err();
        assert!(err.contains("9999999"), "{err}");
        let err = capped_assembly(
            &given,
            4,
            result(vec![ContextItem::Keep(1), ContextItem::Keep(1)]),
        )
        .unwrap_err();
        assert!(err.contains("second time"), "{err}");
    }

    #[test]
    fn inserted_messages_must_be_agent_messages() {
        let given = entries(&[]);
        for (json, problem) in [
            ("nope", "not JSON"),
            (r#"{"content":"x"}"#, "no string `role`"),
            (r#"{"role":"system"}"#, "unknown role `system`"),
        ] {
            let err = capped_assembly(&given, 0, result(vec![ContextItem::Insert(json.into())]))
                .unwrap_err();
            assert!(err.contains(problem), "{json}: {err}");
        }
    }

    #[test]
    fn compaction_must_keep_a_context_message() {
        let mut context = entries(&[5, 6]);
        context[0].role = Role::CompactionSummary;
        let mut c = Compaction {
            summary: "s".into(),
            first_kept_entry: 6,
            tokens_before: 100,
            tokens_after: 10,
            details: None,
        };
        assert!(capped_compaction(&context, &c).is_ok());
        c.first_kept_entry = 5;
        assert!(
            capped_compaction(&context, &c)
                .unwrap_err()
                .contains("first-kept-entry 5")
        );
        c.first_kept_entry = 77;
        assert!(capped_compaction(&context, &c).is_err());
        c.first_kept_entry = 6;
        c.tokens_after = 101;
        assert!(
            capped_compaction(&context, &c)
                .unwrap_err()
                .contains("tokens-after 101 is larger than tokens-before 100")
        );
        c.tokens_after = 10;
        c.details = Some("[1]".into());
        assert!(
            capped_compaction(&context, &c)
                .unwrap_err()
                .contains("details")
        );
    }
}
