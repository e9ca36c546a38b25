//! The text heuristics every summary of a session shares: what only acknowledges
//! ([`is_acknowledgement`]), what states a lasting rule ([`standing_instructions`],
//! [`same_subject`]), which line of a failed tool's output names the error ([`error_line`]),
//! and the one-line [`clip`] they are shown with; what a tool call ran on ([`call_target`]) and
//! which files it read or modified ([`FilesTouched`]).
//!
//! The host's extractive summary, the bundled engines (compiled to wasm) and the benchmarks read
//! a session by the same rules, so the crate has no dependencies.

mod calls;
mod clip;

pub use calls::{FilesTouched, call_target, drop_modified, is_transient_path};
pub use clip::{clip, fold};

/// Words that, alone or together, only acknowledge or wave the agent on.
pub const ACK_WORDS: &[&str] = &[
    "ok", "okay", "k", "kk", "yes", "y", "yep", "yeah", "yup", "sure", "continue", "go", "on",
    "ahead", "proceed", "do", "it", "all", "thanks", "thank", "you", "ty", "thx", "great", "nice",
    "cool", "good", "done", "next", "lgtm", "sounds", "perfect", "alright", "right", "please",
    "pls", "fine", "that", "works", "keep", "going", "carry",
];

/// A user message that asks for nothing: an acknowledgement (`ok`, `yes, do it`, `continue`)
/// or a bare slash command (`/mode`), which the agent runtime handles itself.
pub fn is_acknowledgement(text: &str) -> bool {
    let t = text.trim();
    t.is_empty()
        || (t.starts_with('/') && !t.contains(char::is_whitespace))
        || only_words_of(t, ACK_WORDS)
}

/// A short message (one to six words) made only of `words`, case aside: how an acknowledgement
/// is told, with a caller's own list (a benchmark's ground truth keeps a stricter one).
pub fn only_words_of(text: &str, words: &[&str]) -> bool {
    let found: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    (1..=6).contains(&found.len()) && found.iter().all(|w| words.contains(&w.as_str()))
}

/// Openings of a clause that make it an instruction meant to last.
const CLAUSE_CUES: &[&str] = &[
    "don't ",
    "dont ",
    "do not ",
    "never ",
    "always ",
    "use ",
    "stop ",
    "avoid ",
    "only ",
    "prefer ",
    "make sure ",
    "remember to ",
    "no ",
    "please don't ",
    "please never ",
    "please always ",
    "please use ",
];
/// Words that make a clause an instruction wherever they stand.
const ANYWHERE_CUES: &[&str] = &[" must never ", " must always ", " never ", " always "];
/// `no …` clauses that are not rules.
const NOT_RULES: &[&str] = &["no need", "no idea", "no problem", "no worries", "no way"];

/// The sentences of a user message that state a lasting rule (`don't …`, `never …`,
/// `always …`, `use X not Y`, `… must …`), each clipped to `max_chars`. Questions are not
/// rules.
pub fn standing_instructions(text: &str, max_chars: usize) -> Vec<String> {
    let mut out = Vec::new();
    for sentence in text.split_inclusive(['.', '!', '?', '\n']) {
        let s = sentence.trim();
        if s.ends_with('?') || s.chars().count() < 8 {
            continue;
        }
        let lower = format!(" {} ", s.to_lowercase().replace('’', "'"));
        let clause_start = lower
            .split([',', ';', ':', '—', '('])
            .map(|c| c.trim_start_matches(|ch: char| !ch.is_alphanumeric()))
            .filter(|c| !NOT_RULES.iter().any(|n| c.starts_with(n)))
            .any(|c| {
                CLAUSE_CUES.iter().any(|cue| {
                    c.starts_with(cue)
                        && c[cue.len()..]
                            .chars()
                            .next()
                            .is_some_and(char::is_alphanumeric)
                })
            });
        let anywhere = ANYWHERE_CUES.iter().any(|cue| lower.contains(cue));
        if clause_start || anywhere {
            out.push(clip(s, max_chars));
        }
    }
    out
}

/// Content words of an instruction, to tell when a newer one is about the same thing.
fn subject(instruction: &str) -> Vec<String> {
    const STOP: &[&str] = &[
        "the", "and", "not", "don't", "dont", "never", "always", "use", "must", "should", "make",
        "sure", "please", "only", "any", "all", "for", "with", "from", "this", "that", "our",
        "your", "you", "instead", "rather", "than", "are", "was", "will", "avoid", "stop",
        "prefer", "just", "also", "into", "when", "then", "them", "its", "it's", "need",
    ];
    let mut words: Vec<String> = instruction
        .to_lowercase()
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '_' || c == '-'))
        .filter(|w| w.len() >= 3 && !STOP.contains(w))
        .map(str::to_string)
        .collect();
    words.dedup();
    words
}

/// Whether two instructions are about the same thing (two content words in common, or most of
/// the shorter one's), so the newer supersedes the older.
pub fn same_subject(older: &str, newer: &str) -> bool {
    let (old_words, new_words) = (subject(older), subject(newer));
    let shared = old_words.iter().filter(|w| new_words.contains(w)).count();
    let smaller = old_words.len().min(new_words.len()).max(1);
    shared >= 2 || shared * 2 > smaller
}

/// Lines that open a tool's output without saying anything about the error: npm's script
/// echo, git's remote banner, shell prompts, separators.
pub fn boilerplate(line: &str) -> bool {
    let l = line.trim();
    l.starts_with("> ")
        || l == ">"
        || l.starts_with("To http")
        || l.starts_with("To git@")
        || l.starts_with("$ ")
        || l.starts_with("+ ")
        || l.starts_with("Command exited")
        || l.starts_with("npm ERR! A complete log")
        || l.starts_with("npm error A complete log")
        || l.chars().all(|c| !c.is_alphanumeric())
}

const ERROR_WORDS: &[&str] = &[
    "error",
    "fail",
    "cannot",
    "can't",
    "could not",
    "couldn't",
    "not found",
    "no such",
    "denied",
    "rejected",
    "refused",
    "invalid",
    "unexpected",
    "exception",
    "panic",
    "fatal",
    "enoent",
    "eacces",
    "timed out",
    "timeout",
    "not allowed",
    "does not exist",
    "missing",
    "undefined",
    "mismatch",
    "conflict",
    "abort",
];

/// The line of a failed tool's output that names the error: the first non-boilerplate line
/// with an error word, else the first non-boilerplate line; clipped to `max_chars`.
pub fn error_line(output: &str, max_chars: usize) -> String {
    let lines: Vec<&str> = output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let named = lines.iter().find(|l| {
        let lower = l.to_lowercase();
        !boilerplate(l) && ERROR_WORDS.iter().any(|w| lower.contains(w))
    });
    let line = named
        .or_else(|| lines.iter().find(|l| !boilerplate(l)))
        .or(lines.first())
        .copied()
        .unwrap_or("(no output)");
    clip(line, max_chars)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clipped_line_ends_on_a_whole_word() {
        let asked = "Is the retry logic in docs/design.md safe to run concurrently?";
        assert_eq!(
            clip(asked, 44),
            "Is the retry logic in docs/design.md safe…"
        );
        // Trailing punctuation of the last kept word goes with the cut.
        assert_eq!(
            clip("Fix the parser, then the lexer", 17),
            "Fix the parser…"
        );
        // From the longest word up: below it, no cut can end on a whole word.
        for max in 15..asked.len() {
            let clipped = clip(asked, max);
            assert!(clipped.chars().count() <= max, "{clipped:?} over {max}");
            // Each part (the head, and a name kept past a skipped middle) is whole words.
            for kept in clipped.split(" … ") {
                let kept = kept.trim_end_matches('…').trim_start_matches('…');
                assert!(
                    kept.is_empty() || asked.contains(&format!("{kept} ")) || asked.ends_with(kept),
                    "{clipped:?} at {max} breaks a word"
                );
            }
        }
    }

    #[test]
    fn a_clipped_request_keeps_its_verb_and_the_names_it_mentions() {
        assert_eq!(
            clip(
                "Can you please write unit tests for the parser module today",
                40
            ),
            "write unit tests for the parser module…"
        );
        // Politeness stays when nothing has to give way.
        assert_eq!(clip("Please fix it", 40), "Please fix it");
        assert_eq!(
            clip(
                "Refactor the handler so that every error path is logged once in src/server/routes.rs",
                50
            ),
            "Refactor the handler so … src/server/routes.rs"
        );
        assert_eq!(
            clip(
                "Rename the option everywhere it appears, starting with maxRetries and then the docs",
                48
            ),
            "Rename the option everywhere it … maxRetries…"
        );
        // A path longer than the room keeps its file name.
        assert_eq!(
            clip("src/a/very/deeply/nested/module/file.rs", 20),
            "…/module/file.rs"
        );
    }

    #[test]
    fn acknowledgements_ask_for_nothing() {
        for ack in [
            "ok",
            "Yes, do it!",
            "continue",
            "thanks, keep going",
            "/mode",
            "  ",
        ] {
            assert!(is_acknowledgement(ack), "{ack:?}");
        }
        for ask in [
            "ok, now add the tests",
            "/model gpt",
            "fix the build",
            "yes yes yes yes yes yes yes",
        ] {
            assert!(!is_acknowledgement(ask), "{ask:?}");
        }
        assert!(only_words_of("Go on", &["go", "on"]));
        assert!(!only_words_of("", &["go"]));
    }

    #[test]
    fn rules_are_statements_that_last() {
        let rules = standing_instructions(
            "Fix the parser. Don't touch the lexer. Should we always inline? Use tabs, not spaces.",
            120,
        );
        assert_eq!(rules, ["Don't touch the lexer.", "Use tabs, not spaces."]);
        assert_eq!(
            standing_instructions("No need to hurry, thanks a lot.", 120),
            Vec::<String>::new()
        );
        assert_eq!(
            standing_instructions("Never push to the main branch directly.", 12),
            ["Never push…"]
        );
        assert!(same_subject(
            "Use tabs in the Makefile",
            "never use tabs in the Makefile"
        ));
        assert!(!same_subject(
            "Use tabs in the Makefile",
            "always run the tests"
        ));
    }

    #[test]
    fn the_error_line_skips_what_only_opens_an_output() {
        let npm = "> app@1.0.0 test\n> jest\n\nFAIL src/a.test.ts\n  expected 1";
        assert_eq!(error_line(npm, 64), "FAIL src/a.test.ts");
        assert_eq!(error_line("$ ls\nsrc  docs", 64), "src docs");
        assert_eq!(error_line("", 64), "(no output)");
        assert_eq!(clip("a   b\nc", 10), "a b c");
        assert_eq!(clip("abcdefghijkl", 5), "abcd…");
    }
}
