//! The section for kept tool outputs that gave way to placeholders.
use super::*;

/// The section the runtime appends for kept tool results replaced by placeholders (a batch of
/// parallel results bigger than the window). Not carried into the next summary: by then those
/// results are part of the span summarized.
pub const OVERSIZED_TITLE: &str = "Tool outputs replaced by placeholders (too big to keep)";
/// Characters quoted of such outputs' opening lines, all together, and of one at most.
pub(super) const OPENINGS_CHARS: usize = 600;
pub(super) const OPENING_CHARS: usize = 240;

/// A tool output too big to keep: its tool, what its call ran on, the output and its tokens.
#[derive(Debug, Clone)]
pub struct Oversized {
    pub tool: String,
    pub target: String,
    pub output: String,
    pub tokens: u32,
}

/// The [`OVERSIZED_TITLE`] section: per output, `read `src/a.rs` (212 lines, 9000 tokens):`
/// and its opening lines, sharing `OPENINGS_CHARS`.
pub fn oversized_section(outputs: &[Oversized]) -> String {
    let each = (OPENINGS_CHARS / outputs.len().max(1)).clamp(60, OPENING_CHARS);
    let items: Vec<String> = outputs
        .iter()
        .map(|o| {
            let mut s = o.tool.clone();
            if !o.target.is_empty() {
                s.push_str(&format!(" `{}`", o.target));
            }
            let lines = o.output.lines().filter(|l| !l.trim().is_empty()).count();
            s.push_str(&format!(" ({lines} lines, {} tokens): ", o.tokens));
            s.push_str(&clip(&o.output, each));
            s
        })
        .collect();
    let mut out = String::new();
    section(&mut out, OVERSIZED_TITLE, &items);
    out.trim_end().to_string()
}
