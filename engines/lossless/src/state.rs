//! One session's engine state: the tree, its log, and the decisions of each hook, kept apart
//! from the export glue so tests run them natively against the SDK's `TestHost`.

use std::path::Path;

use ctxhost_sdk::{
    AssembleResult, CompactRequest, CompactResult, Compaction, ContextItem, EntryRef, KeepRange,
    Message, estimate_tokens, host, serde_json,
};

use crate::config::Config;
use crate::store::Store;
use crate::summary::Model;
use crate::tree::{LeafLimits, Node, Tree};
use crate::window::{self, Context, Cut, LOW_WATER, Layout};

/// Entries read per `read-entries` call while catching up with the transcript.
const READ_BATCH: usize = 128;
/// Model calls one hook may make (the host allows 16 slow imports per call by default).
const MODEL_CALLS_PER_HOOK: u32 = 4;

/// The tree of one session and where it is written.
#[derive(Debug)]
pub struct SessionState {
    pub config: Config,
    pub tree: Tree,
    store: Store,
    model: Model,
    /// What assemble shows for the older part until the context passes the budget.
    layout: Layout,
    warnings: Vec<String>,
}

impl SessionState {
    /// Opens the session's tree: its log when it reads as a tree that agrees with the
    /// transcript, else rebuilt; then caught up with the transcript's `entry_count` entries.
    pub fn open(root: &Path, session_id: &str, config: Config, entry_count: u32) -> Self {
        let store = Store::new(root, session_id, config.fan_in);
        let mut state = SessionState {
            config,
            tree: Tree::new(config.fan_in),
            store,
            model: Model::default(),
            layout: Layout::default(),
            warnings: Vec::new(),
        };
        let loaded = state.store.load();
        let had_nodes = !loaded.nodes.is_empty();
        state.warnings.extend(loaded.problem);
        if loaded.refused
            && let Err(e) = state.store.reset()
        {
            state
                .warnings
                .push(format!("{}: {e}", state.store.path().display()));
        }
        match Tree::from_nodes(config.fan_in, loaded.nodes) {
            Ok(tree) => state.tree = tree,
            Err(problem) => state.warn_and_restart(format!(
                "{}: {problem}; rebuilding from the transcript",
                state.store.path().display()
            )),
        }
        if let Some(problem) = state.disagreement_with_transcript(entry_count) {
            state.warn_and_restart(format!(
                "{}: {problem}; rebuilding from the transcript",
                state.store.path().display()
            ));
        }
        // The last instance's cut, when its tree is the one loaded: a tree rebuilt from the
        // transcript has no seals, so its leaves may not split where that cut did. Without it
        // the first assemble here re-cuts, and that turn misses the prompt cache.
        if had_nodes && state.tree.node_count() > 0 {
            state.layout = state.store.load_layout().unwrap_or_default();
        } else if let Err(e) = state.store.drop_layout() {
            let path = state.store.layout_path();
            state.warnings.push(format!("{}: {e}", path.display()));
        }
        // Parents a crash kept from the log, then what the transcript holds beyond the log.
        // No model calls here: a rebuild of a long session would need hundreds.
        state.model.allow(0);
        let condensed = state.tree.condense(&mut state.model);
        state.persist(&condensed);
        state.catch_up(entry_count);
        state
    }

    fn warn_and_restart(&mut self, warning: String) {
        self.warnings.push(warning);
        self.tree = Tree::new(self.config.fan_in);
        if let Err(e) = self.store.reset() {
            self.warnings
                .push(format!("{}: {e}", self.store.path().display()));
        }
    }

    /// Why the log cannot be about this transcript: it covers entries the transcript does not
    /// have, or its newest leaf's last entry reads back with another id.
    fn disagreement_with_transcript(&self, entry_count: u32) -> Option<String> {
        let leaf = self.tree.leaves().last()?;
        if leaf.last >= entry_count {
            return Some(format!(
                "it covers entry {} but the transcript has {entry_count} entries",
                leaf.last
            ));
        }
        match host::read_entries(&[leaf.last]) {
            Ok(read) if read.first().is_some_and(|m| m.entry_id == leaf.last_id) => None,
            Ok(read) => Some(format!(
                "entry {} is {:?} in the transcript, {:?} in the log",
                leaf.last,
                read.first().map(|m| m.entry_id.as_str()).unwrap_or(""),
                leaf.last_id
            )),
            Err(e) => Some(format!("entry {} cannot be read: {e}", leaf.last)),
        }
    }

    /// Takes in the transcript's messages after the newest one the tree holds, in batches; an
    /// entry that carries no message (a compaction, a model change) is skipped.
    fn catch_up(&mut self, entry_count: u32) {
        let newest = self
            .tree
            .open()
            .last()
            .map(|m| m.entry)
            .or(self.tree.covered_through());
        let from = newest.map_or(0, |n| n + 1);
        let refs: Vec<EntryRef> = (from..entry_count).collect();
        for batch in refs.chunks(READ_BATCH) {
            let messages = match host::read_entries(batch) {
                Ok(messages) => messages,
                // One of them is not a message: read them one by one, skipping it.
                Err(_) => batch
                    .iter()
                    .filter_map(|&r| host::read_entries(&[r]).ok()?.pop())
                    .collect(),
            };
            for message in messages {
                self.take(message);
            }
        }
    }

    fn limits(&self) -> LeafLimits {
        LeafLimits {
            messages: self.config.leaf_messages,
            tokens: u64::from(self.config.leaf_tokens),
        }
    }

    fn take(&mut self, message: Message) {
        let limits = self.limits();
        let written = self.tree.add(message, limits, &mut self.model);
        self.persist(&written);
    }

    fn persist(&mut self, nodes: &[Node]) {
        if let Err(e) = self.store.append(nodes) {
            // The tree in memory is whole; a later instance rebuilds what the log lacks.
            self.warnings.push(format!(
                "{}: cannot append {} nodes: {e}",
                self.store.path().display(),
                nodes.len()
            ));
        }
    }

    /// A message appended to the transcript.
    pub fn ingest(&mut self, message: Message) {
        self.model.allow(MODEL_CALLS_PER_HOOK);
        self.take(message);
    }

    /// Warnings since the last call, for the host's log.
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// Cuts the context for `available` tokens, sealing open messages when the cut needs it.
    fn cut(&mut self, context: &Context, available: u64) -> Cut {
        let recent = (available as f64 * self.config.recent_share) as u64;
        let cut = window::cut(context, &self.tree, recent);
        if let Some(before) = cut.seal_before {
            self.model.allow(MODEL_CALLS_PER_HOOK);
            let written = self.tree.seal_before(before, &mut self.model);
            self.persist(&written);
        }
        cut
    }

    /// A new layout within `target` tokens: the newest messages verbatim up to the recent
    /// share of it, the summaries that fit the rest. Saved, so a fresh instance shows it too.
    /// Returns where the verbatim part starts in `context`.
    fn recut(&mut self, context: &Context, target: u64) -> usize {
        let cut = self.cut(context, target);
        let keys = self.tree.cover(cut.leaves);
        let tail = context.tail_tokens(cut.tail_start);
        let room = target.saturating_sub(tail);
        let (summaries, summary_tokens) = window::summaries_within(&mut self.tree, &keys, room);
        // Nothing verbatim: what arrives next is, so the cut is just past the newest message.
        let tail_from = context
            .refs
            .get(cut.tail_start)
            .copied()
            .unwrap_or_else(|| {
                let newest = context.refs.last().copied();
                let open = self.tree.open().last().map(|m| m.entry);
                newest.max(open).map_or(0, |n| n + 1)
            });
        self.layout = Layout {
            tail_from,
            leaves: cut.leaves,
            summaries,
            summary_tokens,
        };
        self.save_layout();
        cut.tail_start
    }

    fn save_layout(&mut self) {
        if let Err(e) = self.store.save_layout(&self.layout) {
            self.warnings.push(format!(
                "{}: cannot save the layout: {e}",
                self.store.layout_path().display()
            ));
        }
    }

    /// Back to the layout before a compaction that was not made, when the tree still splits
    /// where it did (the compaction's seal may have moved the cut past it).
    fn restore(&mut self, previous: Layout) {
        if previous.fits(&self.tree) && previous != self.layout {
            self.layout = previous;
            self.save_layout();
        }
    }

    /// The plan: the summaries of the kept layout, then every message from its cut on
    /// verbatim as one range, so the request extends the previous turn's. When that passes
    /// `budget` tokens (or the layout no longer applies), a re-cut down to [`LOW_WATER`] of
    /// it. Always within `budget`.
    pub fn assemble(&mut self, refs: &[EntryRef], tokens: &[u32], budget: u32) -> AssembleResult {
        let context = Context::new(refs, tokens);
        let available = u64::from(budget);
        let kept = self.layout.tail_start(&context).filter(|&start| {
            self.layout.fits(&self.tree)
                && self.layout.summary_tokens + context.tail_tokens(start) <= available
        });
        let tail_start = match kept {
            Some(start) => start,
            None => self.recut(&context, low_water(available)),
        };
        let tail = context.tail_tokens(tail_start);
        let mut items: Vec<ContextItem> = (self.layout.summaries.iter().cloned())
            .map(ContextItem::Insert)
            .collect();
        match &context.refs[tail_start..] {
            [] => {}
            [only] => items.push(ContextItem::Keep(*only)),
            [first, .., last] => items.push(ContextItem::KeepRange(KeepRange {
                first: *first,
                last: *last,
            })),
        }
        AssembleResult {
            items,
            estimated_tokens: u32::try_from(self.layout.summary_tokens + tail).unwrap_or(u32::MAX),
            system_prompt_addition: None,
        }
    }

    /// A compaction is a re-cut of the layout for the request's budget, which the following
    /// assembles then keep: the summary is the covering nodes' text (every older message stays
    /// reachable from it), the first kept entry the first verbatim message. No model call: the
    /// summaries exist already.
    pub fn compact(&mut self, request: &CompactRequest) -> CompactResult {
        let columns = host::context_entries();
        let context = Context::new(columns.refs(), columns.tokens());
        if context.is_empty() {
            return not_compacted("the context holds no messages");
        }
        let budget = request.token_budget.unwrap_or(request.context_window);
        let previous = self.layout.clone();
        // A compaction must keep a message; the newest is covered by a leaf already if the
        // cut sealed everything, and keeping it too loses nothing.
        let tail_start = self
            .recut(&context, low_water(u64::from(budget)))
            .min(context.len() - 1);
        if tail_start == 0 {
            self.restore(previous);
            return not_compacted("every message in the context is among the recent ones kept");
        }
        let keys = self.tree.cover(self.layout.leaves);
        let texts: Vec<String> = keys
            .iter()
            .filter_map(|&key| self.tree.node(key).map(Node::insert_text))
            .collect();
        let summary = format!(
            "Earlier messages are kept in lossless summary nodes, oldest first; lossless_expand opens a node's children, down to the original messages.\n\n{}",
            texts.join("\n\n")
        );
        let tokens_before = request
            .current_tokens
            .unwrap_or_else(|| u32::try_from(context.tail_tokens(0)).unwrap_or(u32::MAX));
        let tail = context.tail_tokens(tail_start);
        let tokens_after = u64::from(estimate_tokens(&summary)) + tail;
        let tokens_after = u32::try_from(tokens_after).unwrap_or(u32::MAX);
        if tokens_after >= tokens_before {
            self.restore(previous);
            return not_compacted(&format!(
                "the summaries and the recent messages ({tokens_after} tokens) would not be smaller than the context ({tokens_before})"
            ));
        }
        let nodes: Vec<String> = keys
            .iter()
            .map(|&(level, index)| crate::tree::node_id(level, index))
            .collect();
        let details = serde_json::json!({"lossless": {"nodes": nodes}});
        CompactResult {
            ok: true,
            compacted: true,
            reason: None,
            compaction: Some(Compaction {
                summary,
                first_kept_entry: context.refs[tail_start],
                tokens_before,
                tokens_after,
                details: Some(details.to_string()),
            }),
        }
    }
}

/// What a re-cut aims for, out of `budget` tokens.
fn low_water(budget: u64) -> u64 {
    (budget as f64 * LOW_WATER) as u64
}

fn not_compacted(reason: &str) -> CompactResult {
    CompactResult {
        ok: true,
        compacted: false,
        reason: Some(format!("nothing to compact: {reason}")),
        compaction: None,
    }
}
