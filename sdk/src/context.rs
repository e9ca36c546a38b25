//! The current context as an engine sees it: [`AssembleRequest`] and its [`Entries`].
//!
//! The contract hands the context over as columns (references, roles, tokens, tools, flags),
//! which cross the component boundary as flat copies. [`Entries`] keeps them as they came and
//! builds the per-entry view ([`ContextEntry`]s) only when the engine first looks at entries one
//! by one, so an engine that keeps a range of the context never pays for it.
//!
//! From contract 0.4 the host sends only the rows appended since the engine's last `assemble`
//! ([`receive`]): the columns are kept between calls and extended in place (with the per-entry
//! view, once built, and the token total), so a call costs what was appended, and the engine
//! still sees the whole context.

use std::cell::OnceCell;
use std::ops::Deref;
use std::rc::Rc;

use crate::wit::types as g;

mod incremental;

use crate::wit::types::{EntryRef, Role, Session};
pub(crate) use incremental::{forget, receive};

/// One entry of the current context: what `assemble` plans over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextEntry {
    /// Where the entry is in the transcript.
    pub entry: EntryRef,
    /// Who said it.
    pub role: Role,
    /// The tokens the model is charged for it (the placeholder's estimate when `pruned`).
    pub tokens: u32,
    /// For a tool result: the tool that produced it (shared between the entries of one tool).
    pub tool_name: Option<Rc<str>>,
    /// For a tool result: the tool reported an error.
    pub is_error: bool,
    /// For a tool result: a compaction already replaced its output by a placeholder; a kept
    /// entry is sent that way.
    pub pruned: bool,
}

impl ContextEntry {
    /// An entry of this role and size with no tool facts.
    pub fn new(entry: EntryRef, role: Role, tokens: u32) -> Self {
        ContextEntry {
            entry,
            role,
            tokens,
            tool_name: None,
            is_error: false,
            pruned: false,
        }
    }

    /// Whether the entry is a tool's output.
    pub fn is_tool_result(&self) -> bool {
        self.role == Role::ToolResult
    }

    /// Whether the entry is the output of the tool called `name`.
    pub fn is_tool_result_of(&self, name: &str) -> bool {
        self.is_tool_result() && self.tool_name.as_deref() == Some(name)
    }
}

/// The entries of the current context, in order. Dereferences to `[ContextEntry]` (built on
/// first use from the columns the host sent); [`len`](Self::len), [`refs`](Self::refs),
/// [`tokens`](Self::tokens) and [`total_tokens`](Self::total_tokens) read the columns without
/// building anything. Cloning shares them.
#[derive(Clone)]
pub struct Entries(Rc<Columns>);

/// The columns as the host sent them, with what is derived from them.
#[derive(Clone)]
struct Columns {
    /// Every column as long as `entries` (a short column from a misbehaving host is padded).
    context: g::Context,
    /// The tool names, shared by the entries that name them.
    names: Vec<Rc<str>>,
    /// The sum of `context.tokens`, saturating.
    total_tokens: u32,
    built: OnceCell<Vec<ContextEntry>>,
}

impl Columns {
    fn new(mut context: g::Context) -> Self {
        let rows = context.entries.len();
        // Padded with what reads as "nothing known": a role code no role has reads as
        // `Custom`, no tokens, no tool, no flags.
        context.roles.resize(rows, u8::MAX);
        context.tokens.resize(rows, 0);
        context.tools.resize(rows, 0);
        context.flags.resize(rows, 0);
        Columns {
            names: context
                .tool_names
                .iter()
                .map(|n| Rc::from(n.as_str()))
                .collect(),
            total_tokens: sum(&context.tokens, 0),
            context,
            built: OnceCell::new(),
        }
    }

    fn entry(&self, i: usize) -> ContextEntry {
        let c = &self.context;
        let flags = c.flags[i];
        ContextEntry {
            entry: c.entries[i],
            role: role_of(c.roles[i]),
            tokens: c.tokens[i],
            tool_name: (c.tools[i] as usize)
                .checked_sub(1)
                .and_then(|t| self.names.get(t).cloned()),
            is_error: flags & IS_ERROR != 0,
            pruned: flags & PRUNED != 0,
        }
    }

    /// Appends rows whose columns are all equally long (the caller checked), and the tool
    /// names added with them.
    fn append(&mut self, added: g::Context) {
        let first = self.context.entries.len();
        let c = &mut self.context;
        c.entries.extend_from_slice(&added.entries);
        c.roles.extend_from_slice(&added.roles);
        c.tokens.extend_from_slice(&added.tokens);
        c.tools.extend_from_slice(&added.tools);
        c.flags.extend_from_slice(&added.flags);
        self.names
            .extend(added.tool_names.iter().map(|n| Rc::from(n.as_str())));
        c.tool_names.extend(added.tool_names);
        self.total_tokens = sum(&added.tokens, self.total_tokens);
        if let Some(mut built) = self.built.take() {
            built.extend((first..self.context.entries.len()).map(|i| self.entry(i)));
            self.built = OnceCell::from(built);
        }
    }
}

fn sum(tokens: &[u32], from: u32) -> u32 {
    tokens.iter().fold(from, |sum, &t| sum.saturating_add(t))
}

impl Entries {
    /// The entries of the contract's columns, as the host sent them.
    pub(crate) fn from_columns(columns: g::Context) -> Self {
        Entries(Rc::new(Columns::new(columns)))
    }

    /// The columns, as the host sends them.
    #[cfg(test)]
    pub(crate) fn into_columns(self) -> g::Context {
        Rc::unwrap_or_clone(self.0).context
    }

    /// How many entries the context has.
    pub fn len(&self) -> usize {
        self.0.context.entries.len()
    }

    /// Whether the context is empty.
    pub fn is_empty(&self) -> bool {
        self.0.context.entries.is_empty()
    }

    /// Each entry's reference, in order.
    pub fn refs(&self) -> &[EntryRef] {
        &self.0.context.entries
    }

    /// Each entry's tokens, in order.
    pub fn tokens(&self) -> &[u32] {
        &self.0.context.tokens
    }

    /// The sum of the entries' tokens (kept as rows arrive, not summed per call).
    pub fn total_tokens(&self) -> u32 {
        self.0.total_tokens
    }

    /// The distinct names of the tools whose results are in the context.
    pub fn tool_names(&self) -> &[String] {
        &self.0.context.tool_names
    }

    fn build(&self) -> Vec<ContextEntry> {
        (0..self.len()).map(|i| self.0.entry(i)).collect()
    }
}

/// `context.flags` bits (see the WIT).
const IS_ERROR: u8 = 1;
const PRUNED: u8 = 2;

/// The contract's role codes: the position of the case in the WIT enum.
const ROLES: [Role; 7] = [
    Role::User,
    Role::Assistant,
    Role::ToolResult,
    Role::BashExecution,
    Role::Custom,
    Role::BranchSummary,
    Role::CompactionSummary,
];

/// The role of a code; an unknown code (a newer host's role) reads as `Custom`.
fn role_of(code: u8) -> Role {
    ROLES
        .get(usize::from(code))
        .copied()
        .unwrap_or(Role::Custom)
}

fn role_code(role: Role) -> u8 {
    ROLES.iter().position(|&r| r == role).unwrap_or(4) as u8
}

impl Deref for Entries {
    type Target = [ContextEntry];

    fn deref(&self) -> &[ContextEntry] {
        self.0.built.get_or_init(|| self.build())
    }
}

impl<'a> IntoIterator for &'a Entries {
    type Item = &'a ContextEntry;
    type IntoIter = std::slice::Iter<'a, ContextEntry>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl IntoIterator for Entries {
    type Item = ContextEntry;
    type IntoIter = std::vec::IntoIter<ContextEntry>;

    fn into_iter(self) -> Self::IntoIter {
        let built = match Rc::try_unwrap(self.0) {
            Ok(mut columns) => match columns.built.take() {
                Some(built) => built,
                None => (0..columns.context.entries.len())
                    .map(|i| columns.entry(i))
                    .collect(),
            },
            Err(shared) => Entries(shared).to_vec(),
        };
        built.into_iter()
    }
}

impl From<Vec<ContextEntry>> for Entries {
    /// The columns of these entries (for tests and tools that build requests).
    fn from(entries: Vec<ContextEntry>) -> Self {
        let mut columns = g::Context {
            entries: Vec::with_capacity(entries.len()),
            roles: Vec::with_capacity(entries.len()),
            tokens: Vec::with_capacity(entries.len()),
            tools: Vec::with_capacity(entries.len()),
            flags: Vec::with_capacity(entries.len()),
            tool_names: Vec::new(),
        };
        for e in &entries {
            columns.entries.push(e.entry);
            columns.roles.push(role_code(e.role));
            columns.tokens.push(e.tokens);
            let tool = e.tool_name.as_deref().map_or(0, |name| {
                let index = match columns.tool_names.iter().position(|n| n == name) {
                    Some(index) => index,
                    None => {
                        columns.tool_names.push(name.to_string());
                        columns.tool_names.len() - 1
                    }
                };
                index as u32 + 1
            });
            columns.tools.push(tool);
            columns
                .flags
                .push((u8::from(e.is_error) * IS_ERROR) | (u8::from(e.pruned) * PRUNED));
        }
        let columns = Columns::new(columns);
        let _ = columns.built.set(entries);
        Entries(Rc::new(columns))
    }
}

impl FromIterator<ContextEntry> for Entries {
    fn from_iter<I: IntoIterator<Item = ContextEntry>>(entries: I) -> Self {
        Entries::from(entries.into_iter().collect::<Vec<_>>())
    }
}

impl PartialEq for Entries {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for Entries {}

impl std::fmt::Debug for Entries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// What `assemble` plans over: the current context and what the runtime knows of the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssembleRequest {
    /// The session the context is for.
    pub session: Session,
    /// Tokens the assembled messages may use, when the runtime set a budget.
    pub token_budget: Option<u32>,
    /// The model's context window.
    pub context_window: u32,
    /// The host's current context size: the last valid assistant usage plus the estimate of
    /// what follows it.
    pub context_tokens: u32,
    /// Names of the tools the model may call on this turn.
    pub available_tools: Vec<String>,
    /// The current context in order: the latest compaction summary (if any), then every entry
    /// from its first kept entry to the leaf of the active branch. A fresh instance gets all of
    /// it here, though it was never fed the older entries through `ingest`.
    pub entries: Entries,
    /// The model the context is for (e.g. `anthropic/claude-sonnet-4`), when the runtime named
    /// it.
    pub model: Option<String>,
    /// The prompt about to be sent, not yet in the transcript, when the runtime has it.
    pub prompt: Option<String>,
}

impl AssembleRequest {
    /// A 0.4 request with its change applied to the context held since the last call; `None`
    /// when the change does not apply (see [`receive`]).
    pub(crate) fn incremental(r: crate::wit::incremental::AssembleRequest) -> Option<Self> {
        let entries = receive(r.revision, r.change)?;
        Some(AssembleRequest {
            session: r.session,
            token_budget: r.token_budget,
            context_window: r.context_window,
            context_tokens: r.context_tokens,
            available_tools: r.available_tools,
            entries,
            model: r.model,
            prompt: r.prompt,
        })
    }
}

impl From<g::AssembleRequest> for AssembleRequest {
    fn from(r: g::AssembleRequest) -> Self {
        AssembleRequest {
            session: r.session,
            token_budget: r.token_budget,
            context_window: r.context_window,
            context_tokens: r.context_tokens,
            available_tools: r.available_tools,
            entries: Entries::from_columns(r.context),
            model: r.model,
            prompt: r.prompt,
        }
    }
}

#[cfg(test)]
mod tests;
