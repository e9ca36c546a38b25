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

use std::cell::{OnceCell, RefCell};
use std::ops::Deref;
use std::rc::Rc;

use crate::wit::types as g;
use crate::{EntryRef, Role, Session};

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

/// What the SDK holds of the context between `assemble` calls (contract 0.4): one instance
/// serves one session, so this is that session's context at the revision the host named.
struct Held {
    revision: u64,
    entries: Entries,
}

thread_local! {
    static HELD: RefCell<Option<Held>> = const { RefCell::new(None) };
}

/// Applies the host's change to the context held since the last call and returns the whole
/// context, or `None` when the change does not apply to what is held (nothing held, another
/// revision, a gap in rows or tool names, columns of unequal lengths): the host then sends the
/// whole context. Never a context that might be wrong; what is held is dropped on a refusal.
pub(crate) fn receive(
    revision: u64,
    change: crate::wit::incremental::ContextChange,
) -> Option<Entries> {
    use crate::wit::incremental::ContextChange;
    HELD.with_borrow_mut(|held| {
        let entries = match change {
            ContextChange::Whole(context) => Entries::from_columns(context),
            ContextChange::Appended(appended) => {
                let Held {
                    revision: held_revision,
                    mut entries,
                } = held.take()?;
                let added = &appended.added;
                let rows = added.entries.len();
                let applies = revision != 0
                    && held_revision == revision
                    && entries.len() == appended.rows as usize
                    && entries.tool_names().len() == appended.tool_names as usize
                    && [
                        added.roles.len(),
                        added.tokens.len(),
                        added.tools.len(),
                        added.flags.len(),
                    ]
                    .iter()
                    .all(|&n| n == rows);
                if !applies {
                    return None;
                }
                // In place when the engine kept no clone of the last request's entries.
                Rc::make_mut(&mut entries.0).append(appended.added);
                entries
            }
        };
        *held = Some(Held {
            revision,
            entries: entries.clone(),
        });
        Some(entries)
    })
}

/// Drops what is held (the engine value is disposed: the next call starts afresh).
pub(crate) fn forget() {
    HELD.with_borrow_mut(|held| *held = None);
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
mod tests {
    use super::*;

    #[test]
    fn columns_and_entries_agree_both_ways() {
        let bash: Rc<str> = "bash".into();
        let entries = vec![
            ContextEntry::new(4, Role::User, 10),
            ContextEntry {
                tool_name: Some(bash.clone()),
                is_error: true,
                ..ContextEntry::new(5, Role::ToolResult, 20)
            },
            ContextEntry {
                tool_name: Some("read".into()),
                pruned: true,
                ..ContextEntry::new(6, Role::ToolResult, 3)
            },
            ContextEntry {
                tool_name: Some(bash),
                ..ContextEntry::new(7, Role::ToolResult, 1)
            },
        ];
        let from_vec = Entries::from(entries.clone());
        assert_eq!(from_vec.refs(), [4, 5, 6, 7]);
        assert_eq!(from_vec.tool_names(), ["bash", "read"]);
        assert_eq!(from_vec.total_tokens(), 34);
        // As the host sends them: built from the columns alone.
        let sent = Entries::from_columns(from_vec.0.context.clone());
        assert!(sent.0.built.get().is_none());
        assert_eq!(sent.len(), 4);
        assert!(sent.0.built.get().is_none(), "len reads the columns");
        assert_eq!(*sent, *entries);
        assert!(sent[1].is_tool_result_of("bash") && !sent[0].is_tool_result());
    }
}

#[cfg(test)]
mod incremental_tests {
    use super::*;
    use crate::wit::incremental::{Appended, ContextChange};
    use proptest::prelude::*;

    /// Rows `from..to` of a context where every third entry is a tool result of tool `row % 5`
    /// (names `t0`..`t4`, introduced as they first appear), every seventh an error.
    fn rows(from: u32, to: u32, salt: u32) -> Vec<ContextEntry> {
        (from..to)
            .map(|i| {
                let mut e = ContextEntry::new(i * 2 + salt, role_of((i % 7) as u8), i % 13 + salt);
                if i % 3 == 0 {
                    e.role = Role::ToolResult;
                    e.tool_name = Some(format!("t{}", (i + salt) % 5).into());
                    e.is_error = i % 7 == 0;
                    e.pruned = salt % 2 == 1;
                }
                e
            })
            .collect()
    }

    /// The host's side: the whole context and its revision.
    struct Host {
        revision: u64,
        whole: g::Context,
    }

    impl Host {
        fn new(revision: u64, entries: Vec<ContextEntry>) -> Self {
            Host {
                revision,
                whole: Entries::from(entries).into_columns(),
            }
        }

        /// The change of the rows and names after these many.
        fn after(&self, rows: usize, names: usize) -> ContextChange {
            let w = &self.whole;
            ContextChange::Appended(Appended {
                rows: rows as u32,
                tool_names: names as u32,
                added: g::Context {
                    entries: w.entries[rows..].to_vec(),
                    roles: w.roles[rows..].to_vec(),
                    tokens: w.tokens[rows..].to_vec(),
                    tools: w.tools[rows..].to_vec(),
                    flags: w.flags[rows..].to_vec(),
                    tool_names: w.tool_names[names..].to_vec(),
                },
            })
        }

        fn append(&mut self, count: u32) {
            let mut all: Vec<ContextEntry> = Entries::from_columns(self.whole.clone()).to_vec();
            let from = all.len() as u32;
            all.extend(rows(from, from + count, 0));
            // Names only grow: the new entries' names are appended after the known ones.
            let known = self.whole.tool_names.clone();
            let mut columns = Entries::from(all).into_columns();
            let mut names = known;
            for name in &columns.tool_names {
                if !names.contains(name) {
                    names.push(name.clone());
                }
            }
            let old = columns.tool_names.clone();
            for tool in &mut columns.tools {
                if *tool > 0 {
                    let name = &old[*tool as usize - 1];
                    *tool = names.iter().position(|n| n == name).unwrap() as u32 + 1;
                }
            }
            columns.tool_names = names;
            self.whole = columns;
        }
    }

    fn view(entries: &Entries) -> (Vec<ContextEntry>, u32, Vec<String>) {
        (
            entries.to_vec(),
            entries.total_tokens(),
            entries.tool_names().to_vec(),
        )
    }

    #[test]
    fn appended_rows_extend_the_held_context_and_anything_else_is_refused() {
        forget();
        let mut host = Host::new(4, rows(0, 6, 0));
        let names = host.whole.tool_names.len();
        let first = receive(4, ContextChange::Whole(host.whole.clone())).unwrap();
        let _ = first.to_vec(); // built before the append: extended in place with it
        drop(first);
        host.append(4);
        let grown = receive(4, host.after(6, names)).unwrap();
        assert_eq!(
            view(&grown),
            view(&Entries::from_columns(host.whole.clone()))
        );
        let names = host.whole.tool_names.len();
        // Another revision: refused, and what was held is dropped, so even the right change
        // then asks for the whole context.
        assert!(receive(5, host.after(10, names)).is_none());
        assert!(
            receive(4, host.after(10, names)).is_none(),
            "nothing is held any more"
        );
        let resend = || ContextChange::Whole(host.whole.clone());
        let _ = receive(4, resend()).unwrap();
        assert!(
            receive(4, host.after(9, names)).is_none(),
            "an overlap: row 9 again"
        );
        let _ = receive(4, resend()).unwrap();
        assert!(
            receive(4, host.after(10, names - 1)).is_none(),
            "a tool name again"
        );
        let _ = receive(4, resend()).unwrap();
        host.append(2);
        assert!(
            receive(4, host.after(11, names)).is_none(),
            "a gap: row 10 never sent"
        );
        // The unknown revision 0 never takes appended rows.
        let _ = receive(0, ContextChange::Whole(host.whole.clone())).unwrap();
        assert!(receive(0, host.after(12, names)).is_none());
    }

    #[test]
    fn columns_of_unequal_lengths_are_refused_or_padded() {
        forget();
        let host = Host::new(1, rows(0, 4, 0));
        let _ = receive(1, ContextChange::Whole(host.whole.clone())).unwrap();
        let mut short = host.after(2, 0);
        if let ContextChange::Appended(a) = &mut short {
            a.rows = 4;
            a.tool_names = host.whole.tool_names.len() as u32;
            a.added.entries = vec![100, 101];
            a.added.roles = vec![0];
            a.added.tokens = vec![1, 1];
            a.added.tools = vec![0, 0];
            a.added.flags = vec![0, 0];
            a.added.tool_names.clear();
        }
        assert!(receive(1, short).is_none());
        // A whole context with a short column reads the missing cells as "nothing known".
        let mut whole = host.whole.clone();
        whole.tokens.truncate(1);
        let entries = receive(2, ContextChange::Whole(whole)).unwrap();
        assert_eq!(entries.tokens().len(), 4);
        assert_eq!(entries.total_tokens(), host.whole.tokens[0]);
    }

    /// What the host does between two `assemble`s.
    #[derive(Debug, Clone)]
    enum Step {
        /// Messages appended (a delta follows).
        Append(u32),
        /// A compaction rewrote the context (a new revision, sent whole).
        Compact(u32),
        /// The engine lost what it held without the host knowing (a restart it did not see):
        /// the host's delta must be refused.
        Forget,
        /// The host sends a delta that skips rows (a lost call): it must be refused.
        Gap,
        /// The host sends a delta under another revision: it must be refused.
        WrongRevision,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (0u32..6).prop_map(Step::Append),
            1 => (1u32..20).prop_map(Step::Compact),
            1 => Just(Step::Forget),
            1 => Just(Step::Gap),
            1 => Just(Step::WrongRevision),
        ]
    }

    proptest! {
        /// After every step the engine's view equals the host's whole context: a delta that
        /// applies extends it, one that does not is refused and the whole context resent.
        #[test]
        fn the_engine_sees_the_whole_context_after_any_sequence(
            steps in proptest::collection::vec(step(), 1..40),
            build_early in any::<bool>(),
        ) {
            forget();
            let mut host = Host::new(1, rows(0, 3, 0));
            // What the host believes the engine holds: (revision, rows, names).
            let mut believed: Option<(u64, usize, usize)> = None;
            for step in steps {
                let mut skew = (0usize, 0u64);
                match step {
                    Step::Append(n) => host.append(n),
                    Step::Compact(n) => {
                        host = Host::new(host.revision + 1, rows(0, n, host.revision as u32));
                    }
                    Step::Forget => forget(),
                    Step::Gap => {
                        host.append(2);
                        skew.0 = 1;
                    }
                    Step::WrongRevision => {
                        host.append(1);
                        skew.1 = 1;
                    }
                }
                let change = match believed {
                    Some((revision, rows, names)) if revision == host.revision => {
                        host.after(rows + skew.0, names)
                    }
                    _ => ContextChange::Whole(host.whole.clone()),
                };
                let sent_whole = matches!(change, ContextChange::Whole(_));
                // A whole context applies whatever its revision: only deltas are skewed.
                let honest = sent_whole || skew == (0, 0);
                let revision = host.revision + if sent_whole { 0 } else { skew.1 };
                let entries = match receive(revision, change) {
                    Some(entries) => {
                        prop_assert!(honest, "a bad delta was applied");
                        entries
                    }
                    None => {
                        prop_assert!(!sent_whole);
                        receive(host.revision, ContextChange::Whole(host.whole.clone()))
                            .expect("the whole context always applies")
                    }
                };
                let fresh = Entries::from_columns(host.whole.clone());
                prop_assert_eq!(view(&entries), view(&fresh));
                if build_early {
                    let _ = entries.to_vec();
                }
                believed = Some((host.revision, host.whole.entries.len(), host.whole.tool_names.len()));
            }
        }
    }
}
