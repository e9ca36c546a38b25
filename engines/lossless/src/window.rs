//! Where the verbatim part of the context starts, and which summaries stand for the rest.
//!
//! Both `assemble` and `compact` cut the context the same way: the newest messages verbatim,
//! up to the recent share of what the cut aims for, starting at a leaf's first message (so every older
//! message is in a complete leaf and the cover is exact) or inside the open leaf, whose older
//! messages are then sealed into a leaf of their own. The cut never lands on a tool result:
//! a call and its results stay together.
//!
//! A cut is a [`Layout`] kept across turns: while the context fits the budget, each assemble
//! shows the same summaries and the same first verbatim message, so its request extends the
//! previous one byte for byte (a provider's prompt cache bills it at the cached rate). Only when
//! the context passes the budget is it cut again, down to [`LOW_WATER`] of it, so that such a
//! re-cut (the engine's compaction, and a cache miss) comes once in many turns.

use ctxhost_sdk::{EntryRef, Role};
use serde::{Deserialize, Serialize};

use crate::tree::{NodeKey, Tree};

/// A re-cut brings the context down to this share of the budget (at most; the verbatim part
/// gets `recentShare` of it and starts at a turn, so it often lands lower). Every re-cut
/// changes early bytes of the request and so misses the prompt cache; the headroom it leaves is
/// what the session grows into before the next one: at a 16k window, one re-cut in about 45
/// turns on pi's recorded session, one in 17 on a generated one heavy with tool output. Lower
/// would space them further but show fewer messages verbatim right after one. The high-water
/// mark is the budget itself: passing it is what forces a re-cut.
pub const LOW_WATER: f64 = 0.6;

/// What an assemble shows for the older part of the context, kept so the next one shows the
/// same and only appends the messages that arrived since.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Layout {
    /// Messages from this transcript position on are shown verbatim.
    pub tail_from: EntryRef,
    /// The summaries stand for the first `leaves` leaves: every message before `tail_from`.
    pub leaves: u32,
    /// The messages inserted for them, exactly as sent (a re-rendering must not change a
    /// byte), and their tokens.
    pub summaries: Vec<String>,
    pub summary_tokens: u64,
}

impl Layout {
    /// Whether the tree still splits at `tail_from` after `leaves` leaves: nothing sealed or
    /// rebuilt since made a leaf straddle the cut, and no message before it is left open.
    pub fn fits(&self, tree: &Tree) -> bool {
        let leaves = tree.leaves();
        let covered = self.leaves as usize;
        covered <= leaves.len()
            && covered
                .checked_sub(1)
                .is_none_or(|last| leaves[last].last < self.tail_from)
            && leaves
                .get(covered)
                .is_none_or(|next| next.first >= self.tail_from)
            && (covered < leaves.len()
                || tree
                    .open()
                    .first()
                    .is_none_or(|m| m.entry >= self.tail_from))
    }

    /// The position in `context` of the first verbatim message; `None` when the context no
    /// longer holds every message from `tail_from` on (a host compaction cut past it).
    pub fn tail_start(&self, context: &Context) -> Option<usize> {
        match context.refs.first() {
            Some(&first) if first > self.tail_from => None,
            _ => Some(context.refs.partition_point(|&r| r < self.tail_from)),
        }
    }
}

/// The context as assemble sees it: the message entries in order (the host's compaction
/// summary left out: the tree covers what it summarized) and the tokens from each to the end.
pub struct Context<'a> {
    pub refs: &'a [EntryRef],
    /// `suffix[i]` = tokens of `refs[i..]`; `suffix[refs.len()]` = 0.
    pub suffix: Vec<u64>,
}

impl<'a> Context<'a> {
    /// The columns of a request or of `context-entries`. The host puts the latest
    /// compaction's summary first, and it was written after every entry it keeps, so a first
    /// entry positioned after the second is that summary.
    pub fn new(refs: &'a [EntryRef], tokens: &[u32]) -> Self {
        let skip = usize::from(refs.len() > 1 && refs[0] > refs[1]);
        let refs = &refs[skip..];
        let tokens = tokens.get(skip..).unwrap_or(&[]);
        let mut suffix = vec![0u64; refs.len() + 1];
        for i in (0..refs.len()).rev() {
            suffix[i] = suffix[i + 1] + u64::from(tokens.get(i).copied().unwrap_or(0));
        }
        Context { refs, suffix }
    }

    pub fn len(&self) -> usize {
        self.refs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.refs.is_empty()
    }

    /// Tokens of the messages from position `i` on.
    pub fn tail_tokens(&self, i: usize) -> u64 {
        self.suffix[i]
    }

    fn position(&self, entry: EntryRef) -> Option<usize> {
        self.refs.binary_search(&entry).ok()
    }
}

/// Where the context is cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// The first message kept verbatim (a position in [`Context::refs`]; its length when none).
    pub tail_start: usize,
    /// Open messages before this transcript position must be sealed into a leaf first.
    pub seal_before: Option<EntryRef>,
    /// The leaves the summaries cover: `leaves` of them, from the first (after any seal).
    pub leaves: u32,
}

/// The cut for `recent` tokens of verbatim messages.
pub fn cut(context: &Context, tree: &Tree, recent: u64) -> Cut {
    let n = context.len();
    let leaves = tree.leaves().len() as u32;
    // Context messages from `open_start` on are in no leaf: the open ones, and any the tree
    // has not taken in (they are the newest, so they always stay in the tail).
    let first_unsummarized = match tree.open().first() {
        Some(first) => first.entry,
        None => tree.covered_through().map_or(0, |last| last + 1),
    };
    let open_start = context.refs.partition_point(|&r| r < first_unsummarized);
    let open_in_context = tree
        .open()
        .first()
        .is_none_or(|first| context.position(first.entry).is_some());
    if open_in_context && context.tail_tokens(open_start) <= recent {
        // Everything open fits: reach back over whole leaves while they fit too.
        let mut cut = Cut {
            tail_start: open_start,
            seal_before: None,
            leaves,
        };
        for leaf in tree.leaves().iter().rev() {
            match context.position(leaf.first) {
                Some(at) if context.tail_tokens(at) <= recent => {
                    cut.tail_start = at;
                    cut.leaves = leaf.index;
                }
                _ => break,
            }
        }
        return cut;
    }
    // The open messages do not all fit (or some left the context): keep the newest that do,
    // starting at a message that is not a tool result, and seal the rest.
    let starts_turn = |i: usize| {
        let open = tree.open();
        match open.binary_search_by_key(&context.refs[i], |m| m.entry) {
            Ok(at) => open[at].role != Role::ToolResult,
            Err(_) => true,
        }
    };
    let tail_start = (open_start..n)
        .find(|&i| context.tail_tokens(i) <= recent && starts_turn(i))
        .unwrap_or(n);
    let seal_before = context
        .refs
        .get(tail_start)
        .copied()
        .unwrap_or(EntryRef::MAX);
    let sealed = tree
        .open()
        .iter()
        .take_while(|m| m.entry < seal_before)
        .count();
    Cut {
        tail_start,
        seal_before: Some(seal_before),
        leaves: leaves + u32::from(sealed > 0),
    }
}

/// The messages that stand for the covered leaves within `room` tokens, oldest first: each
/// node's summary while they fit; else the oldest give way to one-line stubs; else the oldest
/// stubs to one line naming them. Returns the messages and their tokens.
pub fn summaries_within(tree: &mut Tree, keys: &[NodeKey], room: u64) -> (Vec<String>, u64) {
    let mut chosen: Vec<(String, u32)> = keys
        .iter()
        .filter_map(|&key| tree.insert_of(key).cloned())
        .collect();
    let total = |chosen: &[(String, u32)]| chosen.iter().map(|(_, t)| u64::from(*t)).sum::<u64>();
    let mut stubbed = 0;
    while total(&chosen) > room && stubbed < chosen.len() {
        if let Some(node) = tree.node(keys[stubbed]) {
            chosen[stubbed] = node.stub_message();
        }
        stubbed += 1;
    }
    if total(&chosen) <= room {
        let tokens = total(&chosen);
        return (chosen.into_iter().map(|(m, _)| m).collect(), tokens);
    }
    // Still over: the oldest stubs become one line naming them, as few as it takes.
    for dropped in 1..=chosen.len() {
        let named: Vec<String> = keys[..dropped]
            .iter()
            .map(|&(level, index)| crate::tree::node_id(level, index))
            .collect();
        let line = format!(
            "[lossless: older summaries {} left out for room; lossless_describe or lossless_expand opens them]",
            named.join(", ")
        );
        let tokens = ctxhost_sdk::estimate_tokens(&line);
        let rest = &chosen[dropped..];
        if u64::from(tokens) + total(rest) <= room {
            let message = ctxhost_sdk::custom_message(crate::tree::INSERT_TYPE, &line, 0);
            let messages = std::iter::once(message)
                .chain(rest.iter().map(|(m, _)| m.clone()))
                .collect();
            return (messages, u64::from(tokens) + total(rest));
        }
    }
    (Vec::new(), 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::Model;
    use crate::tree::LeafLimits;
    use ctxhost_sdk::testing::{TestHost, message, tool_call, tool_result};

    const LIMITS: LeafLimits = LeafLimits {
        messages: 4,
        tokens: 100_000,
    };

    /// 4 messages per leaf; every message 10 tokens; entries 0..count.
    fn tree_of(count: u32) -> Tree {
        let mut tree = Tree::new(2);
        let mut model = Model::default();
        TestHost::new().run(|| {
            for entry in 0..count {
                let text = "x".repeat(40);
                tree.add(message(entry, Role::User, &text), LIMITS, &mut model);
            }
        });
        tree
    }

    #[test]
    fn the_tail_reaches_back_over_whole_leaves_within_the_recent_share() {
        let tree = tree_of(18); // leaves 0–15, open 16, 17
        let refs: Vec<u32> = (0..18).collect();
        let tokens = vec![10; 18];
        let context = Context::new(&refs, &tokens);
        // 20 tokens: just the open messages.
        assert_eq!(
            cut(&context, &tree, 25),
            Cut {
                tail_start: 16,
                seal_before: None,
                leaves: 4
            }
        );
        // 60 tokens: the open two and the last leaf (4 × 10).
        let wide = cut(&context, &tree, 60);
        assert_eq!((wide.tail_start, wide.leaves), (12, 3));
    }

    #[test]
    fn open_messages_that_do_not_fit_are_sealed_and_tool_results_stay_with_their_call() {
        let mut tree = tree_of(4);
        let mut model = Model::default();
        TestHost::new().run(|| {
            // Leaf 0 closes when entry 4 arrives; 4–7 stay open.
            tree.add(message(4, Role::User, "go"), LIMITS, &mut model);
            tree.add(tool_call(5, "read", serde_json_path()), LIMITS, &mut model);
            tree.add(tool_result(6, "read", &"y".repeat(400)), LIMITS, &mut model);
            tree.add(message(7, Role::Assistant, "done"), LIMITS, &mut model);
        });
        let refs: Vec<u32> = (0..8).collect();
        let tokens = [10, 10, 10, 10, 1, 1, 100, 1];
        let context = Context::new(&refs, &tokens);
        let cut = cut(&context, &tree, 50);
        assert_eq!(
            cut.tail_start, 7,
            "entry 6 alone is over 50; 7 is the next turn"
        );
        assert_eq!((cut.seal_before, cut.leaves), (Some(7), 2));
    }

    fn serde_json_path() -> ctxhost_sdk::serde_json::Value {
        ctxhost_sdk::serde_json::json!({"path": "a.rs"})
    }

    #[test]
    fn messages_the_tree_has_not_taken_in_stay_in_the_tail() {
        let tree = tree_of(8); // leaf 0–3 closed when 4 arrived; 4–7 open
        let refs: Vec<u32> = (0..12).collect();
        let context = Context::new(&refs, &[10; 12]);
        let cut = cut(&context, &tree, 1_000);
        assert_eq!((cut.tail_start, cut.leaves), (0, 0), "all fits");
        let tight = super::cut(&context, &tree, 80);
        assert_eq!(
            (tight.tail_start, tight.leaves),
            (4, 1),
            "8–11 follow the open 4–7"
        );
    }

    #[test]
    fn a_layout_holds_while_the_tree_splits_at_its_cut_and_the_context_still_reaches_it() {
        let mut tree = tree_of(8); // leaf 0–3, open 4–7
        let layout = Layout {
            tail_from: 4,
            leaves: 1,
            ..Layout::default()
        };
        assert!(layout.fits(&tree));
        assert!(Layout::default().fits(&tree), "all verbatim always fits");
        let later = Layout {
            tail_from: 6,
            ..layout.clone()
        };
        assert!(!later.fits(&tree), "4 and 5 are open before the cut");

        let refs: Vec<u32> = (0..10).collect();
        let context = Context::new(&refs, &[10; 10]);
        assert_eq!(layout.tail_start(&context), Some(4));
        // A host compaction that kept from entry 6 on: 4 and 5 are gone from the context.
        let context = Context::new(&refs[6..], &[10; 4]);
        assert_eq!(layout.tail_start(&context), None);

        // Leaves closing after the cut leave it standing; one across it (a layout saved for
        // another tree) does not.
        TestHost::new().run(|| {
            tree.seal_before(6, &mut Model::default());
        });
        assert!(layout.fits(&tree), "leaf s0-1 is 4–5, after the cut at 4");
        let across = Layout {
            tail_from: 5,
            leaves: 1,
            ..Layout::default()
        };
        assert!(!across.fits(&tree), "leaf s0-1 is 4–5, across a cut at 5");
    }

    #[test]
    fn a_leading_compaction_summary_is_left_out() {
        let refs = [9, 4, 5];
        let context = Context::new(&refs, &[500, 1, 2]);
        assert_eq!(context.refs, [4, 5]);
        assert_eq!(context.tail_tokens(0), 3);
    }

    #[test]
    fn summaries_give_way_oldest_first_to_stubs_then_to_one_line() {
        let mut tree = tree_of(36); // 8 complete leaves → s3-0; 4 more messages open
        let keys = tree.cover(8);
        assert_eq!(keys, [(3, 0)]);
        let keys = [(2, 0), (1, 2), (0, 6), (0, 7)];
        let (all, all_tokens) = summaries_within(&mut tree, &keys, 100_000);
        assert_eq!(all.len(), 4);
        assert!(all[0].contains("lossless summary s2-0"));
        let (some, tokens) = summaries_within(&mut tree, &keys, all_tokens - 1);
        assert!(tokens < all_tokens && some.len() == 4);
        assert!(some[0].contains("summary left out for room"), "{}", some[0]);
        let (one, tokens) = summaries_within(&mut tree, &keys, 90);
        assert!(tokens <= 90, "{tokens}: {one:?}");
        assert!(one[0].contains("left out for room"), "{one:?}");
        let (none, tokens) = summaries_within(&mut tree, &keys, 5);
        assert_eq!((none.len(), tokens), (0, 0));
    }
}
