//! Engine output is checked before anything is applied, and a rejected output leaves the
//! transcript untouched. A plan arrives read by the runtime, whatever the engine's contract
//! version: runs of positions inside the context it was made for, no entry kept twice. What is
//! left to check is the host's own: what the engine hands over fits the engine's limit, inserted
//! messages are AgentMessages, figures are plausible; and a compaction must keep an entry of the
//! current context.
//!
//! A valid plan becomes an [`Assembly`]: the runs over the context the plan was made for
//! (shared, not copied) and the inserted messages, so a pass-through of any length is one run.

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

/// What a plan hands the host, counted as if each kept entry were a reference of its own
/// (however few runs they came as).
fn handed_bytes(result: &AssembleResult) -> usize {
    (result.items.iter())
        .map(|item| match item {
            ContextItem::KeepPositions { first, last } => {
                4 * (u64::from(last.saturating_sub(*first)) as usize + 1)
            }
            ContextItem::Insert(json) => json.len(),
        })
        .sum::<usize>()
        + (result.system_prompt_addition.as_ref()).map_or(0, String::len)
}

/// Checks the plan `result` made over `context` (of `context_revision`), as the runtime read it.
pub(super) fn assembly(
    context: &Arc<Context>,
    context_revision: u64,
    result: AssembleResult,
    max_bytes: usize,
) -> Result<Assembly, String> {
    check_size(handed_bytes(&result), max_bytes)?;
    let (parts, len) = parts(result.items)?;
    if result.estimated_tokens > ABSURD_TOKENS {
        return Err(format!(
            "estimated-tokens {} is not a plausible token count",
            result.estimated_tokens
        ));
    }
    Ok(Assembly {
        context: context.clone(),
        context_revision,
        parts,
        len,
        estimated_tokens: result.estimated_tokens,
        system_prompt_addition: result.system_prompt_addition,
    })
}

/// The plan's runs and its messages, each message checked, and how many items they are. A
/// refusal names the item as the runtime counts them (a run as one item per entry).
fn parts(items: Vec<ContextItem>) -> Result<(Vec<Part>, usize), String> {
    let mut parts = Vec::with_capacity(items.len());
    let mut position = 0usize;
    for item in items {
        match item {
            ContextItem::KeepPositions { first, last } => {
                parts.push(Part::Kept {
                    start: first,
                    end: last + 1,
                });
                position += (last - first) as usize + 1;
            }
            ContextItem::Insert(json) => {
                check_message(&json).map_err(|problem| {
                    format!("item {position} inserts an invalid message: {problem}")
                })?;
                parts.push(Part::Inserted(json.into()));
                position += 1;
            }
        }
    }
    Ok((parts, position))
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

    fn capped_assembly(given: &[ContextEntry], result: AssembleResult) -> Result<Assembly, String> {
        let context = Arc::new(Context {
            entries: given.to_vec(),
            tool_names: Vec::new(),
        });
        assembly(&context, 1, result, CAP)
    }

    fn capped_compaction(context: &[ContextEntry], c: &Compaction) -> Result<(), String> {
        compaction(context, c, CAP)
    }

    #[test]
    fn results_over_the_host_bytes_limit_are_refused() {
        let big = format!(r#"{{"role":"user","content":"{}"}}"#, "x".repeat(CAP));
        let err = capped_assembly(&[], result(vec![ContextItem::Insert(big)])).unwrap_err();
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

    fn run(first: u32, last: u32) -> ContextItem {
        ContextItem::KeepPositions { first, last }
    }

    #[test]
    fn runs_and_messages_read_as_their_items() {
        let given = entries(&[9, 1, 2, 3, 4]);
        let note = || ContextItem::Insert(r#"{"role":"user","content":"note"}"#.into());
        let out = capped_assembly(&given, result(vec![run(0, 1), note(), run(2, 4)])).unwrap();
        let items: Vec<_> = out.items().collect();
        assert_eq!(items.len(), 6);
        assert_eq!(items[0], AssembledItem::Entry(9));
        assert!(matches!(items[2], AssembledItem::Inserted(_)));
        assert_eq!(items[5], AssembledItem::Entry(4));
        assert_eq!((out.len(), out.kept(), out.inserted()), (6, 5, 1));
        for skip in 0..=6 {
            assert_eq!(out.items().skip(skip).collect::<Vec<_>>(), items[skip..]);
        }
        // Runs in any order read in the plan's order.
        let swapped = capped_assembly(&given, result(vec![run(3, 4), run(0, 0)])).unwrap();
        let swapped: Vec<_> = swapped.items().collect();
        assert_eq!(swapped, [3, 4, 9].map(AssembledItem::Entry));
        let err = capped_assembly(
            &given,
            result(vec![run(0, 1), ContextItem::Insert("x".into())]),
        )
        .unwrap_err();
        assert!(err.starts_with("item 2 inserts"), "{err}");
    }

    #[test]
    fn an_assembly_extends_an_earlier_one_only_when_its_runs_do() {
        let given = entries(&[1, 2, 3, 4]);
        let note = || ContextItem::Insert(r#"{"role":"user","content":"note"}"#.into());
        let earlier = capped_assembly(&given, result(vec![run(0, 0), note(), run(1, 2)])).unwrap();
        let shape = earlier.shape();
        let later = capped_assembly(&given, result(vec![run(0, 0), note(), run(1, 3)])).unwrap();
        assert_eq!(later.extension_of(&shape), Some(4));
        let more =
            capped_assembly(&given, result(vec![run(0, 0), note(), run(1, 2), note()])).unwrap();
        assert_eq!(more.extension_of(&shape), Some(4));
        for other in [
            vec![run(0, 0), note(), run(2, 3)],
            vec![run(0, 1), note(), run(2, 3)],
            vec![note(), run(0, 0), note(), run(1, 3)],
            vec![run(0, 0), note()],
        ] {
            let other = capped_assembly(&given, result(other)).unwrap();
            assert_eq!(other.extension_of(&shape), None, "{other:?}");
        }
        assert_eq!(later.extension_of(&AssemblyShape::default()), None);
    }

    #[test]
    fn inserted_messages_must_be_agent_messages() {
        let given = entries(&[]);
        for (json, problem) in [
            ("nope", "not JSON"),
            (r#"{"content":"x"}"#, "no string `role`"),
            (r#"{"role":"system"}"#, "unknown role `system`"),
        ] {
            let err = capped_assembly(&given, result(vec![ContextItem::Insert(json.into())]))
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
