//! An assembly in positions of the runtime's message array, translated incrementally: while a
//! turn's assembly only appends to the previous turn's (the same context revision, the same runs
//! and messages, the last run perhaps longer), only its new items are translated, and the
//! message positions of the mirror's entries are extended by the entries appended since. Any
//! other assembly (after a compaction, a restart, an engine that planned differently) is
//! translated whole, as the first one is; the answer is the same either way.

use std::sync::Arc;

use ctxhost::session::{AssembledItem, Assembly, AssemblyShape};
use ctxhost::transcript::Transcript;

use super::inserted;
use crate::protocol::ClientItem;

/// What the previous turn's assembly became, kept for the next.
#[derive(Default)]
pub(super) struct Translator {
    previous: Option<(AssemblyShape, Items)>,
    positions: MessagePositions,
}

impl Translator {
    /// `assembly` (made over `transcript`'s context) as the runtime's items.
    pub(super) fn translate(
        &mut self,
        transcript: &Transcript,
        assembly: &Assembly,
    ) -> Vec<ClientItem> {
        self.positions
            .update(transcript, assembly.context_revision());
        let (mut items, from) = match self.previous.take() {
            Some((shape, items)) => match assembly.extension_of(&shape) {
                Some(from) => (items, from),
                None => (Items::default(), 0),
            },
            None => (Items::default(), 0),
        };
        let entries = transcript.entries();
        for item in assembly.items().skip(from) {
            match item {
                AssembledItem::Entry(index) => match self.positions.of(index) {
                    Some(position) if !entries[index].is_pruned() => items.keep(position),
                    // A pruned message replaces its position; one of no position is new.
                    replaces => items.push(Item::Entry { index, replaces }),
                },
                AssembledItem::Inserted(json) => items.push(Item::Inserted(json)),
            }
        }
        let answer = items.render(transcript);
        self.previous = Some((assembly.shape(), items));
        answer
    }
}

/// For each entry index, its position among the messages of the active branch, extended while
/// the context's revision holds and the entries appended since continue the branch.
#[derive(Default)]
struct MessagePositions {
    /// 0: nothing computed.
    context_revision: u64,
    by_entry: Vec<Option<usize>>,
    next: usize,
}

impl MessagePositions {
    fn update(&mut self, transcript: &Transcript, context_revision: u64) {
        let entries = transcript.entries();
        let known = self.by_entry.len();
        // Appends go under the leaf (the last entry): the branch grew by exactly the entries
        // appended when each one's parent is the entry before it.
        let continues = |i: usize| match i.checked_sub(1) {
            Some(before) => entries[i].parent_id() == Some(entries[before].id()),
            None => entries[i].parent_id().is_none(),
        };
        let extends = context_revision != 0
            && self.context_revision == context_revision
            && known <= entries.len()
            && (known..entries.len()).all(continues);
        if !extends {
            self.context_revision = context_revision;
            self.by_entry = vec![None; entries.len()];
            self.next = 0;
            for index in transcript.active_branch() {
                self.assign(transcript, index);
            }
            return;
        }
        self.by_entry.resize(entries.len(), None);
        for index in known..entries.len() {
            self.assign(transcript, index);
        }
    }

    fn assign(&mut self, transcript: &Transcript, index: usize) {
        if transcript.entries()[index].entry_type() == "message" {
            self.by_entry[index] = Some(self.next);
            self.next += 1;
        }
    }

    fn of(&self, index: usize) -> Option<usize> {
        self.by_entry.get(index).copied().flatten()
    }
}

/// An item before it is rendered: messages are rendered on every answer (a message without a
/// time gets the current one), positions are not.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Item {
    Client(ClientItem),
    /// A transcript entry sent as a message, replacing the runtime's position when it has one.
    Entry {
        index: usize,
        replaces: Option<usize>,
    },
    Inserted(Arc<str>),
}

/// Assembly items in the runtime's terms, runs of consecutive kept positions collapsed into
/// one `{from, to}` item so an in-sync answer grows with what the engine changed, not with the
/// history.
#[derive(Default)]
pub(super) struct Items {
    done: Vec<Item>,
    run: Option<(usize, usize)>,
}

impl Items {
    pub(super) fn keep(&mut self, position: usize) {
        match &mut self.run {
            Some((_, to)) if *to + 1 == position => *to = position,
            _ => {
                self.flush();
                self.run = Some((position, position));
            }
        }
    }

    pub(super) fn push(&mut self, item: Item) {
        self.flush();
        self.done.push(item);
    }

    fn flush(&mut self) {
        if let Some(run) = self.run.take() {
            self.done.push(Item::Client(run_item(run)));
        }
    }

    /// The items as the runtime gets them; the open run stays open for the next turn.
    pub(super) fn render(&self, transcript: &Transcript) -> Vec<ClientItem> {
        let render = |item: &Item| match item {
            Item::Client(item) => item.clone(),
            Item::Entry { index, replaces } => ClientItem::Message {
                message: inserted(&transcript.context_message_json(*index)),
                replaces: *replaces,
            },
            Item::Inserted(json) => ClientItem::message(inserted(json)),
        };
        let open = self.run.map(run_item);
        self.done.iter().map(render).chain(open).collect()
    }
}

fn run_item((from, to): (usize, usize)) -> ClientItem {
    if from == to {
        ClientItem::Index { index: from }
    } else {
        ClientItem::Range { from, to }
    }
}
