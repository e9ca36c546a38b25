//! The context of a transcript: the active branch, what boundary loading sends the model from
//! it (kept current as entries are appended), its size in tokens, and its compactions.

use super::*;

impl Transcript {
    /// Root..leaf by parentId.
    pub fn active_branch(&self) -> Vec<usize> {
        let mut out = Vec::new();
        let mut cur = self.leaf();
        // Links were checked acyclic; the bound only guards against future mistakes.
        while let Some(i) = cur
            && out.len() <= self.entries.len()
        {
            out.push(i);
            cur = self.entries[i].parent;
        }
        out.reverse();
        out
    }

    pub(super) fn latest_compaction(&self, branch: &[usize]) -> Option<usize> {
        branch
            .iter()
            .rposition(|&i| self.entries[i].entry_type() == "compaction")
    }

    /// Position in `branch[..before]` of the first entry kept by the compaction at `branch[p]`.
    pub(super) fn first_kept_position(&self, branch: &[usize], p: usize) -> Option<usize> {
        let k = self.entries[branch[p]].first_kept?;
        branch[..p].iter().position(|&i| i == k)
    }

    pub(super) fn is_message_context(&self, i: usize) -> bool {
        let e = &self.entries[i];
        e.context_role().is_some() && e.entry_type() != "compaction"
    }

    /// What is sent to the model, by boundary loading: with a compaction on the active branch,
    /// the latest compaction followed by the context entries from its first kept entry on
    /// (older compactions are not repeated); otherwise every context entry of the branch.
    pub fn context(&self) -> &[usize] {
        &self.context
    }

    /// Changes whenever the context changes other than by appending to it: a compaction moved
    /// its boundary (and may have pruned entries), or its entries were re-counted. While it
    /// stays the same, what a reader derived from `context()[..n]` still holds, so a reader
    /// can keep that and look only at what was appended since.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Replaces the context (recomputed from the branch), its token total and usage anchor.
    pub(crate) fn set_context(&mut self, context: Vec<usize>) {
        self.context = context;
        self.recount_context();
    }

    /// The context's token total and usage anchor, from its entries as they are now.
    pub(crate) fn recount_context(&mut self) {
        self.context_total = self.sum_of_context();
        let boundary = (self.context.first().copied())
            .filter(|&i| self.entries[i].entry_type() == "compaction");
        let mut through = self.context_total;
        self.usage_anchor = None;
        for (position, &i) in self.context.iter().enumerate().rev() {
            let e = &self.entries[i];
            if e.usage_total().is_some() && boundary.is_none_or(|b| i > b) {
                self.usage_anchor = Some((position, through));
                return;
            }
            through -= u64::from(e.tokens());
        }
    }

    /// Extends the context by entry `index`, appended last (so after any compaction).
    pub(crate) fn push_context(&mut self, index: usize) {
        self.context.push(index);
        let e = &self.entries[index];
        self.context_total += u64::from(e.tokens());
        if e.usage_total().is_some() {
            self.usage_anchor = Some((self.context.len() - 1, self.context_total));
        }
    }

    /// The tokens of the context's entries, summed now.
    pub(crate) fn sum_of_context(&self) -> u64 {
        (self.context.iter())
            .map(|&i| u64::from(self.entries[i].tokens()))
            .sum()
    }

    /// [`Transcript::context`] from the active branch, for when the branch's shape changed.
    pub(super) fn walk_context(&self) -> Vec<usize> {
        let branch = self.active_branch();
        let Some(p) = self.latest_compaction(&branch) else {
            return branch
                .into_iter()
                .filter(|&i| self.is_message_context(i))
                .collect();
        };
        let mut out = Vec::with_capacity(branch.len() + 1);
        out.push(branch[p]);
        // Like pi: a first kept entry not found before the boundary keeps only what follows it.
        let from = self.first_kept_position(&branch, p).unwrap_or(p + 1);
        out.extend(
            branch[from..]
                .iter()
                .copied()
                .filter(|&i| i != branch[p] && self.is_message_context(i)),
        );
        out
    }

    /// Context size by the TRANSCRIPTS.md rule over `context()`: the last valid assistant
    /// usage plus estimates of what follows it; estimates of everything without one.
    ///
    /// Recorded usage stands for the context only while it measured this context: usage
    /// recorded before the latest compaction measured the uncompacted context, and with a
    /// window set (`set_context_window`) a latest usage above it was measured at another,
    /// larger window (a replayed or moved session keeps its original figures); in both cases
    /// the context is estimated instead.
    pub fn context_tokens(&self) -> u64 {
        match self.window {
            Some(w) => self.context_tokens_in_window(w),
            None => self.context_tokens_with(u64::MAX),
        }
    }

    /// [`Transcript::context_tokens`] for a context window of `window` tokens.
    pub fn context_tokens_in_window(&self, window: u64) -> u64 {
        self.context_tokens_with(window)
    }

    fn context_tokens_with(&self, window: u64) -> u64 {
        let Some((position, through)) = self.usage_anchor else {
            return self.context_total;
        };
        let anchor = &self.entries[self.context[position]];
        match anchor.usage_total() {
            // The latest measurement does not fit this window: the figures on this stretch
            // are another window's, so none of them is used.
            Some(total) if total > window => self.context_total,
            Some(total) => total.saturating_add(self.context_total.saturating_sub(through)),
            None => self.context_total,
        }
    }

    /// Measure `context_tokens` for this context window from now on (None: any window).
    pub fn set_context_window(&mut self, window: Option<u64>) {
        self.window = window;
    }

    /// The AgentMessage of entry `index` as the model gets it: pruned tool results carry the
    /// placeholder, everything else is [`Entry::message_json`]. "" for an index out of range.
    pub fn context_message_json(&self, index: usize) -> std::borrow::Cow<'_, str> {
        self.entries
            .get(index)
            .map_or(std::borrow::Cow::Borrowed(""), Entry::context_message_json)
    }

    /// Select exact BPE counting (or chars/4 with `None`); every entry is re-counted, and
    /// appends are counted the same way from now on.
    pub fn set_token_counter(&mut self, counter: Option<TokenCounter>) {
        for e in &mut self.entries {
            let tokens = match &counter {
                Some(c) => c.count_entry(e),
                None => e
                    .message_json_for_count()
                    .and_then(|j| crate::tokens::summarize(&j).ok())
                    .map(|s| if s.excluded { 0 } else { s.tokens }),
            };
            if let Some(t) = tokens {
                e.set_tokens(t);
            }
        }
        self.counter = counter;
        self.recount_context();
        self.revision += 1;
    }

    pub fn token_counter(&self) -> Option<&TokenCounter> {
        self.counter.as_ref()
    }

    /// Compaction counts on the active branch.
    pub fn compaction_stats(&self) -> CompactionStats {
        let mut stats = CompactionStats::default();
        for i in self.active_branch() {
            stats.count(&self.entries[i]);
        }
        stats
    }

    /// Compaction entries on the active branch.
    pub fn compaction_count(&self) -> usize {
        self.active_branch()
            .into_iter()
            .filter(|&i| self.entries[i].entry_type() == "compaction")
            .count()
    }
}

impl CompactionStats {
    /// Counts the next entry of the branch; a user message ends the run of automatic ones.
    fn count(&mut self, e: &Entry) {
        if e.context_role() == Some(Role::User) {
            self.auto_in_run = 0;
        }
        if e.entry_type() != "compaction" {
            return;
        }
        self.total += 1;
        let record = e.compaction_record();
        if record.is_some_and(CompactionRecord::is_prune) {
            return;
        }
        self.summarizing += 1;
        let trigger = record.and_then(|r| r.trigger);
        if matches!(trigger, Some(Trigger::Auto | Trigger::Overflow)) {
            self.auto_in_run += 1;
        }
    }
}
