//! Recall over a whole session: nothing a compaction summarized is out of reach.
//!
//! The transcript stays the one source of truth. Beside it lives a full-text index
//! ([`RecallIndex`], SQLite FTS5 compiled in), built on first use, caught up with what was
//! appended before every search, and rebuilt when it is missing, from another file, stale or
//! corrupt (damage found at open, while catching up or inside a search alike). Where the
//! transcript's directory cannot be written, the index lives in a cache under the ctxhost home,
//! or in memory for the process. Every entry with text is indexed, before and after any compaction boundary and on
//! every branch; the index holds no copy of the text (a contentless FTS5 table), so snippets
//! and expansions are read from the transcript itself.
//!
//! Module direction (each uses only those after it): `tools` (the host's agent tools
//! `ctx_search` / `ctx_expand`: schemas, argument checks, the text the model reads) →
//! `index` (the SQLite file) and `expand` (opening entries again under a token cap) → `listed`
//! (a search's hits, each text once), `query` (what a search asks and how it becomes an FTS5
//! expression) and `text` (an entry's searchable text, snippets, rendering) → `error`.

mod error;
mod expand;
mod index;
mod listed;
mod query;
mod text;
pub mod tools;

pub use error::RecallError;
pub use expand::{ExpandRequest, ExpandTarget, Expansion, expand};
pub use index::{Hit, RecallIndex, SyncReport, cache_index_path, index_path};
pub use query::SearchQuery;
