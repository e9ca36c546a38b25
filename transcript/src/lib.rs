//! Session transcripts in the pi / OpenClaw JSONL format (versions 1-3, written as 3): parsing
//! and migration, the entry tree and boundary loading, token accounting, durable storage, and
//! the built-in compaction with an extractive summarizer. Knows nothing about wasm.
//!
//! Module direction (a module uses only those to its left): `role` <- `content` (which parts
//! of a message every reader takes) <- `tokens` <- `envelope`, `message` <- `entry` <- `read`
//! <- `lines` (a file's lines read into entries) <- `tree` (the [`Transcript`]: its entries
//! linked into a tree, their context and its tokens) <- `store`, `compaction`, `check` (a whole
//! file checked as loading checks it) <- `status`. `error`, `time`, `migrate`, `record` (a
//! compaction's `details`) and `lenient` (lone surrogate escapes) are leaves any of them may
//! use; `generate` only produces text for tests and demos.

mod check;
pub mod compaction;
mod content;
mod entry;
mod envelope;
mod error;
pub mod generate;
mod lenient;
mod lines;
mod message;
mod migrate;
mod read;
mod record;
mod role;
pub mod status;
pub mod store;
pub mod time;
pub mod tokens;
mod tree;

pub use entry::{Entry, Header, PRUNED_TEXT};
pub use error::{LoadWarning, TranscriptError, WARNINGS_SHOWN, Warning, shown_warnings};
pub use message::{MessageView, ToolCall};
pub use record::CompactionRecord;
pub use role::Role;
pub use tokens::Usage;
pub use tokens::{Encoding, TokenCounter};
pub use tree::{CompactionStats, NewCompaction, Transcript};
