//! The one reading of an AgentMessage's content, for every decoder of it: which members hold
//! what the model reads (by role), which content block types there are, and what each reader
//! takes of a block. The token estimate (its serde decoder in `tokens` and the byte scanner in
//! `envelope`), the exact BPE count and the message view each decode blocks their own way, for
//! speed, and then decide through here, so they cannot drift apart.
//!
//! A `content` string is one text block; a list is walked block by block.

use crate::role::Role;

/// Where a message keeps what the model reads, by its role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// `content`: a string, or a list of blocks.
    Content,
    /// `command`, then `output` (a bash execution).
    CommandAndOutput,
    /// `summary` (branch and compaction summaries).
    Summary,
}

impl Source {
    pub(crate) fn of(role: Role) -> Source {
        match role {
            Role::BashExecution => Source::CommandAndOutput,
            Role::BranchSummary | Role::CompactionSummary => Source::Summary,
            Role::User | Role::Assistant | Role::ToolResult | Role::Custom => Source::Content,
        }
    }
}

/// How a reader holds a block's strings: the text itself, or only its length in chars.
pub(crate) trait BlockText: Sized {
    /// An absent id or name.
    const EMPTY: Self;
    /// Absent tool-call arguments, which read as `{}`.
    const EMPTY_OBJECT: Self;
}

impl BlockText for usize {
    const EMPTY: usize = 0;
    const EMPTY_OBJECT: usize = 2;
}

impl BlockText for &str {
    const EMPTY: Self = "";
    const EMPTY_OBJECT: Self = "{}";
}

/// The members of one block as a reader decoded them (`arguments` as compact JSON text, or its
/// length). A member the reader has no use for may be left `None`.
#[derive(Default)]
pub(crate) struct Members<S> {
    pub text: Option<S>,
    pub thinking: Option<S>,
    pub id: Option<S>,
    pub name: Option<S>,
    pub arguments: Option<S>,
}

/// A content block, by its `type`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Block<S> {
    Text(S),
    Thinking(S),
    ToolCall {
        id: S,
        name: S,
        arguments: S,
    },
    Image,
    /// Any other type, no type, or a text or thinking block without its text: nothing in it
    /// is read.
    Other,
}

impl<S: BlockText> Block<S> {
    /// The block of type `kind` (its name as written) with these members.
    pub(crate) fn new(kind: Option<&[u8]>, m: Members<S>) -> Block<S> {
        match kind {
            Some(b"text") => m.text.map_or(Block::Other, Block::Text),
            Some(b"thinking") => m.thinking.map_or(Block::Other, Block::Thinking),
            Some(b"toolCall") => Block::ToolCall {
                id: m.id.unwrap_or(S::EMPTY),
                name: m.name.unwrap_or(S::EMPTY),
                arguments: m.arguments.unwrap_or(S::EMPTY_OBJECT),
            },
            Some(b"image") => Block::Image,
            _ => Block::Other,
        }
    }

    /// What a token count takes, in order: text, thinking, a tool call's name and arguments,
    /// an image. All of it is in the model's context.
    pub(crate) fn counted(self, mut take: impl FnMut(Counted<S>)) {
        match self {
            Block::Text(text) | Block::Thinking(text) => take(Counted::Text(text)),
            Block::ToolCall {
                name, arguments, ..
            } => {
                take(Counted::Text(name));
                take(Counted::Text(arguments));
            }
            Block::Image => take(Counted::Image),
            Block::Other => {}
        }
    }

    /// What a message view shows: text and tool calls. Thinking and images are not in a view
    /// (engines and summarizers work from what was said and done).
    pub(crate) fn shown(self) -> Option<Shown<S>> {
        match self {
            Block::Text(text) => Some(Shown::Text(text)),
            Block::ToolCall {
                id,
                name,
                arguments,
            } => Some(Shown::ToolCall {
                id,
                name,
                arguments,
            }),
            Block::Thinking(_) | Block::Image | Block::Other => None,
        }
    }
}

/// A part of a block a token count takes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Counted<S> {
    Text(S),
    Image,
}

/// A part of a block a message view shows.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Shown<S> {
    Text(S),
    ToolCall { id: S, name: S, arguments: S },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block<'a>(kind: &str, text: &'a str) -> Block<&'a str> {
        let all = Members {
            text: Some(text),
            thinking: Some(text),
            id: Some("c1"),
            name: Some("read"),
            arguments: Some(r#"{"path":"a"}"#),
        };
        Block::new(Some(kind.as_bytes()), all)
    }

    fn counted(b: Block<&str>) -> Vec<Counted<&str>> {
        let mut parts = Vec::new();
        b.counted(|p| parts.push(p));
        parts
    }

    /// Which blocks count for each reader: the token counts take every part the model reads,
    /// the view only text and tool calls.
    #[test]
    fn what_each_reader_takes_of_each_block() {
        let text = || block("text", "hi");
        assert_eq!(counted(text()), [Counted::Text("hi")]);
        assert_eq!(text().shown(), Some(Shown::Text("hi")));

        let thinking = || block("thinking", "hmm");
        assert_eq!(counted(thinking()), [Counted::Text("hmm")]);
        assert_eq!(thinking().shown(), None);

        let call = || block("toolCall", "");
        assert_eq!(
            counted(call()),
            [Counted::Text("read"), Counted::Text(r#"{"path":"a"}"#)]
        );
        let shown = Shown::ToolCall {
            id: "c1",
            name: "read",
            arguments: r#"{"path":"a"}"#,
        };
        assert_eq!(call().shown(), Some(shown));

        let image = || block("image", "");
        assert_eq!(counted(image()), [Counted::Image]);
        assert_eq!(image().shown(), None);

        for other in ["redacted_thinking", "Text", ""] {
            assert_eq!(block(other, "x"), Block::Other, "{other}");
        }
        assert_eq!(Block::new(None, Members::<&str>::default()), Block::Other);
    }

    #[test]
    fn absent_members() {
        // a text block without text reads as nothing (not as an empty line of a view)
        assert_eq!(
            Block::new(Some(b"text"), Members::<&str>::default()),
            Block::Other
        );
        // a tool call without arguments reads as `{}`, in text and in chars alike
        let call = Block::new(Some(b"toolCall"), Members::<&str>::default());
        assert_eq!(counted(call), [Counted::Text(""), Counted::Text("{}")]);
        let chars = Block::new(Some(b"toolCall"), Members::<usize>::default());
        assert_eq!(
            chars,
            Block::ToolCall {
                id: 0,
                name: 0,
                arguments: 2
            }
        );
    }

    #[test]
    fn source_by_role() {
        assert_eq!(Source::of(Role::BashExecution), Source::CommandAndOutput);
        assert_eq!(Source::of(Role::CompactionSummary), Source::Summary);
        assert_eq!(Source::of(Role::BranchSummary), Source::Summary);
        for role in [Role::User, Role::Assistant, Role::ToolResult, Role::Custom] {
            assert_eq!(Source::of(role), Source::Content, "{role:?}");
        }
    }
}
