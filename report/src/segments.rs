//! Where a plot's line runs and where it breaks. A line between two points claims the values in
//! between, so it only joins neighbouring turns that both have the value, and never crosses a
//! stretch of messages in which the run had no turn at all. What counts as such a stretch is
//! read from the run's own rhythm, since a tool loop puts a few messages between turns and a
//! plain chat two.

use crate::model::{Run, Turn};

/// The longest step, in messages, from one turn to the next that is still the run's rhythm:
/// Tukey's far-out fence over the steps (third quartile plus three interquartile ranges), the
/// range counted as at least one message, since steps are whole messages and a run that keeps
/// one rhythm exactly has a range of zero. None with fewer than two turns.
pub(crate) fn gap_fence(turns: &[Turn]) -> Option<usize> {
    let mut steps: Vec<usize> = turns
        .windows(2)
        .map(|pair| pair[1].message.saturating_sub(pair[0].message))
        .collect();
    if steps.is_empty() {
        return None;
    }
    steps.sort_unstable();
    let quartile = |q: usize| steps[(steps.len() - 1) * q / 4];
    let (lower, upper) = (quartile(1), quartile(3));
    Some(upper + 3 * (upper - lower).max(1))
}

/// A run's points for one plot (x: message, y: `value`), cut into the stretches a line may
/// join: a stretch ends at a turn without the value and where the step to the next turn is
/// past [`gap_fence`]. A stretch of one point is drawn as a dot.
pub(crate) fn segments(run: &Run, value: impl Fn(&Turn) -> Option<f64>) -> Vec<Vec<(f64, f64)>> {
    let fence = gap_fence(&run.turns).unwrap_or(usize::MAX);
    let mut all = Vec::new();
    let mut current = Vec::new();
    let mut previous_message: Option<usize> = None;
    for turn in &run.turns {
        let gap = previous_message.is_some_and(|m| turn.message.saturating_sub(m) > fence);
        let point = value(turn);
        if (gap || point.is_none()) && !current.is_empty() {
            all.push(std::mem::take(&mut current));
        }
        if let Some(y) = point {
            current.push((turn.message as f64, y));
        }
        previous_message = Some(turn.message);
    }
    if !current.is_empty() {
        all.push(current);
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turns(messages: &[usize]) -> Vec<Turn> {
        messages
            .iter()
            .map(|&message| Turn {
                message,
                tokens: message as u64,
                ..Turn::default()
            })
            .collect()
    }

    #[test]
    fn the_fence_follows_the_runs_rhythm() {
        // A chat: a turn every two messages; three messages past that is far out.
        assert_eq!(gap_fence(&turns(&[2, 4, 6, 8, 10])), Some(5));
        // A tool loop: steps of 2 to 5 messages (quartiles 2 and 4).
        let looped = turns(&[2, 4, 7, 9, 14, 18, 20, 23, 25, 30]);
        assert_eq!(gap_fence(&looped), Some(4 + 3 * 2));
        assert_eq!(gap_fence(&turns(&[2])), None);
        assert_eq!(gap_fence(&[]), None);
    }

    #[test]
    fn a_line_breaks_at_a_stretch_without_turns() {
        let run = Run {
            turns: turns(&[2, 4, 6, 8, 408, 410, 412]),
            ..Run::default()
        };
        let drawn = segments(&run, |t| Some(t.tokens as f64));
        let xs: Vec<Vec<f64>> = drawn
            .iter()
            .map(|s| s.iter().map(|p| p.0).collect())
            .collect();
        assert_eq!(
            xs,
            vec![vec![2.0, 4.0, 6.0, 8.0], vec![408.0, 410.0, 412.0]]
        );
    }

    #[test]
    fn a_line_breaks_at_a_turn_without_the_value() {
        let mut run = Run {
            turns: turns(&[2, 4, 6, 8, 10, 12]),
            ..Run::default()
        };
        run.turns[0].engine_micros = Some(5);
        run.turns[2].engine_micros = Some(7);
        run.turns[3].engine_micros = Some(9);
        run.turns[5].engine_micros = Some(1);
        let drawn = segments(&run, |t| t.engine_micros.map(|m| m as f64));
        assert_eq!(
            drawn,
            vec![
                vec![(2.0, 5.0)],
                vec![(6.0, 7.0), (8.0, 9.0)],
                vec![(12.0, 1.0)]
            ]
        );
        assert!(segments(&Run::default(), |_| Some(1.0)).is_empty());
    }
}
