use super::*;
use crate::generate::coding_session;

fn session() -> Transcript {
    Transcript::parse(&coding_session(7, 400), "g").unwrap()
}

fn settings(window: u64) -> Settings {
    Settings {
        context_window: window,
        reserve_tokens_floor: 0,
        reserve_tokens: window / 10,
        ..Settings::default()
    }
}

fn request(trigger: Trigger) -> Request<'static> {
    Request {
        trigger,
        ..Request::default()
    }
}

/// A scope over no messages at `share` of the window.
fn scope_at(share: f64, fired: bool) -> Scope<'static> {
    Scope {
        entries: &[],
        boundary: None,
        messages: Vec::new(),
        window: 1000,
        tokens_before: (share * 1000.0) as u64,
        share,
        fired,
    }
}

#[test]
fn admit_refuses_what_the_operator_turned_off_or_capped() {
    let mut s = settings(10_000);
    assert!(admit(&s, &request(Trigger::Auto), 0).is_ok());
    s.policy.max_auto_compactions = 2;
    let capped = admit(&s, &request(Trigger::Auto), 2).unwrap_err();
    assert!(capped.capped && capped.reason.contains("maxAutoCompactions (2)"));
    s.auto_enabled = false;
    let off = admit(&s, &request(Trigger::Overflow), 0).unwrap_err();
    assert!(
        !off.capped && off.reason.contains("an overflow compaction"),
        "{off:?}"
    );
    // A manual compaction is the operator's own: neither stops it.
    assert!(admit(&s, &request(Trigger::Manual), 9).is_ok());
}

#[test]
fn the_layer_follows_the_window_share() {
    let s = settings(1000);
    let auto = request(Trigger::Auto);
    assert_eq!(
        choose_layer(&scope_at(0.96, true), &s, &auto),
        Ok(Layer::Full)
    );
    assert_eq!(
        choose_layer(&scope_at(0.90, true), &s, &auto),
        Ok(Layer::Summarize)
    );
    // No tool output to prune at 85%: below the prune layer, a fired compaction summarizes.
    assert_eq!(
        choose_layer(&scope_at(0.85, true), &s, &auto),
        Ok(Layer::Summarize)
    );
    let below = choose_layer(&scope_at(0.5, false), &s, &auto).unwrap_err();
    assert!(below.reason.contains("50% of the window"), "{below:?}");
    let manual = request(Trigger::Manual);
    assert_eq!(
        choose_layer(&scope_at(0.5, false), &s, &manual),
        Ok(Layer::Summarize)
    );
}

#[test]
fn a_prune_that_saves_too_little_names_what_it_would_save() {
    let pruning = Pruning {
        pruned: HashSet::new(),
        order: Vec::new(),
        saved: 0,
        candidate_saving: 1234,
    };
    let policy = Policy::default();
    let refused = escalate(Layer::Prune, &scope_at(0.82, false), &pruning, &policy).unwrap_err();
    assert!(
        refused.reason.contains("would save 1234 tokens"),
        "{refused:?}"
    );
    let fired = escalate(Layer::Prune, &scope_at(0.82, true), &pruning, &policy);
    assert_eq!(fired, Ok(Layer::Summarize));
    assert_eq!(
        escalate(Layer::Full, &scope_at(0.99, false), &pruning, &policy),
        Ok(Layer::Full)
    );
}

#[test]
fn pruning_applies_only_past_its_minimum_and_spares_recent_outputs() {
    let t = session();
    let s = settings(t.context_tokens());
    let scope = Scope::read(&t, &s, &request(Trigger::Auto));
    let mut policy = Policy {
        prune_protect_tokens: 0,
        prune_minimum_tokens: 1,
        ..Policy::default()
    };
    let pruning = Pruning::plan(&scope, &policy);
    assert!(pruning.applies() && pruning.saved == pruning.candidate_saving);
    // The newest two user turns keep their outputs.
    let last_users: Vec<usize> = scope
        .messages
        .iter()
        .copied()
        .filter(|&i| t.entries()[i].context_role() == Some(Role::User))
        .collect();
    let protected_from = last_users[last_users.len() - 2];
    assert!(pruning.order.iter().all(|&i| i < protected_from));
    policy.prune_minimum_tokens = pruning.candidate_saving + 1;
    let too_little = Pruning::plan(&scope, &policy);
    assert!(!too_little.applies() && too_little.saved == 0);
    assert_eq!(too_little.candidate_saving, pruning.candidate_saving);
}

fn no_pruning(scope: &Scope<'_>) -> Pruning {
    let off = Policy {
        prune_enabled: false,
        ..Policy::default()
    };
    Pruning::plan(scope, &off)
}

#[test]
fn the_cut_keeps_the_recent_tokens_and_never_lands_on_a_tool_result() {
    let t = session();
    let s = settings(t.context_tokens());
    let scope = Scope::read(&t, &s, &request(Trigger::Manual));
    let none = no_pruning(&scope);
    let cut = Cut::find(&scope, &none, Layer::Summarize, &s).unwrap();
    assert!(cut.at > 0 && !cut.split_turn);
    let first_kept = &t.entries()[scope.messages[cut.at]];
    assert_ne!(first_kept.context_role(), Some(Role::ToolResult));
    let kept: u64 = scope.messages[cut.at..]
        .iter()
        .map(|&i| u64::from(t.entries()[i].tokens()))
        .sum();
    assert!(kept >= cut.keep, "{kept} < {}", cut.keep);
    // A layer that keeps more than the whole context has nothing to summarize.
    let mut roomy = settings(t.context_tokens() * 100);
    roomy.keep_recent_tokens = u64::MAX;
    roomy.policy.summarize_keep_recent_tokens = u64::MAX;
    let everything = Cut::find(&scope, &none, Layer::Summarize, &roomy).unwrap_err();
    assert!(
        everything.reason.contains("nothing to summarize"),
        "{everything:?}"
    );
}

#[test]
fn kept_outputs_give_way_until_the_kept_part_fits() {
    let t = session();
    let s = settings(t.context_tokens());
    let scope = Scope::read(&t, &s, &request(Trigger::Manual));
    let none = no_pruning(&scope);
    // Cut at the start: everything is kept, far past the threshold.
    let cut = Cut {
        at: 0,
        keep: 0,
        cap: s.threshold() / 2,
        split_turn: false,
    };
    let kept = Kept::give_way(&scope, &none, &cut, &s);
    assert!(!kept.oversized.is_empty());
    assert!(kept.tokens <= cut.cap, "{} > {}", kept.tokens, cut.cap);
    assert!(
        kept.oversized
            .iter()
            .all(|&i| t.entries()[i].context_role() == Some(Role::ToolResult))
    );
    assert_eq!(
        kept.placeholder_ids(&scope, &none).len(),
        kept.oversized.len()
    );
}
