//! The agent's way down the tree: `lossless_describe` (a node, its span, parent and children),
//! `lossless_expand` (a node's children's summaries, or a leaf's original messages, paged) and
//! `lossless_grep` (the host's full-text search, each hit placed in the tree).

use ctxhost_sdk::host::{self, SearchRequest};
use ctxhost_sdk::{Message, Result, Role};
use serde::Deserialize;

use crate::summary::Author;
use crate::tree::{Node, Tree, parse_node_id};

/// Characters of original messages one `lossless_expand` answer carries; the rest is a call
/// away (`offset`).
pub const PAGE_CHARS: usize = 16_000;

#[derive(Debug, Deserialize)]
pub struct NodeArgs {
    pub node: String,
}

#[derive(Debug, Deserialize)]
pub struct ExpandArgs {
    pub node: String,
    #[serde(default)]
    pub offset: usize,
}

#[derive(Debug, Deserialize)]
pub struct GrepArgs {
    pub query: String,
    #[serde(default)]
    pub limit: Option<u32>,
}

/// The node an argument names, or an error the model can act on.
fn find<'a>(tree: &'a Tree, tool: &str, id: &str) -> Result<&'a Node> {
    let (level, index) = parse_node_id(id).ok_or_else(|| {
        format!(
            "{tool}: `{}` is not a node id; ids look like s0-12 (a leaf) or s2-1: `s`, the level, `-`, the index",
            crate::summary::clip(id, 40)
        )
    })?;
    tree.node((level, index)).ok_or_else(|| {
        let top = (0..16u32).rev().find_map(|l| tree.node((l, 0)).map(|_| l));
        let have = match top {
            Some(top) => format!(
                "levels 0–{top}; level {level} has {} nodes",
                (0..u32::MAX)
                    .take_while(|&i| tree.node((level, i)).is_some())
                    .count()
            ),
            None => "no summaries yet".to_string(),
        };
        format!("{tool}: no node {id} in this session ({have})").into()
    })
}

fn heading(node: &Node) -> String {
    format!(
        "{} · entries {}–{} (ids {}…{}) · {} messages, ~{} tokens",
        node.id(),
        node.first,
        node.last,
        node.first_id,
        node.last_id,
        node.messages,
        node.tokens
    )
}

/// `lossless_describe`.
pub fn describe(tree: &Tree, args: NodeArgs) -> Result<String> {
    let node = find(tree, "lossless_describe", &args.node)?;
    let mut text = heading(node);
    match tree.parent_of(node) {
        Some(parent) => text.push_str(&format!("\nparent: {}", parent.id())),
        None => text.push_str("\nparent: none yet (its group is not complete)"),
    }
    if node.level == 0 {
        text.push_str(&format!(
            "\nleaf: lossless_expand opens its {} original messages",
            node.messages
        ));
    } else {
        let children: Vec<String> = tree
            .children_of(node.level, node.index)
            .iter()
            .map(Node::id)
            .collect();
        text.push_str(&format!("\nchildren: {}", children.join(", ")));
    }
    let author = match node.author {
        Author::Extractive => "extracted",
        Author::Model => "written by the model",
    };
    text.push_str(&format!("\nsummary ({author}):\n{}", node.summary));
    Ok(text)
}

/// `lossless_expand`.
pub fn expand(tree: &Tree, args: ExpandArgs) -> Result<String> {
    let node = find(tree, "lossless_expand", &args.node)?;
    if node.level > 0 {
        let mut text = format!("{}\nchildren, oldest first:", heading(node));
        for child in tree.children_of(node.level, node.index) {
            text.push_str(&format!("\n\n## {}\n{}", heading(child), child.summary));
        }
        let next = if node.level == 1 {
            "each child is a leaf: lossless_expand it for its original messages"
        } else {
            "lossless_expand a child to go further down"
        };
        text.push_str(&format!("\n\n({next})"));
        return Ok(text);
    }
    let messages = host::read_entries(&node.entries).map_err(|e| {
        format!(
            "lossless_expand: cannot read the messages of {}: {e}",
            node.id()
        )
    })?;
    let whole: String = messages.iter().map(render).collect::<Vec<_>>().join("\n\n");
    let total = whole.chars().count();
    if args.offset > 0 && args.offset >= total {
        return Err(format!(
            "lossless_expand: offset {} is past the end of {} ({total} characters)",
            args.offset,
            node.id()
        )
        .into());
    }
    let page: String = whole.chars().skip(args.offset).take(PAGE_CHARS).collect();
    let end = args.offset + page.chars().count();
    let mut text = format!("{} · original messages\n\n{page}", heading(node));
    if end < total {
        text.push_str(&format!(
            "\n\n[continued: {} of {total} characters shown; lossless_expand {{\"node\":\"{}\",\"offset\":{end}}} for the rest]",
            end - args.offset,
            node.id()
        ));
    }
    Ok(text)
}

/// A message as `lossless_expand` shows it: where it is and who said it, then its text and
/// the tool calls it made.
fn render(message: &Message) -> String {
    let who = match (message.role, message.tool_name.as_deref()) {
        (Role::ToolResult, Some(tool)) if message.is_error => format!("{tool} result, failed"),
        (Role::ToolResult, Some(tool)) => format!("{tool} result"),
        (role, _) => role_name(role).to_string(),
    };
    let mut text = format!(
        "[entry {} · {} · {who}]\n{}",
        message.entry, message.entry_id, message.text
    );
    for call in &message.tool_calls {
        text.push_str(&format!("\n→ {} {}", call.name, call.arguments));
    }
    text
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::ToolResult => "tool result",
        Role::BashExecution => "bash",
        Role::Custom => "custom",
        Role::BranchSummary => "branch summary",
        Role::CompactionSummary => "compaction summary",
    }
}

/// `lossless_grep`.
pub fn grep(tree: &Tree, args: GrepArgs) -> Result<String> {
    let limit = args.limit.unwrap_or(10).clamp(1, 50);
    let request = SearchRequest {
        query: args.query.clone(),
        role: None,
        tool: None,
        is_error: None,
        limit,
    };
    let hits = host::search(&request).map_err(|e| format!("lossless_grep: {e}"))?;
    if hits.is_empty() {
        return Err(format!("lossless_grep: nothing matches {:?}", args.query).into());
    }
    let lines: Vec<String> = hits
        .iter()
        .map(|hit| {
            let place = match tree.leaf_holding(hit.entry) {
                Some(leaf) => {
                    let mut path = vec![leaf.id()];
                    let mut node = leaf;
                    while let Some(parent) = tree.parent_of(node) {
                        path.push(parent.id());
                        node = parent;
                    }
                    format!("in {}", path.join(" < "))
                }
                None => "recent: not summarized yet".to_string(),
            };
            format!(
                "entry {} ({}, {}) {place}: {}",
                hit.entry,
                hit.entry_id,
                hit.role,
                crate::summary::clip(&hit.snippet, 200)
            )
        })
        .collect();
    Ok(format!(
        "{} hits, best first (lossless_expand the leaf for the whole message):\n{}",
        lines.len(),
        lines.join("\n")
    ))
}
