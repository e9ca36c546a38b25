//! Summaries pinned byte for byte: the outputs below were written by the summarizer before its
//! list operations were made linear (issue 26), so a change of what it writes shows here. To
//! write them anew after a deliberate change: `CTXHOST_BLESS=1 cargo test -p
//! ctxhost-transcript golden`.

use super::extractive::tests::{call, msg, result};
use super::extractive::{
    bounded, files_in, mechanical, mechanical_merge, merge, summarize, summarize_at,
};
use super::{Extractive, Request, Settings, prepare};
use crate::Transcript;
use crate::generate::{coding_session, short_message_session};
use crate::message::MessageView;
use crate::role::Role;

const GOLDEN: &str = include_str!("golden/summaries.txt");
const GOLDEN_PATH: &str = "src/compaction/golden/summaries.txt";

fn views(text: &str) -> Vec<MessageView> {
    Transcript::parse(text, "golden")
        .unwrap()
        .entries()
        .iter()
        .filter_map(|e| e.view())
        .collect()
}

/// Thousands of distinct failures (a third of them resolved by a retry), files in many
/// directories and a request per failure: every list past its budget at once.
fn failing_session() -> Vec<MessageView> {
    let mut out = Vec::new();
    for k in 0..3000 {
        out.push(msg(Role::User, &format!("Build target {k} again")));
        let target = if k % 3 == 2 { k - 1 } else { k };
        let (tool, arguments) = if k % 2 == 0 {
            (
                "edit",
                format!(r#"{{"path":"src/d{}/f{target}.rs"}}"#, target % 37),
            )
        } else {
            ("bash", format!(r#"{{"command":"make target{target}"}}"#))
        };
        out.push(call(tool, &arguments));
        out.push(if k % 3 == 2 {
            result(tool, "done", false)
        } else {
            result(
                tool,
                &format!("error: target{target} failed ({})", k % 5),
                true,
            )
        });
    }
    out
}

/// Each case: a name and what the summarizer writes for it.
fn cases() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let short = views(&short_message_session(11, 4000));
    let one = summarize(&short, None, None);
    out.push(("short 4000, one summary".into(), one.clone()));
    let coding = views(&coding_session(12, 3000));
    out.push((
        "coding 3000, focus and current request".into(),
        summarize_at(
            &coding,
            None,
            Some("keep the API notes"),
            Some("Now add a CHANGELOG entry"),
        ),
    ));
    let chained = views(&short_message_session(13, 5000));
    let mut summary: Option<String> = None;
    let mut partials = Vec::new();
    for chunk in chained.chunks(500) {
        let next = summarize(chunk, summary.as_deref(), None);
        partials.push(summarize(chunk, None, None));
        summary = Some(next);
    }
    let summary = summary.unwrap_or_default();
    out.push(("short 5000, ten chained summaries".into(), summary.clone()));
    out.push(("merge of ten partials".into(), merge(&partials)));
    out.push((
        "mechanical".into(),
        mechanical(&coding, Some(&summary), Some("Now add a CHANGELOG entry")),
    ));
    out.push(("mechanical merge".into(), mechanical_merge(&partials)));
    out.push(("bounded to 1500".into(), bounded(&one, 1500)));
    let failing = failing_session();
    let failed = summarize(&failing, Some(&summary), Some("the build"));
    out.push(("3000 failures".into(), failed.clone()));
    out.push((
        "3000 failures, bounded to 2000".into(),
        bounded(&failed, 2000),
    ));
    let (read, modified) = files_in(&summary);
    out.push((
        "files of the chained summary".into(),
        format!("read: {}\nmodified: {}", read.join(" "), modified.join(" ")),
    ));
    let t = Transcript::parse(&short_message_session(14, 6000), "golden").unwrap();
    let plan = prepare(&t, &Settings::default(), &Request::default())
        .unwrap()
        .run(&Extractive);
    out.push((
        "compaction of short 6000".into(),
        format!(
            "first kept {}, {} -> {} tokens\n{}",
            plan.first_kept_index, plan.tokens_before, plan.tokens_after, plan.summary
        ),
    ));
    out
}

fn render(cases: &[(String, String)]) -> String {
    cases
        .iter()
        .map(|(name, text)| format!("=== {name}\n{text}\n"))
        .collect()
}

#[test]
fn golden_summaries_are_unchanged() {
    let cases = cases();
    if std::env::var_os("CTXHOST_BLESS").is_some() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(GOLDEN_PATH);
        std::fs::write(path, render(&cases)).unwrap();
        return;
    }
    let pinned: Vec<(&str, &str)> = GOLDEN
        .split("=== ")
        .skip(1)
        .map(|case| case.split_once('\n').unwrap())
        .collect();
    assert_eq!(
        pinned.len(),
        cases.len(),
        "cases added or removed: bless anew"
    );
    for ((name, text), (pinned_name, pinned_text)) in cases.iter().zip(pinned) {
        assert_eq!(name, pinned_name);
        assert_eq!(format!("{text}\n"), pinned_text, "{name}");
    }
}
