//! Engine re-cuts: the engine shrank the context it assembles with no host compaction in
//! between (an engine that compacts on its own, as `lossless` does). The host never hears of
//! these, so they are read off the turns: a served turn whose request is smaller than the
//! previous served turn's, with no compaction between them. Any shrink counts, since an
//! engine's context only grows while it keeps everything.

use crate::model::Run;

/// One re-cut: the context of the engine's previous turn, and the smaller one of this turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recut {
    /// The 1-based number of the message the shrunken turn ran before.
    pub message: usize,
    /// Tokens in the previous served turn's request.
    pub tokens_before: u64,
    /// Tokens in this turn's request.
    pub tokens_after: u64,
}

/// The run's re-cuts, in turn order. Only turns the engine served are compared: a fallback's
/// or a quarantine's request comes from the host, so a drop back to the engine's own size
/// after one is not a re-cut.
pub fn recuts(run: &Run) -> Vec<Recut> {
    let compacted = CompactedAt::of(run);
    let mut found = Vec::new();
    let mut previous: Option<(usize, u64)> = None;
    for turn in run.turns.iter().filter(|t| !t.outcome.is_degraded()) {
        if let Some((message, tokens)) = previous
            && turn.tokens < tokens
            && !compacted.between(message, turn.message)
        {
            found.push(Recut {
                message: turn.message,
                tokens_before: tokens,
                tokens_after: turn.tokens,
            });
        }
        previous = Some((turn.message, turn.tokens));
    }
    found
}

/// The messages before which a run's compactions ran, sorted.
pub(crate) struct CompactedAt(Vec<usize>);

impl CompactedAt {
    pub(crate) fn of(run: &Run) -> CompactedAt {
        let mut messages: Vec<usize> = run.compactions.iter().map(|c| c.message).collect();
        messages.sort_unstable();
        CompactedAt(messages)
    }

    /// Whether a compaction ran between the turn before message `earlier` and the turn before
    /// message `later`: after the first, so before a message past `earlier` and up to `later`.
    pub(crate) fn between(&self, earlier: usize, later: usize) -> bool {
        let next = self.0.partition_point(|&m| m <= earlier);
        self.0.get(next).is_some_and(|&m| m <= later)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Compaction, Outcome, Turn};

    fn run(tokens: &[(usize, u64)]) -> Run {
        Run {
            turns: tokens
                .iter()
                .map(|&(message, tokens)| Turn {
                    message,
                    tokens,
                    ..Turn::default()
                })
                .collect(),
            ..Run::default()
        }
    }

    #[test]
    fn a_shrink_without_a_compaction_is_a_recut() {
        let found = recuts(&run(&[(2, 100), (4, 900), (6, 300), (8, 300), (10, 299)]));
        assert_eq!(
            found,
            vec![
                Recut {
                    message: 6,
                    tokens_before: 900,
                    tokens_after: 300
                },
                Recut {
                    message: 10,
                    tokens_before: 300,
                    tokens_after: 299
                },
            ]
        );
    }

    #[test]
    fn a_host_compaction_between_the_turns_explains_the_shrink() {
        let mut compacted = run(&[(2, 900), (6, 300), (8, 200)]);
        // Before message 6 (the shrunken turn's own message counts), and one long before.
        for message in [6, 1] {
            compacted.compactions.push(Compaction {
                message,
                tokens_before: 900,
                tokens_after: 300,
                layer: None,
            });
        }
        assert_eq!(
            recuts(&compacted),
            vec![Recut {
                message: 8,
                tokens_before: 300,
                tokens_after: 200
            }]
        );
        // A compaction before the earlier turn's message does not explain a later drop.
        compacted.compactions[0].message = 2;
        assert_eq!(recuts(&compacted).len(), 2);
    }

    #[test]
    fn turns_the_engine_did_not_serve_are_not_compared() {
        let mut fell_back = run(&[(2, 500), (4, 5_000), (6, 600), (8, 550)]);
        fell_back.turns[1].outcome = Outcome::Fallback;
        // 500 → 600 grew; only 600 → 550 is the engine's own shrink.
        assert_eq!(
            recuts(&fell_back),
            vec![Recut {
                message: 8,
                tokens_before: 600,
                tokens_after: 550
            }]
        );
        assert_eq!(recuts(&Run::default()), vec![]);
    }
}
