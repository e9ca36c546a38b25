use super::*;
use crate::model::{Compaction, Outcome, ProbeRow, ProbeSummary};

/// A run of `turns` turns with every figure filled in but the first turn's prefix share
/// and every seventh turn's engine time, and a compaction every 50 turns.
fn run(engine: &str, turns: usize) -> Run {
    let mut run = Run {
        engine: engine.into(),
        context_window: 32_000,
        threshold: 24_000,
        ..Run::default()
    };
    for k in 0..turns {
        let message = 2 * k + 2;
        run.turns.push(Turn {
            message,
            tokens: 1_000 + (k as u64 * 7_919) % 23_000,
            prefix_share: match k {
                0 => None,
                _ if k % 50 == 0 => Some(0.1),
                _ => Some(1.0 - (k % 3) as f64 * 0.004),
            },
            kept_previous: None,
            engine_micros: (k % 7 != 0).then_some(100 + (k as u64 * 131) % 2_000),
            outcome: if k % 97 == 0 {
                Outcome::Fallback
            } else {
                Outcome::Ok
            },
            note: (k % 97 == 0).then(|| "assemble timed out".to_owned()),
        });
        if k % 50 == 49 {
            run.compactions.push(Compaction {
                message,
                tokens_before: 24_500,
                tokens_after: 8_000,
                layer: Some("runtime".into()),
            });
        }
    }
    run
}

fn report(runs: Vec<Run>) -> Report {
    Report {
        title: "t".into(),
        session: "s.jsonl".into(),
        generated_at: "now".into(),
        runs,
    }
}

/// Each series of one plot: its data-run, its data-points and the pairs its points hold.
fn series(html: &str, plot: &str) -> Vec<(String, usize, usize)> {
    let start = html
        .find(&format!("data-plot=\"{plot}\""))
        .expect("the plot is there");
    let svg = &html[start..start + html[start..].find("</svg>").expect("the svg closes")];
    svg.split("<polyline")
        .skip(1)
        .map(|tag| {
            let attr = |name: &str| {
                let from = tag.find(&format!(" {name}=\"")).expect("attribute") + name.len() + 3;
                tag[from..from + tag[from..].find('"').expect("quoted")].to_owned()
            };
            let pairs = attr("points")
                .split(' ')
                .filter(|p| p.contains(','))
                .count();
            (
                attr("data-run"),
                attr("data-points").parse().expect("a count"),
                pairs,
            )
        })
        .collect()
}

#[test]
fn two_runs_share_each_plot_with_their_true_point_counts() {
    let html = render_html(&report(vec![
        run("legacy", 120),
        run("checkpoint-manager", 80),
    ]));
    let expect = |plot: &str, a: usize, b: usize| {
        assert_eq!(
            series(&html, plot),
            vec![
                ("legacy".to_owned(), a, a),
                ("checkpoint-manager".to_owned(), b, b)
            ],
            "{plot}"
        );
    };
    expect("tokens", 120, 80);
    // The first turn has no prefix share; every seventh has no engine time.
    expect("prefix", 119, 79);
    expect("engine-time", 120 - 18, 80 - 12);
    assert!(
        html.contains("window 32,000"),
        "one window line for both runs"
    );
    assert_eq!(html.matches("class=\"rule window\"").count(), 1);
    assert!(html.contains("<h2>Compactions</h2>") && html.contains("24,500"));
    assert!(html.contains("<h2>Degraded turns</h2>") && html.contains("assemble timed out"));
}

#[test]
fn a_run_without_turns_renders_empty_plots_with_a_note() {
    let empty = Run {
        engine: "lossless".into(),
        ..Run::default()
    };
    let html = render_html(&report(vec![empty.clone()]));
    for plot in ["tokens", "prefix", "engine-time"] {
        assert_eq!(
            series(&html, plot),
            vec![("lossless".to_owned(), 0, 0)],
            "{plot}"
        );
    }
    assert!(html.contains(">no turns recorded<"));
    assert!(html.contains(">No compactions.<"));
    assert!(
        !html.contains("class=\"rule window\""),
        "an unknown window draws no line"
    );

    let html = render_html(&report(vec![run("legacy", 10), empty]));
    assert!(html.contains(">no turns recorded for lossless<"));
    assert!(html.contains(">no engine times recorded for lossless<"));

    let html = render_html(&Report::default());
    assert!(
        html.contains("No runs in this report.") && html.contains("<title>ctxhost report</title>")
    );
    assert_eq!(series(&html, "tokens"), vec![]);
}

#[test]
fn all_text_is_escaped() {
    let mut hostile = run("<script>alert('x')</script>&\"", 3);
    hostile.turns[0].note = Some("</td><img src=x onerror=alert(1)>".into());
    hostile.turns[0].outcome = Outcome::Other("<b>odd</b>".into());
    hostile.compactions.push(Compaction {
        message: 4,
        tokens_before: 9,
        tokens_after: 3,
        layer: Some("<i>".into()),
    });
    hostile.probes = Some(ProbeSummary {
        rows: vec![ProbeRow {
            label: "<u>".into(),
            reachable: 1,
            total: 2,
        }],
    });
    let mut report = report(vec![hostile]);
    report.title = "<h1>title</h1>".into();
    report.session = "a&b<c>.jsonl".into();
    let html = render_html(&report);
    for raw in [
        "<script>alert",
        "<img",
        "<b>odd",
        "<i>",
        "<u>",
        "<h1>title",
        "a&b<c>",
    ] {
        assert!(!html.contains(raw), "{raw} reached the page unescaped");
    }
    assert!(html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;"));
    assert!(html.contains("&lt;/td&gt;&lt;img src=x onerror=alert(1)&gt;"));
    assert!(html.contains("a&amp;b&lt;c&gt;.jsonl"));
    // The hover data names the run too, in a form that cannot close its script element.
    assert!(html.contains(r#""name":"\u003cscript\u003ealert('x')\u003c/script\u003e\u0026\"""#));
    assert_eq!(
        html.matches("</script>").count(),
        2,
        "only the page's own two scripts close"
    );
}

#[test]
fn ten_thousand_turns_by_two_runs_fit_in_two_megabytes_with_every_point() {
    let html = render_html(&report(vec![
        run("legacy", 10_000),
        run("checkpoint-manager", 10_000),
    ]));
    assert!(html.len() <= 2 * 1024 * 1024, "{} bytes", html.len());
    for (_, stated, drawn) in series(&html, "tokens") {
        assert_eq!((stated, drawn), (10_000, 10_000));
    }
}

#[test]
fn the_page_refers_to_nothing_outside_itself() {
    let mut r = report(vec![run("legacy", 200), run("lossless", 200)]);
    r.runs[0].probes = Some(ProbeSummary {
        rows: vec![ProbeRow {
            label: "in context".into(),
            reachable: 3,
            total: 4,
        }],
    });
    let html = render_html(&r);
    for reference in ["http://", "https://", "src=", "href=", "@import", "url("] {
        assert!(!html.contains(reference), "the page mentions {reference}");
    }
    assert!(
        html.contains("default-src 'none'"),
        "the page forbids fetches"
    );
}

#[test]
fn output_is_deterministic() {
    let r = report(vec![run("legacy", 500), run("checkpoint-manager", 300)]);
    let first = render_html(&r);
    assert_eq!(first, render_html(&r.clone()));
    assert_eq!(
        first,
        render_html(&report(vec![
            run("legacy", 500),
            run("checkpoint-manager", 300)
        ]))
    );
}

#[test]
fn long_tables_fold_and_degraded_rows_are_capped() {
    let mut r = run("legacy", 200);
    for t in &mut r.turns {
        t.outcome = Outcome::Quarantined;
    }
    let html = render_html(&report(vec![r]));
    assert!(html.contains("<details><summary>100 degraded turns</summary>"));
    assert_eq!(html.matches("<td>quarantined</td>").count(), DEGRADED_ROWS);
    assert!(html.contains("Not listed: 100 more for legacy (all are marked in the tokens plot)."));
    // Four compactions stay open; the tick path still marks all 200 degraded turns.
    assert!(!html.contains("compactions</summary>"));
    let ticks = html
        .split("class=\"degraded s0\"")
        .nth(1)
        .expect("degraded ticks");
    assert_eq!(
        ticks[..ticks.find("<title>").expect("title")]
            .matches('M')
            .count(),
        200
    );
    assert!(html.contains("<title>legacy: 200 degraded turns</title>"));
}

#[test]
fn hover_data_is_sorted_by_message_and_counts_every_turn() {
    let mut r = report(vec![run("legacy", 3)]);
    r.runs[0].turns.swap(0, 2);
    r.runs[0].turns[1].outcome = Outcome::Other("skipped".into());
    let html = render_html(&r);
    let start = html.find("id=\"report-data\">").expect("data") + 17;
    let data = &html[start..start + html[start..].find("</script>").expect("end")];
    assert_eq!(
        data,
        r#"{"runs":[{"name":"legacy","m":[2,4,6],"t":[1000,8919,16838],"p":[null,996,992],"e":[null,231,362],"o":[1,2,0]}],"outcomes":["ok","fallback","skipped"]}"#
    );
}
