//! The ctxhost session report: what each turn cost and what each engine did, for people to look
//! at.
//!
//! The host builds a [`Report`] (one session, one or more engine runs over it, per run the turns,
//! compactions and recall probes) and hands it to [`render_html`] for one self-contained page
//! (inline SVG plots, no network) or to [`render_summary`] for a terminal table. Both also show
//! the engine's own re-cuts, which the host never hears of: [`recuts`] reads them off the turns.
//! The model is serde-serializable in camelCase, so a report can also travel as JSON. This crate
//! knows nothing about the host, engines or transcripts.

#![warn(missing_docs)]

mod html;
mod model;
mod recut;
mod segments;
mod stats;
mod summary;
mod svg;
mod text;

pub use html::render_html;
pub use model::{Compaction, Outcome, ProbeRow, ProbeSummary, Report, Run, Turn};
pub use recut::{Recut, recuts};
pub use stats::{PREFIX_KEPT, RunStats};
pub use summary::render_summary;
pub use text::thousands;
