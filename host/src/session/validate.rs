//! Engine output is checked before anything is applied: a plan may only keep entries it was
//! given, each once; inserted messages must be AgentMessages; a compaction must keep an entry of
//! the current context. A rejected output leaves the transcript untouched.

use crate::runtime::contract::{AssembleResult, Compaction, ContextEntry, ContextItem, Role};

/// One element of an assembled context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AssembledItem {
    /// A transcript entry, by index: rendered byte-identically from the transcript.
    Entry(usize),
    /// A message the engine inserted (AgentMessage JSON).
    Inserted(String),
}

/// What an engine assembled for the next model call, validated.
#[derive(Debug, Clone)]
pub struct Assembly {
    /// The context in order.
    pub items: Vec<AssembledItem>,
    /// The engine's estimate of its tokens.
    pub estimated_tokens: u32,
    /// Text the runtime adds to the system prompt for this call.
    pub system_prompt_addition: Option<String>,
}

impl Assembly {
    /// How many items are transcript entries.
    pub fn kept(&self) -> usize {
        self.items
            .iter()
            .filter(|i| matches!(i, AssembledItem::Entry(_)))
            .count()
    }
    /// How many items the engine inserted.
    pub fn inserted(&self) -> usize {
        self.items.len() - self.kept()
    }
}

const MESSAGE_ROLES: &[&str] = &[
    "user",
    "assistant",
    "toolResult",
    "bashExecution",
    "custom",
    "branchSummary",
    "compactionSummary",
];

/// Token figures above this are not estimates but garbage (no model has such a window).
pub(super) const ABSURD_TOKENS: u32 = 100_000_000;

/// Refuses results that hand the host more than `max_bytes` (the `hostBytesPerCall` limit).
fn check_size(bytes: usize, max_bytes: usize) -> Result<(), String> {
    if bytes > max_bytes {
        return Err(format!(
            "it hands the host {bytes} bytes, over the engine's limit of {max_bytes} (plugins.entries.<id>.limits.{})",
            crate::runtime::limits::HOST_BYTES_PER_CALL.key
        ));
    }
    Ok(())
}

pub(super) fn assembly(
    given: &[ContextEntry],
    transcript_len: usize,
    result: AssembleResult,
    max_bytes: usize,
) -> Result<Assembly, String> {
    let handed: usize = result
        .items
        .iter()
        .map(|item| match item {
            ContextItem::Keep(_) => 4,
            ContextItem::Insert(json) => json.len(),
        })
        .sum::<usize>()
        + result
            .system_prompt_addition
            .as_ref()
            .map_or(0, String::len);
    check_size(handed, max_bytes)?;
    // Per transcript entry: not given, given, or given and kept.
    const GIVEN: u8 = 1;
    const KEPT: u8 = 2;
    let mut state = vec![0u8; transcript_len];
    for entry in given {
        if let Some(slot) = state.get_mut(entry.entry as usize) {
            *slot = GIVEN;
        }
    }
    let mut items = Vec::with_capacity(result.items.len());
    for (position, item) in result.items.into_iter().enumerate() {
        match item {
            ContextItem::Keep(r) => {
                let index = r as usize;
                match state.get(index).copied() {
                    Some(GIVEN) => state[index] = KEPT,
                    Some(KEPT) => {
                        return Err(format!("item {position} keeps entry {r} a second time"));
                    }
                    _ => {
                        return Err(format!(
                            "item {position} keeps entry {r}, which is not in the context it was given"
                        ));
                    }
                }
                items.push(AssembledItem::Entry(index));
            }
            ContextItem::Insert(json) => {
                check_message(&json).map_err(|problem| {
                    format!("item {position} inserts an invalid message: {problem}")
                })?;
                items.push(AssembledItem::Inserted(json));
            }
        }
    }
    if result.estimated_tokens > ABSURD_TOKENS {
        return Err(format!(
            "estimated-tokens {} is not a plausible token count",
            result.estimated_tokens
        ));
    }
    Ok(Assembly {
        items,
        estimated_tokens: result.estimated_tokens,
        system_prompt_addition: result.system_prompt_addition,
    })
}

fn check_message(json: &str) -> Result<(), String> {
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("not JSON: {e}"))?;
    let role = value
        .get("role")
        .and_then(|r| r.as_str())
        .ok_or("no string `role` field")?;
    if !MESSAGE_ROLES.contains(&role) {
        return Err(format!(
            "unknown role `{role}` (expected one of {})",
            MESSAGE_ROLES.join(", ")
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
        assembly(given, len, result, CAP)
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
        assert_eq!(out.items[1], AssembledItem::Entry(3));
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
