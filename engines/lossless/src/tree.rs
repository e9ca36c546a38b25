//! The hierarchy of summaries over one session's messages.
//!
//! Messages are taken in transcript order into an *open leaf*; a leaf closes when it holds
//! `leafMessages` messages or `leafTokens` tokens and the next message is not a tool result
//! (a call and its results stay in one leaf), or when assemble or compaction needs the open
//! messages summarized (a *seal*). Every `fanIn` consecutive nodes of a level are condensed
//! into one node a level up as soon as the last of them exists, so the tree only ever grows at
//! its right edge and a node never changes once written: `s{level}-{index}` names it for good.
//!
//! Node `s{l}-{i}` has the children `s{l-1}-{i*F}` … `s{l-1}-{i*F+F-1}`; a leaf (`l` = 0) lists
//! the entries of its messages. Any prefix of the leaves is covered by a few complete nodes,
//! highest first ([`Tree::cover`]), which is what assemble shows for everything older than the
//! messages it keeps verbatim.

use ctxhost_sdk::{EntryRef, Message, Role, custom_message, estimate_tokens};
use serde::{Deserialize, Serialize};

use crate::summary::{self, Author, Facts, Model};

/// One summary node, as written to the state log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Node {
    pub level: u32,
    pub index: u32,
    /// The transcript positions of the first and last message covered.
    pub first: EntryRef,
    pub last: EntryRef,
    /// Their entry ids (what the host's `ctx_expand` takes).
    pub first_id: String,
    pub last_id: String,
    /// Messages covered, and their tokens.
    pub messages: u32,
    pub tokens: u64,
    /// A leaf's messages, by transcript position (empty above the leaves).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entries: Vec<EntryRef>,
    pub summary: String,
    pub author: Author,
    pub facts: Facts,
}

impl Node {
    /// `s{level}-{index}`.
    pub fn id(&self) -> String {
        node_id(self.level, self.index)
    }

    /// The node as assemble shows it: its id, its span and how to descend, then its summary.
    pub fn insert_text(&self) -> String {
        let descend = if self.level == 0 {
            format!("{} original messages", self.messages)
        } else {
            "its child summaries".to_string()
        };
        format!(
            "[lossless summary {id} · entries {first}–{last} (ids {first_id}…{last_id}) · {messages} messages · lossless_expand {{\"node\":\"{id}\"}} opens {descend}]\n{summary}",
            id = self.id(),
            first = self.first,
            last = self.last,
            first_id = self.first_id,
            last_id = self.last_id,
            messages = self.messages,
            summary = self.summary,
        )
    }

    /// [`insert_text`](Self::insert_text) as the message assemble inserts, with its tokens.
    pub fn insert_message(&self) -> (String, u32) {
        let text = self.insert_text();
        let tokens = estimate_tokens(&text);
        (custom_message(INSERT_TYPE, &text, 0), tokens)
    }

    /// A one-line stand-in for the node, when its summary does not fit the budget.
    pub fn stub_message(&self) -> (String, u32) {
        let first_ask = self.facts.asked.first().map_or(String::new(), |a| {
            format!(": began with \"{}\"", summary::clip(a, 60))
        });
        let text = format!(
            "[lossless summary {} · entries {}–{} · {} messages (summary left out for room; lossless_describe {{\"node\":\"{}\"}} shows it){first_ask}]",
            self.id(),
            self.first,
            self.last,
            self.messages,
            self.id(),
        );
        let tokens = estimate_tokens(&text);
        (custom_message(INSERT_TYPE, &text, 0), tokens)
    }
}

/// The `customType` of the messages assemble inserts.
pub const INSERT_TYPE: &str = "lossless-summary";

/// `s{level}-{index}`.
pub fn node_id(level: u32, index: u32) -> String {
    format!("s{level}-{index}")
}

/// The level and index an id names, if it is well formed.
pub fn parse_node_id(id: &str) -> Option<(u32, u32)> {
    let (level, index) = id.trim().strip_prefix('s')?.split_once('-')?;
    Some((level.parse().ok()?, index.parse().ok()?))
}

/// A node's position: level and index.
pub type NodeKey = (u32, u32);

/// The tree of one session, with the messages not yet in a leaf.
#[derive(Debug)]
pub struct Tree {
    fan_in: u32,
    levels: Vec<Vec<Node>>,
    open: Vec<Message>,
    open_tokens: u64,
    /// Each node's insert message and its tokens, built on first use.
    rendered: Vec<Vec<Option<(String, u32)>>>,
}

impl Tree {
    pub fn new(fan_in: u32) -> Self {
        Tree {
            fan_in: fan_in.max(2),
            levels: Vec::new(),
            open: Vec::new(),
            open_tokens: 0,
            rendered: Vec::new(),
        }
    }

    /// A tree from nodes in the order they were written, checking that they form one:
    /// consecutive indices per level, leaves in transcript order, parents spanning exactly
    /// their children. The first node that breaks a rule is named.
    pub fn from_nodes(fan_in: u32, nodes: Vec<Node>) -> Result<Tree, String> {
        let mut tree = Tree::new(fan_in);
        for node in nodes {
            tree.check(&node)
                .map_err(|problem| format!("node {}: {problem}", node.id()))?;
            tree.push(node);
        }
        Ok(tree)
    }

    fn check(&self, node: &Node) -> Result<(), String> {
        let level = node.level as usize;
        let expected = self.levels.get(level).map_or(0, Vec::len);
        if level > self.levels.len() || node.index as usize != expected {
            return Err(format!("expected index {expected} at level {level}"));
        }
        if node.first > node.last {
            return Err(format!("span {}–{} is reversed", node.first, node.last));
        }
        if level == 0 {
            let sorted = node.entries.windows(2).all(|w| w[0] < w[1]);
            let ends = (node.entries.first(), node.entries.last());
            if !sorted || ends != (Some(&node.first), Some(&node.last)) {
                return Err("its entries do not run from first to last in order".into());
            }
            if let Some(previous) = self.leaves().last()
                && previous.last >= node.first
            {
                return Err(format!("overlaps leaf {}", previous.id()));
            }
            return Ok(());
        }
        let children = self.children_of(node.level, node.index);
        if children.len() != self.fan_in as usize {
            return Err(format!(
                "has {} of its {} children",
                children.len(),
                self.fan_in
            ));
        }
        if (children[0].first, children[children.len() - 1].last) != (node.first, node.last) {
            return Err("does not span exactly its children".into());
        }
        Ok(())
    }

    fn push(&mut self, node: Node) {
        let level = node.level as usize;
        if self.levels.len() == level {
            self.levels.push(Vec::new());
            self.rendered.push(Vec::new());
        }
        self.levels[level].push(node);
        self.rendered[level].push(None);
    }

    pub fn fan_in(&self) -> u32 {
        self.fan_in
    }

    pub fn leaves(&self) -> &[Node] {
        self.levels.first().map_or(&[], Vec::as_slice)
    }

    pub fn node(&self, (level, index): NodeKey) -> Option<&Node> {
        self.levels.get(level as usize)?.get(index as usize)
    }

    /// The nodes a level below `level`/`index` that it condenses (those that exist).
    pub fn children_of(&self, level: u32, index: u32) -> &[Node] {
        let Some(below) = level
            .checked_sub(1)
            .and_then(|l| self.levels.get(l as usize))
        else {
            return &[];
        };
        let start = (index as usize * self.fan_in as usize).min(below.len());
        let end = (start + self.fan_in as usize).min(below.len());
        &below[start..end]
    }

    /// The node one level up that condenses this one, once it exists.
    pub fn parent_of(&self, node: &Node) -> Option<&Node> {
        self.node((node.level + 1, node.index / self.fan_in))
    }

    /// How many nodes there are, all levels.
    pub fn node_count(&self) -> usize {
        self.levels.iter().map(Vec::len).sum()
    }

    /// The last transcript position a leaf covers.
    pub fn covered_through(&self) -> Option<EntryRef> {
        self.leaves().last().map(|leaf| leaf.last)
    }

    /// Messages not yet in a leaf, oldest first.
    pub fn open(&self) -> &[Message] {
        &self.open
    }

    /// The leaf holding `entry` (a message position), if a leaf covers it.
    pub fn leaf_holding(&self, entry: EntryRef) -> Option<&Node> {
        let leaves = self.leaves();
        let at = leaves.partition_point(|leaf| leaf.last < entry);
        leaves
            .get(at)
            .filter(|leaf| leaf.entries.binary_search(&entry).is_ok())
    }

    /// The insert message of a node, built once.
    pub fn insert_of(&mut self, (level, index): NodeKey) -> Option<&(String, u32)> {
        let node = self.levels.get(level as usize)?.get(index as usize)?;
        let slot = &mut self.rendered[level as usize][index as usize];
        Some(slot.get_or_insert_with(|| node.insert_message()))
    }

    /// Takes a message in (it must come after every message taken so far; one already
    /// covered is ignored). Returns the nodes this closed, to be written down.
    pub fn add(
        &mut self,
        mut message: Message,
        limits: LeafLimits,
        model: &mut Model,
    ) -> Vec<Node> {
        let newest = self.open.last().map(|m| m.entry).or(self.covered_through());
        if newest.is_some_and(|newest| message.entry <= newest)
            || message.role == Role::CompactionSummary
        {
            return Vec::new();
        }
        let full = self.open.len() as u32 >= limits.messages || self.open_tokens >= limits.tokens;
        let mut written = Vec::new();
        if full && message.role != Role::ToolResult {
            written = self.close_open(self.open.len(), model);
        }
        // The JSON is never read again here; the text and tool facts are what summaries use.
        message.json = String::new();
        self.open_tokens += u64::from(message.tokens);
        self.open.push(message);
        written
    }

    /// Closes the open messages before transcript position `before` into a leaf (assemble or
    /// compaction needs them summarized). Returns the nodes written.
    pub fn seal_before(&mut self, before: EntryRef, model: &mut Model) -> Vec<Node> {
        let count = self.open.partition_point(|m| m.entry < before);
        self.close_open(count, model)
    }

    /// The first `count` open messages become a leaf, and complete groups are condensed.
    fn close_open(&mut self, count: usize, model: &mut Model) -> Vec<Node> {
        if count == 0 {
            return Vec::new();
        }
        let messages: Vec<Message> = self.open.drain(..count).collect();
        self.open_tokens = self.open.iter().map(|m| u64::from(m.tokens)).sum();
        let mut facts = summary::leaf_facts(&messages);
        let written = summary::write_leaf(&messages, &mut facts, model);
        let (first, last) = (&messages[0], &messages[messages.len() - 1]);
        let leaf = Node {
            level: 0,
            index: self.leaves().len() as u32,
            first: first.entry,
            last: last.entry,
            first_id: first.entry_id.clone(),
            last_id: last.entry_id.clone(),
            messages: messages.len() as u32,
            tokens: messages.iter().map(|m| u64::from(m.tokens)).sum(),
            entries: messages.iter().map(|m| m.entry).collect(),
            summary: written.text,
            author: written.author,
            facts,
        };
        self.push(leaf.clone());
        let mut new_nodes = vec![leaf];
        new_nodes.extend(self.condense(model));
        new_nodes
    }

    /// Writes every parent whose children all exist and it does not yet (normally the ones
    /// the newest leaf completed; after a crash, also those the log lost).
    pub fn condense(&mut self, model: &mut Model) -> Vec<Node> {
        let fan_in = self.fan_in as usize;
        let mut written = Vec::new();
        let mut level = 0;
        while level < self.levels.len() {
            let complete_groups = self.levels[level].len() / fan_in;
            let existing = self.levels.get(level + 1).map_or(0, Vec::len);
            for index in existing..complete_groups {
                let parent = self.parent_from_children(level as u32 + 1, index as u32, model);
                self.push(parent.clone());
                written.push(parent);
            }
            level += 1;
        }
        written
    }

    fn parent_from_children(&self, level: u32, index: u32, model: &mut Model) -> Node {
        let children = self.children_of(level, index);
        let facts: Vec<&Facts> = children.iter().map(|c| &c.facts).collect();
        let mut merged = summary::merged_facts(&facts);
        let texts: Vec<&str> = children.iter().map(|c| c.summary.as_str()).collect();
        let written = summary::write_parent(&texts, &mut merged, model);
        let (first, last) = (&children[0], &children[children.len() - 1]);
        Node {
            level,
            index,
            first: first.first,
            last: last.last,
            first_id: first.first_id.clone(),
            last_id: last.last_id.clone(),
            messages: children.iter().map(|c| c.messages).sum(),
            tokens: children.iter().map(|c| c.tokens).sum(),
            entries: Vec::new(),
            summary: written.text,
            author: written.author,
            facts: merged,
        }
    }

    /// The fewest complete nodes that cover the first `leaves` leaves, oldest first: from
    /// the left, the highest node that starts there and ends within the prefix.
    pub fn cover(&self, leaves: u32) -> Vec<NodeKey> {
        let mut keys = Vec::new();
        let mut at = 0u64;
        let leaves = u64::from(leaves.min(self.leaves().len() as u32));
        let fan_in = u64::from(self.fan_in);
        while at < leaves {
            let mut level = 0u32;
            let mut span = 1u64;
            while at.is_multiple_of(span * fan_in)
                && at + span * fan_in <= leaves
                && self
                    .node((level + 1, (at / (span * fan_in)) as u32))
                    .is_some()
            {
                level += 1;
                span *= fan_in;
            }
            keys.push((level, (at / span) as u32));
            at += span;
        }
        keys
    }
}

/// When a leaf is full.
#[derive(Debug, Clone, Copy)]
pub struct LeafLimits {
    pub messages: u32,
    pub tokens: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxhost_sdk::testing::{TestHost, message, tool_call, tool_result};

    const LIMITS: LeafLimits = LeafLimits {
        messages: 4,
        tokens: 10_000,
    };

    fn grown(messages: u32) -> Tree {
        let mut tree = Tree::new(2);
        let mut model = Model::default();
        TestHost::new().run(|| {
            for entry in 0..messages {
                let role = if entry % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                };
                tree.add(
                    message(entry, role, &format!("request {entry}")),
                    LIMITS,
                    &mut model,
                );
            }
        });
        tree
    }

    #[test]
    fn leaves_close_when_full_and_parents_condense_complete_groups() {
        let tree = grown(33);
        // 33 messages: 8 leaves of 4, the 33rd open (a leaf closes when the next arrives).
        assert_eq!(tree.leaves().len(), 8);
        assert_eq!(tree.open().len(), 1);
        let top = tree.node((3, 0)).expect("2^3 leaves make one level-3 node");
        assert_eq!((top.first, top.last, top.messages), (0, 31, 32));
        assert_eq!(tree.children_of(3, 0).len(), 2);
        assert_eq!(tree.parent_of(&tree.leaves()[5]).unwrap().id(), "s1-2");
        assert_eq!(tree.node_count(), 8 + 4 + 2 + 1);
        assert_eq!(tree.leaf_holding(17).unwrap().id(), "s0-4");
        assert!(tree.leaf_holding(32).is_none(), "still open");
    }

    #[test]
    fn a_prefix_is_covered_by_the_highest_complete_nodes() {
        let tree = grown(33);
        assert_eq!(tree.cover(8), [(3, 0)]);
        assert_eq!(tree.cover(7), [(2, 0), (1, 2), (0, 6)]);
        assert_eq!(tree.cover(1), [(0, 0)]);
        assert!(tree.cover(0).is_empty());
        assert_eq!(parse_node_id("s2-10"), Some((2, 10)));
        assert_eq!(parse_node_id("2-10"), None);
    }

    #[test]
    fn a_tool_call_and_its_results_stay_in_one_leaf() {
        let mut tree = Tree::new(4);
        let mut model = Model::default();
        TestHost::new().run(|| {
            tree.add(message(0, Role::User, "go"), LIMITS, &mut model);
            tree.add(tool_call(1, "read", serde_json_args()), LIMITS, &mut model);
            tree.add(tool_result(2, "read", "a"), LIMITS, &mut model);
            tree.add(tool_call(3, "read", serde_json_args()), LIMITS, &mut model);
            // Full at 4, but a result belongs with its call.
            tree.add(tool_result(4, "read", "b"), LIMITS, &mut model);
            tree.add(message(5, Role::User, "next"), LIMITS, &mut model);
        });
        assert_eq!(tree.leaves()[0].entries, [0, 1, 2, 3, 4]);
        assert_eq!(tree.open().len(), 1);
    }

    fn serde_json_args() -> ctxhost_sdk::serde_json::Value {
        ctxhost_sdk::serde_json::json!({"path": "a.rs"})
    }

    #[test]
    fn sealing_closes_the_open_messages_before_a_position() {
        let mut tree = grown(6);
        let mut model = Model::default();
        let written = TestHost::new().run(|| tree.seal_before(5, &mut model));
        let ids: Vec<String> = written.iter().map(Node::id).collect();
        assert_eq!(ids, ["s0-1", "s1-0"], "the sealed leaf completes a pair");
        assert_eq!(tree.leaves()[1].entries, [4]);
        assert_eq!(tree.open().len(), 1);
        // Taking the same message again changes nothing.
        let again =
            TestHost::new().run(|| tree.add(message(5, Role::User, "dup"), LIMITS, &mut model));
        assert!(again.is_empty());
        assert_eq!(tree.open().len(), 1);
    }

    #[test]
    fn a_log_that_does_not_form_a_tree_is_refused_naming_the_node() {
        let tree = grown(17);
        let mut nodes: Vec<Node> = tree.levels.iter().flatten().cloned().collect();
        // The order they were written in: a parent right after the child completing it.
        nodes.sort_by_key(|n| (n.last, n.level));
        assert!(Tree::from_nodes(2, nodes.clone()).is_ok());
        let mut broken = nodes.clone();
        broken[1].first = 3;
        broken[1].entries[0] = 3;
        let problem = Tree::from_nodes(2, broken).unwrap_err();
        assert!(
            problem.starts_with("node s0-1: overlaps leaf s0-0"),
            "{problem}"
        );
        let mut skipped = nodes;
        skipped.remove(0);
        assert!(Tree::from_nodes(2, skipped).is_err());
    }
}
