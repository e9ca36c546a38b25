use super::*;
use crate::model::{Compaction, Outcome, ProbeRow, ProbeSummary};

/// A run of `turns` turns with every figure filled in but the first turn's prefix share
/// and every seventh turn's engine time, and a compaction every 50 turns: the context grows from
/// one to the next and only compactions shrink it.
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
            tokens: 1_000 + (k as u64 % 50) * 460,
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
        if k % 50 == 0 && k > 0 {
            run.compactions.push(Compaction {
                message,
                tokens_before: 23_540,
                tokens_after: 1_000,
                layer: Some("summarize".into()),
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

/// Each series of one plot: its data-run, its data-points and the points its lines and dots
/// hold.
fn series(html: &str, plot: &str) -> Vec<(String, usize, usize)> {
    stretches(html, plot)
        .into_iter()
        .map(|(run, stated, drawn)| (run, stated, drawn.iter().sum()))
        .collect()
}

/// Each series of one plot: its data-run, its data-points and the point count of each line or
/// dot it draws.
fn stretches(html: &str, plot: &str) -> Vec<(String, usize, Vec<usize>)> {
    let start = html
        .find(&format!("data-plot=\"{plot}\""))
        .expect("the plot is there");
    let svg = &html[start..start + html[start..].find("</svg>").expect("the svg closes")];
    svg.split("<g class=\"series ")
        .skip(1)
        .map(|tag| {
            let group = &tag[..tag.find("</g>").expect("the series closes")];
            let attr = |name: &str| {
                let from = group.find(&format!(" {name}=\"")).expect("attribute") + name.len() + 3;
                group[from..from + group[from..].find('"').expect("quoted")].to_owned()
            };
            let drawn = group
                .split("<polyline points=\"")
                .skip(1)
                .map(|line| line[..line.find('"').expect("quoted")].split(' ').count())
                .chain(group.matches("<circle ").map(|_| 1))
                .collect();
            (
                attr("data-run"),
                attr("data-points").parse().expect("a count"),
                drawn,
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
    assert!(html.contains("<h2>Compactions</h2>") && html.contains("23,540"));
    assert!(html.contains("<th>layer</th>") && html.contains("<td>summarize</td>"));
    assert!(
        !html.contains("Engine re-cuts"),
        "only compactions shrink these runs"
    );
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
    assert_eq!(html.matches("<td>quarantined</td>").count(), LISTED_ROWS);
    assert!(html.contains("Not listed: 100 more for legacy (all are marked in the tokens plot)."));
    // Three compactions stay open; the tick path still marks all 200 degraded turns.
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
        r#"{"runs":[{"name":"legacy","m":[2,4,6],"t":[1000,1460,1920],"p":[null,996,992],"e":[null,231,362],"o":[1,2,0]}],"outcomes":["ok","fallback","skipped"]}"#
    );
}

#[test]
fn an_engine_that_cuts_its_own_context_shows_recuts_not_compactions() {
    let mut lossless = run("lossless", 120);
    lossless.compactions.clear();
    let html = render_html(&report(vec![run("legacy", 120), lossless]));
    let figure = |label: &str| {
        let from = html.find(&format!("<th>{label}</th>")).expect(label);
        let row = &html[from..from + html[from..].find("</tr>").expect("row end")];
        row.split("<td>")
            .skip(1)
            .map(|cell| cell.trim_end_matches("</td>").to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(figure("compactions"), ["2", "0"]);
    assert_eq!(figure("engine re-cuts"), ["0", "2"]);
    assert_eq!(figure("tokens cut"), ["45,080", "45,080"]);
    assert!(html.contains("<h2>Engine re-cuts</h2>"));
    let marks = html
        .split("<g class=\"recuts s1\" data-run=\"lossless\">")
        .nth(1)
        .expect("re-cut marks for lossless");
    let marks = &marks[..marks.find("</g>").expect("marks end")];
    assert_eq!(marks.matches("<path ").count(), 2, "{marks}");
    assert!(
        marks.contains("the engine re-cut its context before message 102: 23,540 → 1,000 tokens")
    );
    assert!(
        !html.contains("class=\"recuts s0\""),
        "legacy only compacted"
    );
    // Re-cuts have no layer, so their table has no layer column.
    let table = &html[html.find("<h2>Engine re-cuts</h2>").expect("section")..];
    let table = &table[..table.find("</table>").expect("table end")];
    assert!(!table.contains("layer"), "{table}");
}

#[test]
fn a_compaction_table_without_layers_has_no_layer_column() {
    let mut unlayered = run("legacy", 120);
    for c in &mut unlayered.compactions {
        c.layer = None;
    }
    let html = render_html(&report(vec![unlayered.clone()]));
    assert!(html.contains("<h2>Compactions</h2>") && !html.contains("<th>layer</th>"));
    // One run naming its layers gives the column; the other's cells say they are unknown.
    let html = render_html(&report(vec![unlayered, run("checkpoint-manager", 120)]));
    assert!(html.contains("<th>layer</th>") && html.matches("<td>n/a</td>").count() == 2);
}

#[test]
fn no_line_crosses_a_stretch_without_turns_or_a_turn_without_the_figure() {
    let mut gapped = run("legacy", 30);
    // 400 messages with no turn after the tenth turn.
    for turn in &mut gapped.turns[10..] {
        turn.message += 400;
    }
    gapped.compactions.clear();
    let html = render_html(&report(vec![gapped]));
    let lines = |plot| {
        let (_, stated, drawn) = stretches(&html, plot).remove(0);
        assert_eq!(drawn.iter().sum::<usize>(), stated, "{plot}");
        drawn
    };
    assert_eq!(lines("tokens"), [10, 20]);
    // The first turn has no prefix share; turns 0, 7, 14, 21 and 28 have no engine time, and
    // the stretch cuts turns 8 to 13 in two.
    assert_eq!(lines("prefix"), [9, 20]);
    assert_eq!(lines("engine-time"), [6, 2, 4, 6, 6, 1]);
    assert!(html.contains("<circle "), "a lone point is a dot");
}
