//! The context held between `assemble` calls (contract 0.4): the host sends only the rows
//! appended since the last call, and they extend what is held in place.

use std::cell::RefCell;
use std::rc::Rc;

use super::Entries;

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
                let applies =
                    revision != 0 && held_revision == revision && extends(&appended, &entries);
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

/// Whether `appended` holds the rows that follow `entries`: it counts as many rows and tool
/// names before it as are held, and its columns are of equal lengths.
fn extends(appended: &crate::wit::incremental::Appended, entries: &Entries) -> bool {
    let added = &appended.added;
    let rows = added.entries.len();
    let columns = [
        added.roles.len(),
        added.tokens.len(),
        added.tools.len(),
        added.flags.len(),
    ];
    entries.len() == appended.rows as usize
        && entries.tool_names().len() == appended.tool_names as usize
        && columns.iter().all(|&n| n == rows)
}
