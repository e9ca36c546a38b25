use super::*;
use crate::Transcript;
use crate::compaction::Extractive;
use crate::compaction::Settings;
use crate::compaction::summarizer::SummarizeError;
use crate::entry::PRUNED_TEXT;
use crate::generate::coding_session;
use crate::role::Role;

fn settings(window: u64) -> Settings {
    Settings {
        context_window: window,
        ..Settings::default()
    }
}

fn big() -> Transcript {
    Transcript::parse(&coding_session(5, 900), "g").unwrap()
}

fn apply(t: &mut Transcript, plan: &Plan) -> usize {
    t.append_compaction(&plan.to_new_compaction(), "2026-01-01T00:00:00.000Z")
        .unwrap()
}

/// A window where the session sits at `pct`% (context tokens are usage-based).
fn window_at(t: &Transcript, pct: f64) -> u64 {
    (t.context_tokens() as f64 / pct) as u64
}

#[test]
fn layers_follow_the_window_share() {
    let t = big();
    let tokens = t.context_tokens();
    assert!(tokens > 100_000, "{tokens}");
    let auto = Request {
        trigger: Trigger::Auto,
        ..Request::default()
    };
    let layer = |pct: f64| {
        let mut s = settings(window_at(&t, pct));
        s.reserve_tokens_floor = 0;
        s.reserve_tokens = 1;
        s.policy.prune_minimum_tokens = u64::MAX;
        prepare(&t, &s, &auto).map(|j| j.layer())
    };
    assert_eq!(layer(0.96).unwrap(), Layer::Full);
    // Phase 1 comes first at every layer: when pruning alone gets under 80%, it stops there.
    let mut s = settings(window_at(&t, 0.96));
    s.policy.prune_minimum_tokens = 1000;
    assert_eq!(prepare(&t, &s, &auto).unwrap().layer(), Layer::Prune);
    assert_eq!(layer(0.90).unwrap(), Layer::Summarize);
    let low = layer(0.50).unwrap_err();
    assert!(low.reason.contains("below every layer"), "{}", low.reason);
    assert!(!low.capped);
    // manual always does something
    let s = settings(window_at(&t, 0.5));
    assert_eq!(
        prepare(&t, &s, &Request::default()).unwrap().layer(),
        Layer::Summarize
    );
}

#[test]
fn prune_only_records_ids_and_context_shows_placeholders() {
    let mut t = big();
    let mut s = settings(window_at(&t, 0.83));
    s.reserve_tokens_floor = 0;
    s.reserve_tokens = 1;
    s.policy.prune_minimum_tokens = 1000;
    s.policy.prune_tool_output_tokens = 1000;
    let before_bytes = t.to_v3_string();
    let job = prepare(
        &t,
        &s,
        &Request {
            trigger: Trigger::Auto,
            ..Request::default()
        },
    )
    .unwrap();
    assert_eq!(job.layer(), Layer::Prune);
    let est = job.estimate();
    assert!(est.tool_outputs_pruned > 0);
    let plan = job.run(&Extractive);
    let details = plan.details.to_value();
    assert_eq!(details["layer"], "prune");
    assert_eq!(plan.messages_compacted, 0);
    let ids: Vec<String> = details["prunedEntryIds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert!(!ids.is_empty());
    let c = apply(&mut t, &plan);
    // the file's old bytes are untouched: only a line was added
    assert!(t.to_v3_string().starts_with(&before_bytes));
    let i = t.index_of(&ids[0]).unwrap();
    assert!(t.entries()[i].is_pruned());
    assert!(t.context_message_json(i).contains(PRUNED_TEXT));
    assert!(!t.entries()[i].message_json().contains(PRUNED_TEXT));
    assert!(t.context().contains(&i));
    assert_eq!(t.context()[0], c);
    assert!(t.context_tokens() < plan.tokens_before);
    // protected: the newest tool results are never pruned
    let last_tool = t
        .context()
        .iter()
        .copied()
        .rev()
        .find(|&j| t.entries()[j].context_role() == Some(Role::ToolResult))
        .unwrap();
    assert!(!t.entries()[last_tool].is_pruned());
    // reloading gives the same pruned view
    let again = Transcript::parse(&t.to_v3_string(), "again").unwrap();
    assert!(again.entries()[i].is_pruned());
    assert_eq!(again.context_tokens(), t.context_tokens());
    assert_eq!(again.compaction_stats().total, 1);
    assert_eq!(again.compaction_stats().summarizing, 0);
}

#[test]
fn summarize_keeps_recent_and_records_details() {
    let mut t = big();
    let mut s = settings(window_at(&t, 0.90));
    s.policy.prune_minimum_tokens = u64::MAX;
    let job = prepare(
        &t,
        &s,
        &Request {
            trigger: Trigger::Auto,
            focus: Some("the parser"),
            engine: Some("legacy"),
            context_tokens: None,
        },
    )
    .unwrap();
    assert_eq!(job.layer(), Layer::Summarize);
    let counting = Counting::new(Extractive);
    let plan = job.run(&counting);
    assert!(counting.calls() > 0);
    let d = &plan.details.to_value();
    for key in [
        "tokensAfter",
        "layer",
        "trigger",
        "messagesCompacted",
        "engine",
        "summarizer",
        "focus",
        "compactionCount",
        "summaryCount",
        "degradation",
    ] {
        assert!(d.get(key).is_some(), "{key} missing: {d}");
    }
    assert_eq!(d["trigger"], "auto");
    assert_eq!(d["summarizer"], "extractive");
    assert!(plan.summary.contains("## Focus\n- the parser"));
    let first = plan.first_kept_index;
    assert_ne!(t.entries()[first].context_role(), Some(Role::ToolResult));
    let kept: u64 = t
        .context()
        .iter()
        .copied()
        .filter(|&i| i >= first)
        .map(|i| u64::from(t.entries()[i].tokens()))
        .sum();
    assert!(kept >= 25_000 || kept >= s.threshold() / 2, "{kept}");
    apply(&mut t, &plan);
    assert!(t.context_tokens() < plan.tokens_before / 2);
    assert_eq!(t.compaction_stats().summarizing, 1);
}

#[test]
fn max_auto_compactions_caps_a_run_and_warnings_come_at_three() {
    let mut t = Transcript::parse(&coding_session(9, 2000), "g").unwrap();
    let mut s = settings(window_at(&t, 0.9));
    s.policy.summarize_keep_recent_tokens = 2000;
    s.keep_recent_tokens = 2000;
    s.policy.max_auto_compactions = 2;
    s.policy.prune_minimum_tokens = u64::MAX;
    let auto = Request {
        trigger: Trigger::Auto,
        ..Request::default()
    };
    // Strip user turns from consideration: compactions back to back count in one run.
    let mut warned = false;
    for n in 1..=2 {
        let mut s2 = s.clone();
        s2.context_window = window_at(&t, 0.9);
        let plan = prepare(&t, &s2, &auto).unwrap().run(&Extractive);
        warned |= !plan.warnings.is_empty();
        assert_eq!(plan.details.summary_count, Some(n));
        apply(&mut t, &plan);
    }
    assert!(!warned, "no warning before the third");
    let mut s3 = s.clone();
    s3.context_window = window_at(&t, 0.9);
    let skip = prepare(&t, &s3, &auto).unwrap_err();
    assert!(skip.capped, "{}", skip.reason);
    assert!(skip.reason.contains("maxAutoCompactions (2)"));
    // a manual compaction is not capped, and the third summary warns
    for n in 0..6 {
        let text = format!("message {n} {}", "word ".repeat(800));
        let m = if n % 2 == 0 {
            serde_json::json!({"role":"user","content":text})
        } else {
            serde_json::json!({"role":"assistant","content":[{"type":"text","text":text}],"stopReason":"stop"})
        };
        t.append_message(&m, "2026-01-02T00:00:00.000Z").unwrap();
    }
    assert_eq!(
        t.compaction_stats().auto_in_run,
        0,
        "a user message starts a new run"
    );
    s3.policy.summarize_keep_recent_tokens = 500;
    s3.keep_recent_tokens = 500;
    let plan = prepare(&t, &s3, &Request::default())
        .unwrap()
        .run(&Extractive);
    assert_eq!(plan.degradation.risk, Risk::High);
    assert!(
        plan.warnings.iter().any(|w| w.contains("#3")),
        "{:?}",
        plan.warnings
    );
}

#[test]
fn degradation_levels() {
    let r = |n| degradation(n).risk;
    assert_eq!(r(0), Risk::Low);
    assert_eq!(r(1), Risk::Low);
    assert_eq!(r(2), Risk::Medium);
    assert_eq!(r(3), Risk::High);
    assert_eq!(r(5), Risk::Critical);
    assert!(degradation(5).recommendation.contains("export"));
}

#[test]
fn a_context_past_its_window_is_never_low_risk() {
    assert_eq!(degradation_at(0, 0.99).risk, Risk::Low);
    let over = degradation_at(0, 65.5);
    assert_eq!(over.risk, Risk::Critical);
    assert!(
        over.recommendation.contains("6550%"),
        "{}",
        over.recommendation
    );
    assert_eq!(degradation_at(6, 2.0), degradation(6));
}

/// A summarizer that counts the calls it passes on.
struct Counting<S> {
    inner: S,
    calls: std::sync::atomic::AtomicUsize,
}

impl<S: Summarizer> Counting<S> {
    fn new(inner: S) -> Self {
        Self {
            inner,
            calls: Default::default(),
        }
    }
    fn calls(&self) -> usize {
        self.calls.load(std::sync::atomic::Ordering::Relaxed)
    }
    fn count(&self) {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl<S: Summarizer> Summarizer for Counting<S> {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn summarize(&self, r: &SummaryRequest<'_>) -> Result<String, SummarizeError> {
        self.count();
        self.inner.summarize(r)
    }
    fn merge(&self, parts: &[String], focus: Option<&str>) -> Result<String, SummarizeError> {
        self.count();
        self.inner.merge(parts, focus)
    }
}

/// A summarizer that fails in scripted ways.
struct Flaky {
    fail_full_over: Option<u32>,
    always: bool,
}

impl Summarizer for Flaky {
    fn name(&self) -> String {
        "flaky".into()
    }
    fn summarize(&self, r: &SummaryRequest<'_>) -> Result<String, SummarizeError> {
        let big = r
            .messages
            .iter()
            .any(|m| Some(m.tokens) > self.fail_full_over);
        if self.always || (self.fail_full_over.is_some() && big) {
            return Err(SummarizeError::new("HTTP 500 from http://x: boom"));
        }
        Ok(format!("summary of {} messages", r.messages.len()))
    }
    fn merge(&self, parts: &[String], _: Option<&str>) -> Result<String, SummarizeError> {
        Ok(parts.join(" + "))
    }
}

fn view(role: Role, tokens: u32) -> MessageView {
    MessageView {
        role,
        timestamp: 0,
        text: "x".repeat(tokens as usize * 4),
        tool_calls: vec![],
        tool_name: None,
        is_error: false,
        stop_reason: None,
        usage: None,
        tokens,
    }
}

#[test]
fn fallback_tiers() {
    let msgs = vec![
        view(Role::User, 10),
        view(Role::ToolResult, 6000),
        view(Role::Assistant, 10),
    ];
    let mut errors = Vec::new();
    let ok = Flaky {
        fail_full_over: None,
        always: false,
    };
    assert_eq!(
        summarize_with_fallback(&ok, &only(&msgs), 10_000, &mut errors),
        ("summary of 3 messages".into(), Tier::Full)
    );
    let partial = Flaky {
        fail_full_over: Some(5000),
        always: false,
    };
    let (s, tier) = summarize_with_fallback(&partial, &only(&msgs), 10_000, &mut errors);
    assert_eq!(tier, Tier::Partial);
    assert!(
        s.contains("[Large toolResult (~6K tokens) omitted from summary]"),
        "{s}"
    );
    let dead = Flaky {
        fail_full_over: None,
        always: true,
    };
    let (s, tier) = summarize_with_fallback(&dead, &only(&msgs), 10_000, &mut errors);
    assert_eq!(tier, Tier::Note);
    assert!(s.starts_with("[Summary unavailable"), "{s}");
    assert!(s.contains("## "), "extractive facts follow: {s}");
}

#[test]
fn stages_split_by_token_share_and_merge() {
    let msgs: Vec<MessageView> = (0..40)
        .map(|i| {
            view(
                if i % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                },
                1000,
            )
        })
        .collect();
    let parts = split_by_token_share(&msgs, 2);
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[0].len() + parts[1].len(), 40);
    let ok = Flaky {
        fail_full_over: None,
        always: false,
    };
    let policy = Policy::default();
    // 40k tokens * 1.2 > 0.4 * 50k: staged
    let ok = Counting::new(ok);
    let (s, tier, errors) = summarize_in_stages(&ok, &only(&msgs), 50_000, &policy);
    assert_eq!(s, "summary of 20 messages + summary of 20 messages");
    assert_eq!(tier, Tier::Full);
    assert!(errors.is_empty());
    assert_eq!(ok.calls(), 3, "two parts and their merge");
    // fits the budget: one call
    let (s, _, _) = summarize_in_stages(&ok, &only(&msgs), 1_000_000, &policy);
    assert_eq!(s, "summary of 40 messages");
    // large messages shrink the chunk ratio
    let huge = vec![view(Role::ToolResult, 30_000); 4];
    let r = adaptive_chunk_ratio(&huge, 100_000, &policy);
    assert!((0.15..0.4).contains(&r), "{r}");
}

#[test]
fn tool_results_stay_with_their_call_when_split() {
    let msgs = vec![
        view(Role::User, 100),
        view(Role::Assistant, 100),
        view(Role::ToolResult, 100),
        view(Role::ToolResult, 100),
        view(Role::Assistant, 100),
    ];
    for p in split_by_token_share(&msgs, 3) {
        assert_ne!(p[0].role, Role::ToolResult);
    }
}

/// A transcript of the given messages.
/// `(role, text, tool)`: an assistant's tool call, or a result's tool and `isError`.
type Line<'a> = (&'a str, String, Option<(&'a str, bool)>);

/// A request for just these messages.
fn only(messages: &[MessageView]) -> SummaryRequest<'_> {
    SummaryRequest {
        messages,
        previous_summary: None,
        focus: None,
        current_request: None,
    }
}

fn session_of(messages: &[Line<'_>]) -> Transcript {
    let mut t = Transcript::new("s", "/w", "2026-01-01T00:00:00.000Z");
    for (n, (role, text, tool)) in messages.iter().enumerate() {
        let m = match (*role, tool) {
            ("assistant", Some((name, _))) => serde_json::json!({
                "role": "assistant",
                "content": [{"type": "toolCall", "id": format!("c{n}"), "name": name,
                             "arguments": {"path": format!("src/f{n}.rs")}}],
                "stopReason": "toolUse",
            }),
            ("toolResult", Some((name, is_error))) => serde_json::json!({
                "role": "toolResult", "toolCallId": format!("c{}", n - 1), "toolName": name,
                "content": [{"type": "text", "text": text}], "isError": is_error,
            }),
            (role, _) => serde_json::json!({"role": role, "content": text}),
        };
        t.append_message(&m, "2026-01-01T00:00:00.000Z").unwrap();
    }
    t
}

#[test]
fn a_turn_bigger_than_what_is_kept_is_cut_between_its_steps() {
    // The context starts inside one long turn (an earlier cut kept from its first step), and
    // its first result alone passes the kept budget: no cut point lies before it.
    let huge = "x".repeat(48_000);
    let t = session_of(&[
        ("assistant", String::new(), Some(("read", false))),
        ("toolResult", huge.clone(), Some(("read", false))),
        ("assistant", String::new(), Some(("read", false))),
        ("toolResult", "small".into(), Some(("read", false))),
        ("assistant", String::new(), Some(("edit", false))),
        ("toolResult", "done".into(), Some(("edit", false))),
    ]);
    let s = Settings {
        context_window: 32_000,
        reserve_tokens: 3_200,
        reserve_tokens_floor: 0,
        keep_recent_tokens: 10_000,
        ..Settings::default()
    };
    let request = Request {
        trigger: Trigger::Overflow,
        ..Request::default()
    };
    let job = prepare(&t, &s, &request).expect("a cut inside the turn");
    let plan = job.run(&Extractive);
    assert_eq!(plan.first_kept_index, 2, "kept from the second step");
    assert_ne!(
        t.entries()[plan.first_kept_index].context_role(),
        Some(Role::ToolResult)
    );
    assert_eq!(plan.details.to_value()["splitTurn"], true);
    assert!(plan.warnings.iter().any(|w| w.contains("newest turn")));
    assert!(plan.summary.contains("src/f0.rs"), "{}", plan.summary);
    assert!(plan.tokens_after < plan.tokens_before);
}

/// One assistant message calling `read` on each path, then each result (`chars` long).
fn batch_of(t: &mut Transcript, paths: &[&str], chars: usize) {
    let at = "2026-01-01T00:00:00.000Z";
    let calls: Vec<serde_json::Value> = paths
        .iter()
        .map(|p| serde_json::json!({"type": "toolCall", "id": format!("b-{p}"), "name": "read", "arguments": {"path": p}}))
        .collect();
    let m = serde_json::json!({"role": "assistant", "content": calls, "stopReason": "toolUse"});
    t.append_message(&m, at).unwrap();
    for p in paths {
        let text = format!(
            "// opening line of {p}\n{}",
            "let x = 1;\n".repeat(chars / 11)
        );
        let m = serde_json::json!({"role": "toolResult", "toolCallId": format!("b-{p}"),
            "toolName": "read", "content": [{"type": "text", "text": text}], "isError": false});
        t.append_message(&m, at).unwrap();
    }
}

#[test]
fn a_batch_of_results_bigger_than_the_window_still_leaves_room_for_the_next_call() {
    let s = Settings {
        context_window: 16_000,
        reserve_tokens: 1_600,
        reserve_tokens_floor: 0,
        keep_recent_tokens: 5_000,
        ..Settings::default()
    };
    let request = Request {
        trigger: Trigger::Overflow,
        ..Request::default()
    };
    // A request, then one batch of two ~10k-token reads: the batch alone passes the window,
    // and no cut may fall inside it.
    let mut t = session_of(&[("user", "Read the two big modules".into(), None)]);
    batch_of(&mut t, &["src/big_a.rs", "src/big_b.rs"], 40_000);
    let before: u64 = t
        .context()
        .iter()
        .map(|&i| u64::from(t.entries()[i].tokens()))
        .sum();
    assert!(before > s.context_window, "{before}");
    let plan = prepare(&t, &s, &request)
        .expect("a usable context, not \"no cut point\"")
        .run(&Extractive);
    // The call and both results are kept together; their outputs are placeholders.
    let kept = &t.entries()[plan.first_kept_index];
    assert_eq!(kept.context_role(), Some(Role::Assistant));
    assert_eq!(plan.details.pruned_entry_ids.len(), 2, "{:?}", plan.details);
    assert!(
        plan.tokens_after < s.threshold(),
        "{} tokens after",
        plan.tokens_after
    );
    // The summary quotes each output's opening line, named by its call.
    for p in ["src/big_a.rs", "src/big_b.rs"] {
        assert!(
            plan.summary.contains(&format!("read `{p}` ("))
                && plan.summary.contains(&format!("opening line of {p}")),
            "{}",
            plan.summary
        );
    }
    assert!(plan.warnings.iter().any(|w| w.contains("placeholders")));
    assert!(plan.summary.chars().count() <= extractive::MAX_CHARS);
    let after = apply(&mut t, &plan);
    assert!(after > 0);
    let ctx: u64 = t
        .context()
        .iter()
        .map(|&i| u64::from(t.entries()[i].tokens()))
        .sum();
    assert!(ctx < s.threshold(), "the next call fits: {ctx} tokens");

    // Nothing but the batch in the context: it is still compacted, not refused.
    let mut only_batch = Transcript::new("s", "/w", "2026-01-01T00:00:00.000Z");
    batch_of(&mut only_batch, &["src/big_a.rs", "src/big_b.rs"], 40_000);
    let plan = prepare(&only_batch, &s, &request)
        .expect("no \"no cut point\"")
        .run(&Extractive);
    assert_eq!(plan.first_kept_index, only_batch.context()[0]);
    assert!(
        plan.summary.contains("opening line of src/big_b.rs"),
        "{}",
        plan.summary
    );
    assert!(plan.tokens_after < s.threshold());
}

#[test]
fn the_summary_names_the_request_the_user_is_on_and_errors_are_never_pruned() {
    let big = "y".repeat(40_000);
    let t = session_of(&[
        ("user", "Migrate the config loader to TOML".into(), None),
        ("assistant", String::new(), Some(("bash", false))),
        (
            "toolResult",
            "> build\nerror[E0432]: unresolved import `toml`".into(),
            Some(("bash", true)),
        ),
        ("assistant", String::new(), Some(("bash", false))),
        ("toolResult", big, Some(("bash", false))),
        ("user", "ok".into(), None),
        ("assistant", "Porting.".into(), None),
        (
            "user",
            "Also port the CLI flags, keep the old names".into(),
            None,
        ),
    ]);
    let s = Settings {
        context_window: 40_000,
        reserve_tokens: 4_000,
        reserve_tokens_floor: 0,
        keep_recent_tokens: 1,
        ..Settings::default()
    };
    let mut policy = Policy {
        prune_protect_tokens: 0,
        prune_minimum_tokens: 0,
        ..Policy::default()
    };
    policy.prune_tool_output_tokens = 0;
    let s = Settings { policy, ..s };
    let plan = prepare(&t, &s, &Request::default())
        .unwrap()
        .run(&Extractive);
    assert!(
        plan.summary
            .starts_with("## Current task\n- Also port the CLI flags, keep the old names\n"),
        "{}",
        plan.summary
    );
    // The summarized request cites the message it came from.
    let request = t.entries()[0].id();
    assert!(
        plan.summary.contains(&format!(
            "- Migrate the config loader to TOML [#{request}]\n"
        )),
        "{}",
        plan.summary
    );
    assert!(
        plan.summary
            .contains("bash `src/f1.rs`: error[E0432]: unresolved import `toml`"),
        "{}",
        plan.summary
    );
    // Phase 1 on the same history: the failed result is not among the pruned.
    let (pruned, _) = prepare::prune_candidates(t.entries(), t.context(), &s.policy);
    let entries = t.entries();
    assert_eq!(pruned, [4], "the big successful output only");
    assert!(
        pruned
            .iter()
            .all(|&i| !entries[i].view().is_some_and(|v| v.is_error)),
        "{pruned:?}"
    );
}

#[test]
fn nothing_to_summarize_when_everything_fits() {
    let t = Transcript::parse(&coding_session(1, 10), "g").unwrap();
    let skip = prepare(&t, &Settings::default(), &Request::default()).unwrap_err();
    assert!(skip.reason.contains("everything fits"), "{}", skip.reason);
}

#[test]
fn keep_recent_compactions_on_a_generated_session_accumulate_files() {
    let mut t = Transcript::parse(&coding_session(11, 300), "g").unwrap();
    let mut settings = Settings {
        keep_recent_tokens: 6000,
        ..Settings::default()
    };
    // Whole outputs: the kept part is counted from the entries as they are.
    settings.policy.prune_minimum_tokens = u64::MAX;
    let focused = Request {
        focus: Some("keep the failing tests in mind"),
        ..Request::default()
    };
    let p = prepare(&t, &settings, &focused).unwrap().run(&Extractive);
    let e = t.entries();
    let first = &e[p.first_kept_index];
    assert_eq!(first.id(), p.first_kept_entry_id);
    assert_ne!(
        first.context_role(),
        Some(Role::ToolResult),
        "cut on a toolResult"
    );
    assert!(first.context_role().is_some());

    let ctx = t.context();
    let pos = ctx.iter().position(|&i| i == p.first_kept_index).unwrap();
    let kept: u64 = ctx[pos..].iter().map(|&i| u64::from(e[i].tokens())).sum();
    assert!(kept >= settings.keep_recent_tokens, "kept {kept}");
    assert_eq!(p.messages_compacted, pos);
    assert_eq!(p.tokens_before, t.context_tokens());
    assert!(p.tokens_after < p.tokens_before);
    assert!(
        p.summary
            .contains("## Focus\n- keep the failing tests in mind")
    );

    // the summary names a file modified before the cut, and the record lists them all
    let views: Vec<MessageView> = ctx[..pos].iter().filter_map(|&i| e[i].view()).collect();
    let (_, modified) = extractive::file_operations(&views);
    assert!(!modified.is_empty());
    let (_, mut listed) = extractive::files_in(&p.summary);
    let mut expected = modified.clone();
    listed.sort();
    expected.sort();
    assert_eq!(listed, expected, "{}", p.summary);
    let recorded = p.details.modified_files.clone().unwrap();
    assert_eq!(recorded.len(), modified.len());

    // applying it: boundary loading now starts with the summary
    let c = apply(&mut t, &p);
    assert_eq!(t.context()[0], c);
    assert_eq!(t.context()[1], p.first_kept_index);
    assert!(t.context_tokens() < p.tokens_before);
    assert_eq!(t.compaction_count(), 1);

    // nothing new since: no automatic compaction is due
    let auto = Request {
        trigger: Trigger::Auto,
        ..Request::default()
    };
    assert!(prepare(&t, &settings, &auto).is_err());
    // a tighter budget cuts again, after the previous boundary, merging its summary and files
    let tighter = Settings {
        keep_recent_tokens: 2000,
        ..settings
    };
    let p2 = prepare(&t, &tighter, &Request::default())
        .unwrap()
        .run(&Extractive);
    assert!(p2.first_kept_index > p.first_kept_index);
    assert_eq!(p2.summary.matches("## Current task").count(), 1);
    let modified_after = p2.details.modified_files.clone().unwrap();
    for m in &recorded {
        assert!(modified_after.contains(m), "{m} dropped");
    }
    apply(&mut t, &p2);
    assert_eq!(t.compaction_count(), 2);
}

#[test]
fn with_automatic_compaction_off_only_a_manual_one_runs() {
    let t = big();
    let mut s = settings(window_at(&t, 0.96));
    s.auto_enabled = false;
    for trigger in [Trigger::Auto, Trigger::Overflow] {
        let skip = prepare(
            &t,
            &s,
            &Request {
                trigger,
                ..Request::default()
            },
        )
        .unwrap_err();
        assert!(skip.reason.contains("enabled: false"), "{}", skip.reason);
        assert!(!skip.capped);
    }
    assert_eq!(
        prepare(&t, &s, &Request::default()).unwrap().layer(),
        Layer::Full
    );
}

#[test]
fn with_pruning_off_the_summarize_layer_runs_where_prune_would_have() {
    let t = big();
    let mut s = settings(window_at(&t, 0.83));
    s.reserve_tokens_floor = 0;
    s.reserve_tokens = 1;
    s.policy.prune_minimum_tokens = 1000;
    s.policy.prune_tool_output_tokens = 1000;
    let auto = Request {
        trigger: Trigger::Auto,
        ..Request::default()
    };
    assert_eq!(prepare(&t, &s, &auto).unwrap().layer(), Layer::Prune);
    s.policy.prune_enabled = false;
    let job = prepare(&t, &s, &auto).unwrap();
    assert_eq!(job.layer(), Layer::Summarize);
    assert_eq!(job.estimate().tool_outputs_pruned, 0);
}

#[test]
fn an_earlier_auto_threshold_fires_below_the_layers_and_summarizes() {
    let t = big();
    let mut s = settings(window_at(&t, 0.60));
    let auto = Request {
        trigger: Trigger::Auto,
        ..Request::default()
    };
    assert!(prepare(&t, &s, &auto).is_err(), "below every layer");
    s.auto_threshold_ratio = Some(0.50);
    s.policy.prune_minimum_tokens = u64::MAX;
    assert_eq!(prepare(&t, &s, &auto).unwrap().layer(), Layer::Summarize);
}
