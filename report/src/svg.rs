//! Plot drawing in plain SVG: linear scales, tick choice, a framed plot area with axes, and the
//! marks the report needs (series, horizontal rules, tick marks). Knows nothing about turns or
//! engines; colours and line styles come from CSS classes so the page can switch themes.

use std::fmt::Write as _;

use crate::text::{escape, tick};

/// Maps a data interval linearly onto a pixel interval (which may run backwards, as y does).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scale {
    d0: f64,
    d1: f64,
    r0: f64,
    r1: f64,
}

impl Scale {
    pub(crate) fn new((d0, d1): (f64, f64), (r0, r1): (f64, f64)) -> Scale {
        Scale { d0, d1, r0, r1 }
    }

    pub(crate) fn at(&self, value: f64) -> f64 {
        let span = self.d1 - self.d0;
        let t = if span == 0.0 {
            0.0
        } else {
            (value - self.d0) / span
        };
        self.r0 + t * (self.r1 - self.r0)
    }
}

/// A step of 1, 2 or 5 times a power of ten that cuts `span` into at most about `count` parts.
fn nice_step(span: f64, count: usize) -> f64 {
    let raw = span / count.max(1) as f64;
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let power = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|&s| s >= raw);
    step.unwrap_or(10.0 * power)
}

/// The tick values from `lo` to `hi`, on multiples of a round step.
pub(crate) fn ticks(lo: f64, hi: f64, count: usize) -> Vec<f64> {
    ticks_by(lo, hi, nice_step(hi - lo, count))
}

fn ticks_by(lo: f64, hi: f64, step: f64) -> Vec<f64> {
    let first = (lo / step - 1e-9).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    // Rounded, so 3 × 0.2 is 0.6 and not 0.6000000000000001.
    (first..=last)
        .map(|i| (i as f64 * step * 1e6).round() / 1e6)
        .collect()
}

/// The ticks of an axis from 0 that reaches at least `hi`: its top is the last tick, so the top
/// of the axis is a labelled round number.
pub(crate) fn ticks_from_zero(hi: f64, count: usize) -> Vec<f64> {
    let hi = if hi > 0.0 && hi.is_finite() { hi } else { 1.0 };
    let step = nice_step(hi, count);
    let top = (hi / step - 1e-9).ceil() * step;
    ticks_by(0.0, top, step)
}

/// A coordinate with at most one decimal (".0" dropped): precise enough on a 1,000-pixel plot
/// and what keeps a 10,000-point series small.
pub(crate) fn coord(out: &mut String, value: f64) {
    let tenths = (value * 10.0).round() as i64;
    let sign = if tenths < 0 { "-" } else { "" };
    let tenths = tenths.unsigned_abs();
    let _ = match tenths % 10 {
        0 => write!(out, "{sign}{}", tenths / 10),
        d => write!(out, "{sign}{}.{d}", tenths / 10),
    };
}

/// The page's plot size in SVG units; the SVG scales to the page width.
const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 300.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 16.0;
const BOTTOM: f64 = 44.0;

/// One plot: the frame, its scales and the SVG written so far.
pub(crate) struct Plot {
    x: Scale,
    y: Scale,
    x_domain: (f64, f64),
    /// Where rule labels already stand, so close rules do not print over each other.
    rule_labels: Vec<f64>,
    svg: String,
}

impl Plot {
    /// Opens an `<svg data-plot="{kind}">` whose axes span the given data domains. The plot area
    /// and the x domain are also written as data attributes, for the page's hover script.
    pub(crate) fn new(kind: &str, label: &str, x_domain: (f64, f64), y_domain: (f64, f64)) -> Plot {
        let x = Scale::new(x_domain, (LEFT, WIDTH - RIGHT));
        let y = Scale::new(y_domain, (HEIGHT - BOTTOM, TOP));
        let mut svg = String::new();
        let _ = write!(
            svg,
            r#"<svg class="plot" data-plot="{kind}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{label}" data-x0="{}" data-x1="{}" data-left="{LEFT}" data-right="{}" data-top="{TOP}" data-bottom="{}">"#,
            x_domain.0,
            x_domain.1,
            WIDTH - RIGHT,
            HEIGHT - BOTTOM,
            label = escape(label),
        );
        Plot {
            x,
            y,
            x_domain,
            rule_labels: Vec::new(),
            svg,
        }
    }

    /// Grid lines, the two axes with their tick labels, and the axis titles.
    pub(crate) fn axes(
        &mut self,
        x_title: &str,
        y_title: &str,
        y_ticks: &[f64],
        y_label: fn(f64) -> String,
    ) {
        let (x0, x1) = (LEFT, WIDTH - RIGHT);
        let (y0, y1) = (HEIGHT - BOTTOM, TOP);
        let svg = &mut self.svg;
        svg.push_str(r#"<g class="grid">"#);
        for &v in y_ticks {
            let y = self.y.at(v);
            svg.push_str(r#"<path d="M"#);
            coord(svg, x0);
            svg.push(',');
            coord(svg, y);
            svg.push('H');
            coord(svg, x1);
            svg.push_str(r#""/>"#);
        }
        svg.push_str("</g>");
        let _ = write!(svg, r#"<path class="axis" d="M{x0},{y1}V{y0}H{x1}"/>"#);
        svg.push_str(r#"<g class="ticks y">"#);
        for &v in y_ticks {
            let _ = write!(svg, r#"<text x="{}" y=""#, x0 - 6.0);
            coord(svg, self.y.at(v) + 4.0);
            let _ = write!(svg, r#"">{}</text>"#, escape(&y_label(v)));
        }
        svg.push_str(r#"</g><g class="ticks x">"#);
        for v in ticks(self.x_domain.0, self.x_domain.1, 10) {
            svg.push_str(r#"<text x=""#);
            coord(svg, self.x.at(v));
            let _ = write!(svg, r#"" y="{}">{}</text>"#, y0 + 16.0, escape(&tick(v)));
        }
        svg.push_str("</g>");
        let _ = write!(
            svg,
            r#"<text class="title x" x="{}" y="{}">{}</text><text class="title y" transform="translate(14,{}) rotate(-90)">{}</text>"#,
            (x0 + x1) / 2.0,
            HEIGHT - 6.0,
            escape(x_title),
            (y0 + y1) / 2.0,
            escape(y_title),
        );
    }

    /// A dashed horizontal rule at `value` with a label at its right end: just above the rule,
    /// else just below it, else further away, wherever no other rule's label stands.
    pub(crate) fn rule(&mut self, value: f64, class: &str, label: &str) {
        let y = self.y.at(value);
        let free = |at: &f64| self.rule_labels.iter().all(|t| (t - at).abs() >= 12.0);
        let step = |k: i32| 12.0 * f64::from(k / 2);
        let label_y = (0..8)
            .map(|k| {
                if k % 2 == 0 {
                    y - 4.0 - step(k)
                } else {
                    y + 13.0 + step(k)
                }
            })
            .find(free)
            .unwrap_or(y - 4.0);
        self.rule_labels.push(label_y);
        let svg = &mut self.svg;
        let _ = write!(svg, r#"<g class="rule {class}"><path d="M{LEFT},"#);
        coord(svg, y);
        let _ = write!(
            svg,
            r#"H{}"/><text x="{}" y=""#,
            WIDTH - RIGHT,
            WIDTH - RIGHT - 4.0
        );
        coord(svg, label_y);
        let _ = write!(svg, r#"">{}</text></g>"#, escape(label));
    }

    /// One series as a `<g>` carrying its run's name and its true point count, so a test (or a
    /// reader of the source) can check what was drawn: a `<polyline>` per stretch of points a
    /// line may join, a `<circle>` for a stretch of one.
    pub(crate) fn series(&mut self, class: &str, run: &str, stretches: &[Vec<(f64, f64)>]) {
        let count: usize = stretches.iter().map(Vec::len).sum();
        let _ = write!(
            self.svg,
            r#"<g class="series {class}" data-run="{}" data-points="{count}">"#,
            escape(run)
        );
        for stretch in stretches {
            let svg = &mut self.svg;
            if let [(x, y)] = stretch.as_slice() {
                svg.push_str(r#"<circle cx=""#);
                coord(svg, self.x.at(*x));
                svg.push_str(r#"" cy=""#);
                coord(svg, self.y.at(*y));
                svg.push_str(r#"" r="1.5"/>"#);
                continue;
            }
            svg.push_str(r#"<polyline points=""#);
            for (n, (x, y)) in stretch.iter().enumerate() {
                if n > 0 {
                    svg.push(' ');
                }
                coord(svg, self.x.at(*x));
                svg.push(',');
                coord(svg, self.y.at(*y));
            }
            svg.push_str(r#""/>"#);
        }
        self.svg.push_str("</g>");
    }

    /// Vertical strokes from `from` down or up to `to` at each x, with a short crossbar at `to`,
    /// each a path with its own hover title (compactions: before → after).
    pub(crate) fn strokes(&mut self, class: &str, run: &str, marks: &[(f64, f64, f64, String)]) {
        let _ = write!(
            self.svg,
            r#"<g class="{class}" data-run="{}">"#,
            escape(run)
        );
        for (x, from, to, title) in marks {
            self.svg.push_str(r#"<path d=""#);
            self.stroke(*x, *from, *to);
            let _ = write!(self.svg, r#""><title>{}</title></path>"#, escape(title));
        }
        self.svg.push_str("</g>");
    }

    /// The same strokes as one path under one title: for marks too many to title each.
    pub(crate) fn strokes_as_one(
        &mut self,
        class: &str,
        run: &str,
        marks: &[(f64, f64, f64)],
        title: &str,
    ) {
        let _ = write!(
            self.svg,
            r#"<g class="{class}" data-run="{}"><path d=""#,
            escape(run)
        );
        for (x, from, to) in marks {
            self.stroke(*x, *from, *to);
        }
        let _ = write!(self.svg, r#""><title>{}</title></path></g>"#, escape(title));
    }

    fn stroke(&mut self, x: f64, from: f64, to: f64) {
        let svg = &mut self.svg;
        svg.push('M');
        coord(svg, self.x.at(x));
        svg.push(',');
        coord(svg, self.y.at(from));
        svg.push('V');
        coord(svg, self.y.at(to));
        svg.push_str("m-4,0h8");
    }

    /// Short ticks rising from the x axis at each x, as one path (degraded turns).
    pub(crate) fn floor_ticks(&mut self, class: &str, run: &str, xs: &[f64], title: &str) {
        if xs.is_empty() {
            return;
        }
        let _ = write!(
            self.svg,
            r#"<path class="{class}" data-run="{}" d=""#,
            escape(run)
        );
        for &x in xs {
            self.svg.push('M');
            coord(&mut self.svg, self.x.at(x));
            let _ = write!(self.svg, ",{}v-8", HEIGHT - BOTTOM);
        }
        let _ = write!(self.svg, r#""><title>{}</title></path>"#, escape(title));
    }

    /// A line of text in the middle of the plot area (what is missing).
    pub(crate) fn note(&mut self, text: &str) {
        let _ = write!(
            self.svg,
            r#"<text class="note" x="{}" y="{}">{}</text>"#,
            (LEFT + WIDTH - RIGHT) / 2.0,
            (TOP + HEIGHT - BOTTOM) / 2.0,
            escape(text)
        );
    }

    /// Closes the SVG, with the hover guide line the page's script moves, and returns it.
    pub(crate) fn finish(mut self) -> String {
        let _ = write!(
            self.svg,
            r#"<path class="guide" d="M0,{TOP}V{}" visibility="hidden"/></svg>"#,
            HEIGHT - BOTTOM
        );
        self.svg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coords(value: f64) -> String {
        let mut out = String::new();
        coord(&mut out, value);
        out
    }

    #[test]
    fn coordinates_are_short() {
        assert_eq!(coords(12.0), "12");
        assert_eq!(coords(12.34), "12.3");
        assert_eq!(coords(12.96), "13");
        assert_eq!(coords(-0.04), "0");
        assert_eq!(coords(-1.25), "-1.3");
    }

    #[test]
    fn scales_map_and_invert_direction() {
        let y = Scale::new((0.0, 100.0), (256.0, 16.0));
        assert_eq!(y.at(0.0), 256.0);
        assert_eq!(y.at(100.0), 16.0);
        assert_eq!(y.at(50.0), 136.0);
        // A domain of one value puts everything at the start instead of dividing by zero.
        assert_eq!(Scale::new((5.0, 5.0), (0.0, 10.0)).at(5.0), 0.0);
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(
            ticks(0.0, 32_000.0, 5),
            vec![0.0, 10_000.0, 20_000.0, 30_000.0]
        );
        assert_eq!(ticks(1.0, 9.0, 5), vec![2.0, 4.0, 6.0, 8.0]);
        assert_eq!(ticks(0.0, 1.0, 5), vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
        assert_eq!(
            ticks_from_zero(31_000.0, 5),
            vec![0.0, 10_000.0, 20_000.0, 30_000.0, 40_000.0]
        );
        assert_eq!(ticks_from_zero(0.0, 5), vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
    }

    #[test]
    fn close_rules_keep_their_labels_apart() {
        let mut plot = Plot::new("tokens", "t", (0.0, 1.0), (0.0, 240.0));
        // One unit is one pixel here: rules 10 pixels apart.
        plot.rule(100.0, "a", "first");
        plot.rule(110.0, "b", "second");
        plot.rule(200.0, "c", "far");
        assert_eq!(plot.rule_labels, vec![152.0, 130.0, 52.0]);
    }

    #[test]
    fn a_series_states_its_point_count_and_draws_a_lone_point_as_a_dot() {
        let mut plot = Plot::new("tokens", "t", (0.0, 10.0), (0.0, 10.0));
        plot.series(
            "s0",
            "a<b",
            &[vec![(0.0, 0.0), (5.0, 5.0)], vec![(10.0, 10.0)]],
        );
        let svg = plot.finish();
        assert!(
            svg.contains(r#"<g class="series s0" data-run="a&lt;b" data-points="3"><polyline points="64,256 500,136"/><circle cx="936" cy="16" r="1.5"/></g>"#),
            "{svg}"
        );
    }
}
