//! The one reading of an engine's plan. Whatever contract version the engine speaks, its
//! `assemble` answer (0.1's keeps, 0.2 on keep-ranges too) becomes runs of positions in the
//! request's context and the messages it inserted ([`ContextItem`]), checked here once: every
//! kept entry is in the request, no range runs backwards, no entry is kept twice. What the host
//! checks after (the bytes handed over, inserted messages, figures) is its own.
//!
//! Plans go forward, so an entry is first looked for where the previous run ended, and a range
//! to the context's end by the last row: a pass-through is two comparisons. Any other entry is
//! found through the instance's [`Positions`], built once and extended while the context's
//! revision holds. No plan costs more than linear work in the context and the plan: a run is
//! never expanded into its entries unless runs go back over earlier ones, and then each entry is
//! marked once.

use super::contract::{AssembleResult, Context, ContextItem, EntryRef};

/// One item of a plan as an engine answers it, whatever its contract version (0.1 has no
/// `KeepRange`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Item {
    /// Keep this entry of the request.
    Keep(EntryRef),
    /// Keep `first`, `last` and every entry between them in the request's order.
    KeepRange { first: EntryRef, last: EntryRef },
    /// Insert this AgentMessage JSON.
    Insert(String),
}

/// An `assemble` answer as the engine gave it, before it is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Answer {
    pub(super) items: Vec<Item>,
    pub(super) estimated_tokens: u32,
    pub(super) system_prompt_addition: Option<String>,
}

/// Why a plan is refused, as users have seen it since contract 0.2: a keep-range the request
/// cannot hold in the range's own words, as the engine's failed call; any other problem as
/// invalid output naming the item (counting a run as one item per entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Refusal {
    /// An end not in the request, a range running backwards, or keeping more entries than the
    /// request has.
    Range(String),
    /// A keep of an entry not in the request, or of one kept before.
    Item(String),
}

/// Where each entry of an instance's requests is (its position, by entry reference). Contexts
/// only grow at their end while their revision holds, so the index is extended by the rows
/// appended since, and rebuilt for another revision (or an unknown one, 0). Every position it
/// gives is checked against the context, so a stale index can miss an entry (it is brought
/// level then) but never misplace one.
#[derive(Debug, Default)]
pub(super) struct Positions {
    revision: u64,
    /// Rows of the context indexed.
    rows: usize,
    /// Per entry reference, 1 + its position; 0 for entries not in the context.
    by_entry: Vec<u32>,
}

impl Positions {
    /// `answer`, planned over `context` (of `revision`), in the host's terms.
    pub(super) fn read(
        &mut self,
        context: &Context,
        revision: u64,
        answer: Answer,
    ) -> Result<AssembleResult, Refusal> {
        let entries = context.entries.len();
        let mut plan = Reading {
            context,
            revision,
            positions: self,
            items: Vec::with_capacity(answer.items.len().min(entries + 64)),
            read: 0,
            after: 0,
            kept: 0,
            seen: None,
        };
        for item in answer.items {
            match item {
                Item::Keep(entry) => plan.keep(entry)?,
                Item::KeepRange { first, last } => plan.keep_range(first, last)?,
                Item::Insert(json) => {
                    plan.items.push(ContextItem::Insert(json));
                    plan.read += 1;
                }
            }
        }
        Ok(AssembleResult {
            items: plan.items,
            estimated_tokens: answer.estimated_tokens,
            system_prompt_addition: answer.system_prompt_addition,
        })
    }

    /// Brings the index level with `context` (of `revision`).
    fn update(&mut self, context: &Context, revision: u64) {
        let entries = &context.entries;
        if revision == 0 || revision != self.revision || self.rows > entries.len() {
            self.by_entry.clear();
            self.rows = 0;
            self.revision = revision;
        }
        for (position, row) in entries.iter().enumerate().skip(self.rows) {
            let slot = row.entry as usize;
            if self.by_entry.len() <= slot {
                self.by_entry.resize(slot + 1, 0);
            }
            // Positions are bounded by the context's length, which a u32 reference counts.
            self.by_entry[slot] = position as u32 + 1;
        }
        self.rows = entries.len();
    }

    /// Where `entry` is in `context`, when it is there.
    fn position(&mut self, context: &Context, revision: u64, entry: EntryRef) -> Option<usize> {
        let found = |index: &Self| {
            let position = index.by_entry.get(entry as usize)?.checked_sub(1)? as usize;
            (context.entries.get(position)?.entry == entry).then_some(position)
        };
        found(self).or_else(|| {
            self.update(context, revision);
            found(self)
        })
    }
}

/// One plan being read.
struct Reading<'a> {
    context: &'a Context,
    revision: u64,
    positions: &'a mut Positions,
    items: Vec<ContextItem>,
    /// Items read, a run counted as one item per entry (how refusals number them).
    read: usize,
    /// The position after the last run kept: where the next is looked for first.
    after: usize,
    /// Entries kept.
    kept: usize,
    /// Which positions are kept, from the first run that goes back before the one before it
    /// (until then runs ascend, and no entry can be kept twice).
    seen: Option<Vec<bool>>,
}

impl Reading<'_> {
    fn keep(&mut self, entry: EntryRef) -> Result<(), Refusal> {
        let Some(at) = self.find(entry, self.after) else {
            return Err(Refusal::Item(format!(
                "item {} keeps entry {entry}, which is not in the context it was given",
                self.read
            )));
        };
        self.run(at, at)
    }

    fn keep_range(&mut self, first: EntryRef, last: EntryRef) -> Result<(), Refusal> {
        let outside = || {
            Refusal::Range(format!(
                "keep-range({first}, {last}) names an entry that is not in the request"
            ))
        };
        let from = self.find(first, self.after).ok_or_else(outside)?;
        // A range to the context's end (a pass-through, a kept tail) is found without a lookup.
        let entries = &self.context.entries;
        let to = match entries.last() {
            Some(end) if end.entry == last => entries.len() - 1,
            _ => self.find(last, from).ok_or_else(outside)?,
        };
        if to < from {
            return Err(Refusal::Range(format!(
                "keep-range({first}, {last}) runs backwards in the request's order"
            )));
        }
        // Charged before its entries are looked at: a range keeping more than the request has
        // left keeps some entry twice, whichever, so a flood of whole-request ranges stops at
        // the second.
        if self.kept + (to - from + 1) > entries.len() {
            return Err(Refusal::Range(format!(
                "the plan keeps more entries than the {} of the request: some entry twice",
                entries.len()
            )));
        }
        self.run(from, to)
    }

    /// Where `entry` is in the request, looked for at `hint` first.
    fn find(&mut self, entry: EntryRef, hint: usize) -> Option<usize> {
        match self.context.entries.get(hint) {
            Some(row) if row.entry == entry => Some(hint),
            _ => self.positions.position(self.context, self.revision, entry),
        }
    }

    /// Keeps positions `first..=last`, joined to a run they continue.
    fn run(&mut self, first: usize, last: usize) -> Result<(), Refusal> {
        if first < self.after || self.seen.is_some() {
            self.mark(first, last)?;
        }
        self.read += last - first + 1;
        self.kept += last - first + 1;
        self.after = last + 1;
        // Both below the context's length, which a u32 reference counts.
        let (first, last) = (first as u32, last as u32);
        match self.items.last_mut() {
            Some(ContextItem::KeepPositions { last: end, .. }) if *end + 1 == first => *end = last,
            _ => self.items.push(ContextItem::KeepPositions { first, last }),
        }
        Ok(())
    }

    /// Marks positions `first..=last` kept, refusing the first one kept before.
    fn mark(&mut self, first: usize, last: usize) -> Result<(), Refusal> {
        let seen = self
            .seen
            .get_or_insert_with(|| kept_positions(&self.items, self.context.entries.len()));
        let rows = &self.context.entries[first..=last];
        for (offset, (kept, row)) in seen[first..=last].iter_mut().zip(rows).enumerate() {
            if std::mem::replace(kept, true) {
                return Err(Refusal::Item(format!(
                    "item {} keeps entry {} a second time",
                    self.read + offset,
                    row.entry
                )));
            }
        }
        Ok(())
    }
}

/// Which of a context's `rows` positions `items` keep.
fn kept_positions(items: &[ContextItem], rows: usize) -> Vec<bool> {
    let mut seen = vec![false; rows];
    for item in items {
        if let &ContextItem::KeepPositions { first, last } = item {
            seen[first as usize..=last as usize].fill(true);
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{ContextEntry, Role};

    fn context(refs: impl IntoIterator<Item = EntryRef>) -> Context {
        Context {
            entries: (refs.into_iter())
                .map(|entry| ContextEntry {
                    entry,
                    role: Role::User,
                    tokens: 1,
                    tool: 0,
                    is_error: false,
                    pruned: false,
                })
                .collect(),
            tool_names: Vec::new(),
        }
    }

    fn read(context: &Context, items: Vec<Item>) -> Result<Vec<ContextItem>, Refusal> {
        let answer = Answer {
            items,
            estimated_tokens: 0,
            system_prompt_addition: None,
        };
        let plan = Positions::default().read(context, 7, answer)?;
        Ok(plan.items)
    }

    fn range(first: EntryRef, last: EntryRef) -> Item {
        Item::KeepRange { first, last }
    }

    fn run(first: u32, last: u32) -> ContextItem {
        ContextItem::KeepPositions { first, last }
    }

    fn refused_item(context: &Context, items: Vec<Item>) -> String {
        match read(context, items) {
            Err(Refusal::Item(problem)) => problem,
            other => panic!("expected the plan refused by an item, got {other:?}"),
        }
    }

    fn refused_range(context: &Context, items: Vec<Item>) -> String {
        match read(context, items) {
            Err(Refusal::Range(message)) => message,
            other => panic!("expected the plan refused by a range, got {other:?}"),
        }
    }

    #[test]
    fn keeps_and_ranges_become_runs_of_positions_in_plan_order() {
        // A compaction summary (entry 9) comes first, then the kept entries.
        let now = context([9, 2, 3, 5, 7]);
        let note = || Item::Insert("{}".into());
        let plan = vec![range(9, 3), note(), range(7, 7), Item::Keep(5)];
        let items = read(&now, plan).unwrap();
        let inserted = ContextItem::Insert("{}".into());
        assert_eq!(items, [run(0, 2), inserted, run(4, 4), run(3, 3)]);
        // Single keeps in a row, and ranges that continue each other, are one run.
        let keeps = [9, 2, 3].map(Item::Keep).into_iter().chain([range(5, 7)]);
        assert_eq!(read(&now, keeps.collect()).unwrap(), [run(0, 4)]);
    }

    #[test]
    fn a_pass_through_is_read_without_an_index() {
        let now = context(0..100_000);
        let mut positions = Positions::default();
        let answer = Answer {
            items: vec![range(0, 99_999)],
            estimated_tokens: 0,
            system_prompt_addition: None,
        };
        let plan = positions.read(&now, 7, answer).unwrap();
        assert_eq!(plan.items, [run(0, 99_999)]);
        assert!(positions.by_entry.is_empty());
    }

    #[test]
    fn ranges_outside_the_request_or_backwards_are_refused_in_their_own_words() {
        let now = context([1, 2, 3]);
        let err = refused_range(&now, vec![range(1, 4)]);
        assert_eq!(
            err,
            "keep-range(1, 4) names an entry that is not in the request"
        );
        let err = refused_range(&now, vec![range(3, 1)]);
        assert_eq!(
            err,
            "keep-range(3, 1) runs backwards in the request's order"
        );
        refused_range(&context([]), vec![range(0, 0)]);
        // A range may come back to entries before the previous one.
        let back = read(&now, vec![range(3, 3), range(1, 2)]).unwrap();
        assert_eq!(back, [run(2, 2), run(0, 1)]);
    }

    #[test]
    fn entries_kept_twice_or_not_given_are_refused_naming_the_item() {
        let now = context([9, 1, 2, 3, 4]);
        let err = refused_item(&now, vec![range(9, 2), range(2, 3)]);
        assert_eq!(err, "item 3 keeps entry 2 a second time");
        let err = refused_item(&now, vec![range(9, 9), Item::Keep(9)]);
        assert_eq!(err, "item 1 keeps entry 9 a second time");
        let err = refused_item(&now, vec![Item::Keep(1), Item::Keep(1)]);
        assert_eq!(err, "item 1 keeps entry 1 a second time");
        let err = refused_item(&now, vec![Item::Insert("{}".into()), Item::Keep(77)]);
        assert_eq!(
            err,
            "item 1 keeps entry 77, which is not in the context it was given"
        );
        // Out of order without overlapping is a plan like any other.
        let swapped = read(&now, vec![range(3, 4), range(9, 2)]).unwrap();
        assert_eq!(swapped, [run(3, 4), run(0, 2)]);
    }

    #[test]
    fn a_flood_of_whole_request_ranges_stops_at_the_second() {
        let now = context(0..1000);
        let err = refused_range(&now, vec![range(0, 999); 2_000_000]);
        assert_eq!(
            err,
            "the plan keeps more entries than the 1000 of the request: some entry twice"
        );
    }

    #[test]
    fn ranges_jumping_back_and_forth_are_found_through_the_index() {
        let now = context(0..2000);
        let plan: Vec<_> = (0..1000)
            .map(|i| {
                let at = if i % 2 == 0 { 1999 - i / 2 } else { i / 2 };
                range(at, at)
            })
            .collect();
        let items = read(&now, plan).unwrap();
        assert_eq!(items.len(), 1000);
        assert_eq!(items[..2], [run(1999, 1999), run(0, 0)]);
    }

    #[test]
    fn the_index_follows_rows_appended_and_is_rebuilt_for_another_revision() {
        let mut now = context([9, 1, 2, 3, 4]);
        let mut index = Positions::default();
        assert_eq!(index.position(&now, 7, 2), Some(2));
        now.entries.push(ContextEntry {
            entry: 12,
            ..now.entries[1]
        });
        assert_eq!(index.position(&now, 7, 12), Some(5));
        now.entries.remove(1);
        assert_eq!(index.position(&now, 8, 12), Some(4));
        assert_eq!(index.position(&now, 8, 1), None);
    }
}
