//! `sliding-window`: a context engine that keeps the newest messages that fit a token budget.
//!
//! Written only against `ctxhost-sdk`, the way an outside author would. The window selection is
//! a plain function ([`select_window`]) so it can be unit-tested natively; the engine itself
//! reads its configuration once and turns the selection into a plan, whose kept window is one
//! `keep-range` item (contract 0.2) however many entries it spans.
//!
//! Configuration (`plugins.entries.sliding-window.config`):
//! - `maxTokens` (optional): a cap on the assembled context, on top of the runtime's budget.
//! - `keepFirstUserMessage` (default `true`): always keep the first user message of the context
//!   (usually the task), when it fits.

use ctxhost_sdk::serde_json::Value;
use ctxhost_sdk::{
    AssembleRequest, AssembleResult, ContextEngine, ContextEntry, EngineInfo, Error, Plan, Result,
    Role, estimate_tokens, host, log,
};

/// The `customType` of the message noting what the window left out.
pub const CUSTOM_TYPE: &str = "sliding-window";

/// The engine's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Cap on the assembled context's tokens.
    pub max_tokens: Option<u32>,
    /// Keep the first user message of the context even when it falls outside the window.
    pub keep_first_user_message: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_tokens: None,
            keep_first_user_message: true,
        }
    }
}

impl Config {
    /// Reads `{"maxTokens": <u32>?, "keepFirstUserMessage": <bool>?}`; other keys are ignored.
    pub fn from_json(config: &Value) -> Result<Self> {
        let mut parsed = Config::default();
        match config.get("maxTokens") {
            None | Some(Value::Null) => {}
            Some(value) => {
                let max = value.as_u64().and_then(|max| u32::try_from(max).ok());
                parsed.max_tokens = Some(max.ok_or_else(|| {
                    Error::msg(format!(
                        "maxTokens must be an integer in 0..=4294967295, got {value}"
                    ))
                })?);
            }
        }
        match config.get("keepFirstUserMessage") {
            None | Some(Value::Null) => {}
            Some(value) => {
                parsed.keep_first_user_message = value.as_bool().ok_or_else(|| {
                    Error::msg(format!(
                        "keepFirstUserMessage must be a boolean, got {value}"
                    ))
                })?;
            }
        }
        Ok(parsed)
    }
}

/// What [`select_window`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// The positions of the entries to keep in the entries it was chosen from, ascending.
    pub kept: Vec<usize>,
    /// How many entries were left out.
    pub omitted: usize,
}

impl Window {
    /// The plan over `entries` (those the window was chosen from): the omission note first
    /// (when something was left out), then the kept entries, each run of consecutive ones as
    /// one range.
    pub fn into_plan(self, entries: &[ContextEntry]) -> Plan {
        let mut plan = Plan::with_capacity(4);
        if self.omitted > 0 {
            plan = plan.insert_custom(CUSTOM_TYPE, &omission_note(self.omitted));
        }
        let mut kept = self.kept.as_slice();
        while let Some(&start) = kept.first() {
            let run = kept
                .iter()
                .zip(start..)
                .take_while(|&(&position, expected)| position == expected)
                .count();
            plan = plan.keep_range(&entries[start..start + run]);
            kept = &kept[run..];
        }
        plan
    }
}

/// The text of the message inserted when `omitted` entries were left out.
pub fn omission_note(omitted: usize) -> String {
    format!("[sliding-window: {omitted} earlier messages omitted]")
}

/// Chooses what to keep of `entries` within `limit` tokens (`None`: keep everything).
///
/// When everything fits, everything is kept. Otherwise, with the omission note's tokens set aside:
/// 1. a leading compaction summary is kept if it fits;
/// 2. with `keep_first_user_message`, the first user message is kept if it still fits;
/// 3. the newest entries are kept while they fit, newest first, as one contiguous window
///    (stepping over entries already kept by 1 and 2);
/// 4. if anything before the window was left out, tool results at the start of the window are
///    dropped too: their tool call is gone, so they would be orphans.
pub fn select_window(
    entries: &[ContextEntry],
    limit: Option<u32>,
    keep_first_user_message: bool,
) -> Window {
    let total: u64 = entries.iter().map(|e| u64::from(e.tokens)).sum();
    let Some(limit) = limit.filter(|&limit| total > u64::from(limit)) else {
        return Window {
            kept: (0..entries.len()).collect(),
            omitted: 0,
        };
    };

    // Something will be omitted, so the note will be there: reserve its tokens (an upper bound,
    // as the count it shows is at most `entries.len()`).
    let mut budget = limit.saturating_sub(estimate_tokens(&omission_note(entries.len())));
    let mut keep = vec![false; entries.len()];
    let mut take = |i: usize, budget: &mut u32| {
        let fits = entries[i].tokens <= *budget;
        if fits {
            *budget -= entries[i].tokens;
            keep[i] = true;
        }
        fits
    };

    // 1. The leading compaction summary (the window itself never reaches back to it).
    let has_summary = entries
        .first()
        .is_some_and(|e| e.role == Role::CompactionSummary);
    if has_summary {
        take(0, &mut budget);
    }
    let floor = usize::from(has_summary);

    // 2. The first user message.
    let first_user = entries[floor..]
        .iter()
        .position(|e| e.role == Role::User)
        .map(|i| floor + i);
    let pinned_user = match first_user {
        Some(i) if keep_first_user_message && take(i, &mut budget) => Some(i),
        _ => None,
    };

    // 3. The newest entries, as one window.
    let mut start = entries.len();
    for i in (floor..entries.len()).rev() {
        if Some(i) == pinned_user {
            continue;
        }
        if !take(i, &mut budget) {
            break;
        }
        start = i;
    }

    // 4. No orphan tool results at the start of the window.
    if (floor..start).any(|i| !keep[i]) {
        for i in start..entries.len() {
            if entries[i].role != Role::ToolResult || Some(i) == pinned_user {
                break;
            }
            keep[i] = false;
        }
    }

    let kept: Vec<usize> = (0..entries.len()).filter(|&i| keep[i]).collect();
    Window {
        omitted: entries.len() - kept.len(),
        kept,
    }
}

/// The engine: the configuration, read from the host on first use.
#[derive(Debug, Default)]
pub struct SlidingWindow {
    config: Option<Config>,
}

impl SlidingWindow {
    fn config(&mut self) -> Result<Config> {
        if let Some(config) = self.config {
            return Ok(config);
        }
        let config = Config::from_json(&host::config())?;
        self.config = Some(config);
        Ok(config)
    }
}

impl ContextEngine for SlidingWindow {
    fn info() -> EngineInfo {
        EngineInfo::new(
            "sliding-window",
            "Sliding window",
            env!("CARGO_PKG_VERSION"),
        )
    }

    fn assemble(&mut self, request: AssembleRequest) -> Result<AssembleResult> {
        let config = self.config()?;
        let limit = match (request.token_budget, config.max_tokens) {
            (Some(budget), Some(max)) => Some(budget.min(max)),
            (budget, max) => budget.or(max),
        };
        let window = select_window(&request.entries, limit, config.keep_first_user_message);
        if window.omitted > 0 {
            log::debug(format!(
                "kept {} of {} entries within {} tokens",
                window.kept.len(),
                request.entries.len(),
                limit.unwrap_or_default(),
            ));
        }
        Ok(window.into_plan(&request.entries).build())
    }
}

ctxhost_sdk::export_engine!(SlidingWindow);

#[cfg(test)]
mod tests {
    use super::*;
    use ctxhost_sdk::ContextItem;
    use ctxhost_sdk::serde_json::json;

    use Role::{Assistant, CompactionSummary, ToolResult, User};

    /// Entries with refs 10, 11, 12, … so a test cannot confuse refs with positions.
    fn entries(spec: &[(Role, u32)]) -> Vec<ContextEntry> {
        spec.iter()
            .zip(10..)
            .map(|(&(role, tokens), entry)| ContextEntry::new(entry, role, tokens))
            .collect()
    }

    /// The kept entries' refs (refs are 10 + position, see `entries`).
    fn refs(window: &Window) -> Vec<u32> {
        window.kept.iter().map(|&i| 10 + i as u32).collect()
    }

    /// The omission note costs this many tokens of the limit (reserved for `n` entries).
    fn note(n: usize) -> u32 {
        estimate_tokens(&omission_note(n))
    }

    #[test]
    fn keeps_everything_without_a_limit_or_when_it_fits() {
        let context = entries(&[(User, 50), (Assistant, 50), (User, 50)]);
        for limit in [None, Some(150), Some(1000)] {
            let window = select_window(&context, limit, true);
            assert_eq!(refs(&window), [10, 11, 12]);
            assert_eq!(window.omitted, 0);
        }
    }

    #[test]
    fn keeps_the_newest_entries_that_fit() {
        let context = entries(&[
            (User, 40),
            (Assistant, 30),
            (User, 20),
            (Assistant, 25),
            (User, 5),
        ]);
        // 5 + 25 + 20 = 50 fits; + 30 does not.
        let window = select_window(&context, Some(50 + note(5)), false);
        assert_eq!(refs(&window), [12, 13, 14]);
        assert_eq!(window.omitted, 2);
    }

    #[test]
    fn keeps_the_first_user_message_and_the_summary() {
        let context = entries(&[
            (CompactionSummary, 100),
            (User, 40),
            (Assistant, 30),
            (User, 20),
            (Assistant, 25),
            (User, 5),
        ]);
        // Summary 100 and task 40, then 5 + 25 fit in the remaining 30.
        let window = select_window(&context, Some(170 + note(6)), true);
        assert_eq!(refs(&window), [10, 11, 14, 15]);
        assert_eq!(window.omitted, 2);

        // Without the first user message, its tokens go to the window.
        let window = select_window(&context, Some(170 + note(6)), false);
        assert_eq!(refs(&window), [10, 13, 14, 15]);
        assert_eq!(window.omitted, 2);

        // A summary that does not fit is left out, and the window still stops above it.
        let window = select_window(&context, Some(99 + note(6)), true);
        assert_eq!(refs(&window), [11, 13, 14, 15]);
        assert_eq!(window.omitted, 2);
    }

    #[test]
    fn the_window_steps_over_the_pinned_first_user_message() {
        let context = entries(&[(Assistant, 20), (User, 10), (Assistant, 10), (User, 10)]);
        let window = select_window(&context, Some(30 + note(4)), true);
        assert_eq!(refs(&window), [11, 12, 13]);
        assert_eq!(window.omitted, 1);
    }

    #[test]
    fn never_starts_the_window_on_an_orphan_tool_result() {
        let context = entries(&[
            (User, 10),
            (Assistant, 50),
            (ToolResult, 10),
            (ToolResult, 10),
            (Assistant, 10),
            (User, 10),
        ]);
        // The window would be 12..=15; its tool call (11) is gone, so 12 and 13 go too.
        let window = select_window(&context, Some(40 + note(6)), false);
        assert_eq!(refs(&window), [14, 15]);
        assert_eq!(window.omitted, 4);

        // With the first user message pinned the window is 13..=15: 13 is dropped as well.
        let window = select_window(&context, Some(40 + note(6)), true);
        assert_eq!(refs(&window), [10, 14, 15]);
        assert_eq!(window.omitted, 3);
    }

    #[test]
    fn a_tool_result_right_after_the_summary_is_not_an_orphan() {
        let context = entries(&[
            (CompactionSummary, 100),
            (ToolResult, 10),
            (Assistant, 10),
            (User, 10),
        ]);
        // The summary does not fit; the window reaches down to it, so nothing it follows is gone.
        let window = select_window(&context, Some(30 + note(4)), true);
        assert_eq!(refs(&window), [11, 12, 13]);
        assert_eq!(window.omitted, 1);
    }

    #[test]
    fn a_newest_entry_larger_than_the_limit_leaves_only_the_pins() {
        let context = entries(&[(User, 10), (Assistant, 10), (User, 500)]);
        let window = select_window(&context, Some(100), true);
        assert_eq!(refs(&window), [10]);
        assert_eq!(window.omitted, 2);
    }

    #[test]
    fn the_plan_starts_with_the_note_and_counts_its_tokens() {
        let context = entries(&[(User, 40), (Assistant, 30), (User, 20)]);
        let result = select_window(&context, Some(20 + note(3)), false)
            .into_plan(&context)
            .build();
        let ContextItem::Insert(note_json) = &result.items[0] else {
            panic!("expected the note first, got {:?}", result.items)
        };
        let note_message: Value = ctxhost_sdk::serde_json::from_str(note_json).unwrap();
        assert_eq!(note_message["role"], "custom");
        assert_eq!(note_message["customType"], CUSTOM_TYPE);
        assert_eq!(
            note_message["content"],
            "[sliding-window: 2 earlier messages omitted]"
        );
        assert_eq!(result.items[1..], [ContextItem::Keep(12)]);
        assert_eq!(
            result.estimated_tokens,
            20 + estimate_tokens(&omission_note(2))
        );
        assert!(result.estimated_tokens <= 20 + note(3));
    }

    #[test]
    fn each_run_of_kept_entries_is_one_range() {
        let context = entries(&[
            (CompactionSummary, 10),
            (User, 10),
            (Assistant, 500),
            (User, 10),
            (Assistant, 10),
            (User, 10),
        ]);
        let window = select_window(&context, Some(50 + note(6)), true);
        assert_eq!(refs(&window), [10, 11, 13, 14, 15]);
        let result = window.into_plan(&context).build();
        assert_eq!(
            result.items[1..],
            [
                ContextItem::KeepRange(ctxhost_sdk::KeepRange {
                    first: 10,
                    last: 11
                }),
                ContextItem::KeepRange(ctxhost_sdk::KeepRange {
                    first: 13,
                    last: 15
                }),
            ]
        );
        assert_eq!(
            result.estimated_tokens,
            50 + estimate_tokens(&omission_note(1))
        );
    }

    #[test]
    fn reads_the_config() {
        assert_eq!(Config::from_json(&json!({})).unwrap(), Config::default());
        assert_eq!(
            Config::from_json(&json!({"maxTokens": 4096, "keepFirstUserMessage": false})).unwrap(),
            Config {
                max_tokens: Some(4096),
                keep_first_user_message: false
            }
        );
        assert!(Config::from_json(&json!({"maxTokens": -1})).is_err());
        assert!(Config::from_json(&json!({"keepFirstUserMessage": "yes"})).is_err());
    }

    #[test]
    fn info_names_the_engine() {
        let info = SlidingWindow::info();
        assert_eq!(info.id, "sliding-window");
        assert!(!info.owns_compaction);
    }
}
