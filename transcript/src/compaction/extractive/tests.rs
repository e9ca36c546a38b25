use super::sections::elided_count;
use super::*;
use crate::message::ToolCall;

pub(in crate::compaction) fn msg(role: Role, text: &str) -> MessageView {
    MessageView {
        role,
        timestamp: 0,
        text: text.into(),
        tool_calls: vec![],
        tool_name: None,
        is_error: false,
        stop_reason: None,
        usage: None,
        tokens: 1,
    }
}

pub(in crate::compaction) fn call(name: &str, args: &str) -> MessageView {
    let mut m = msg(Role::Assistant, "");
    m.tool_calls.push(ToolCall {
        id: "1".into(),
        name: name.into(),
        arguments: args.into(),
    });
    m
}

pub(in crate::compaction) fn result(tool: &str, text: &str, is_error: bool) -> MessageView {
    let mut m = msg(Role::ToolResult, text);
    m.tool_name = Some(tool.into());
    m.is_error = is_error;
    m
}

fn section_of<'a>(summary: &'a str, title: &str) -> &'a str {
    let start = summary
        .find(&format!("## {title}\n"))
        .unwrap_or_else(|| panic!("no {title} in {summary}"));
    let rest = &summary[start..];
    &rest[..rest.find("\n\n").unwrap_or(rest.len())]
}

/// Shedding without rendering takes exactly the steps rendering after each would take:
/// both are run on summaries over their bound by every list in turn, at several bounds.
#[test]
fn shedding_without_rendering_ends_where_rendering_each_step_does() {
    let mut inputs = Vec::new();
    for (requests, failures, files) in [(400, 10, 5), (20, 300, 5), (50, 200, 400), (0, 2, 0)] {
        let mut msgs: Vec<MessageView> = (0..requests)
            .map(|i| msg(Role::User, &format!("request {i} {}", "w ".repeat(i % 13))))
            .collect();
        for i in 0..failures {
            msgs.push(call(
                "bash",
                &format!(r#"{{"command":"make t{}"}}"#, i % 50),
            ));
            msgs.push(result(
                "bash",
                &format!("error: t{i} broke {}", "x".repeat(i % 40)),
                i % 4 != 3,
            ));
        }
        for i in 0..files {
            msgs.push(call(
                "edit",
                &format!(r#"{{"path":"src/d{}/f{i}.rs"}}"#, i % 9),
            ));
            msgs.push(call("read", &format!(r#"{{"path":"docs/n{i}.md"}}"#)));
        }
        msgs.push(msg(Role::Assistant, &"progress ".repeat(30)));
        let mut s = previous(Some(&format!("Model prose {}", "p ".repeat(900))));
        s.learn(&msgs);
        inputs.push(s);
    }
    let mut shortcuts = 0;
    for s in inputs {
        for max in [400, 1200, MAX_CHARS, 20_000] {
            let mut shed = s.clone();
            shed.shed_while_surely_over(max);
            shortcuts += usize::from(shed.failures.len() < s.failures.len());
            assert_eq!(
                shed.render_shedding(max),
                s.clone().render_shedding(max),
                "max {max}"
            );
        }
    }
    assert!(shortcuts >= 3, "the shortcut was taken {shortcuts} times");
}

#[test]
fn sections_from_messages() {
    let msgs = vec![
        msg(Role::User, "Port the selector to the new theme"),
        call("read", r#"{"path":"src/a.ts"}"#),
        result("read", "...", false),
        call("read", r#"{"path":"src/b.ts"}"#),
        call("edit", r#"{"path":"src/b.ts","oldText":"x","newText":"y"}"#),
        call("write", r#"{"file_path":"src/c.ts","content":""}"#),
        call("read", r#"{"path":"/tmp/scratch.txt"}"#),
        call("read", r#"{"path":"docs/"}"#),
        call("read", r#"{"path":"src/missing.ts"}"#),
        result("read", "\nENOENT: no such file\nmore", true),
        msg(Role::User, "Should we keep the old colors?"),
        msg(Role::Assistant, "Done."),
    ];
    let s = summarize(&msgs, None, Some("keep the API notes"));
    assert!(
        s.starts_with("## Current task\n- Should we keep the old colors?\n"),
        "{s}"
    );
    assert!(s.contains("## Started with\n- Port the selector to the new theme\n"));
    assert!(s.contains("## Focus\n- keep the API notes"));
    assert!(
        s.contains("## Files read\n- src/{a.ts, missing.ts}\n\n"),
        "{s}"
    );
    assert!(s.contains("## Files modified\n- src/{b.ts, c.ts}\n"), "{s}");
    assert!(!s.contains("/tmp/") && !s.contains("docs/"), "{s}");
    assert!(
        s.contains("## Tool failures\n- read `src/missing.ts`: ENOENT: no such file\n"),
        "{s}"
    );
    assert!(s.contains("**assistant**: Done."));
    assert_eq!(s, summarize(&msgs, None, Some("keep the API notes")));
}

#[test]
fn the_current_task_is_the_last_real_request_and_survives_ten_merges() {
    let task = "Rewrite the tokenizer so that multi-byte input is counted per character, \
                and keep the public API unchanged";
    let mut summary = summarize(
        &[
            msg(Role::User, "Set up the repo"),
            msg(Role::User, task),
            msg(Role::Assistant, "On it."),
            msg(Role::User, "ok"),
            msg(Role::User, "continue"),
        ],
        None,
        None,
    );
    for i in 0..10 {
        // Ten more compactions of tool work with acknowledgements only.
        let span: Vec<MessageView> = (0..20)
            .flat_map(|j| {
                [
                    call("edit", &format!(r#"{{"path":"src/m{i}/f{j}.rs"}}"#)),
                    result("edit", "ok", false),
                ]
            })
            .chain([msg(Role::User, "yes, go ahead")])
            .collect();
        summary = summarize(&span, Some(&summary), None);
    }
    assert_eq!(
        section_of(&summary, "Current task"),
        format!("## Current task\n- {}", clip(task, CURRENT_CHARS))
    );
    assert!(section_of(&summary, "User requests").contains("- Set up the repo"));
    assert!(!summary.contains("- yes, go ahead"), "{summary}");
    assert!(summary.chars().count() <= MAX_CHARS);
    // the same through the staged merge of partial summaries
    let parts: Vec<String> = (0..10)
        .map(|i| {
            summarize(
                &[msg(Role::User, &format!("request number {i}"))],
                None,
                None,
            )
        })
        .collect();
    let merged = merge(&parts);
    assert!(merged.starts_with("## Current task\n- request number 9\n"));
    assert!(merged.contains("## Started with\n- request number 0\n"));
    for i in 0..10 {
        assert!(
            merged.contains(&format!("- request number {i}\n")),
            "{merged}"
        );
    }
}

#[test]
fn the_current_request_in_the_kept_part_is_named() {
    let s = summarize_at(
        &[msg(Role::User, "Fix the build")],
        None,
        None,
        Some("Now add a CHANGELOG entry"),
    );
    assert!(s.starts_with("## Current task\n- Now add a CHANGELOG entry\n"));
    assert!(
        s.contains("- Fix the build\n- Now add a CHANGELOG entry\n"),
        "{s}"
    );
}

#[test]
fn acknowledgements_and_slash_commands_are_not_requests() {
    for ack in [
        "ok",
        "Yes, do it",
        "continue",
        "/mode",
        "yeah do it all",
        "k",
        "",
    ] {
        assert!(is_acknowledgement(ack), "{ack}");
    }
    for ask in [
        "ok, make muted a little brighter",
        "no, the block should stay as is",
        "f0c674",
    ] {
        assert!(!is_acknowledgement(ask), "{ask}");
    }
}

#[test]
fn an_instruction_given_in_turn_two_survives_until_superseded() {
    let mut summary = summarize(
        &[
            msg(Role::User, "Add retry logic to the client"),
            msg(Role::Assistant, "Sure."),
            msg(
                Role::User,
                "Good. Never push to main directly. Also, use anyhow not unwrap in the CLI.",
            ),
            msg(Role::User, "I don't understand why this fails?"),
        ],
        None,
        None,
    );
    for i in 0..10 {
        let span = [
            msg(Role::User, &format!("Now handle case {i} in the parser")),
            call("bash", r#"{"command":"cargo test"}"#),
            result("bash", "ok", false),
        ];
        summary = summarize(&span, Some(&summary), None);
    }
    let rules = section_of(&summary, "Standing instructions");
    assert!(rules.contains("- Never push to main directly."), "{rules}");
    assert!(
        rules.contains("- Also, use anyhow not unwrap in the CLI."),
        "{rules}"
    );
    assert!(!rules.contains("understand"), "{rules}");
    // A newer rule on the same subject replaces the old one.
    let summary = summarize(
        &[msg(
            Role::User,
            "Change of plan: use thiserror not anyhow in the CLI.",
        )],
        Some(&summary),
        None,
    );
    let rules = section_of(&summary, "Standing instructions");
    assert!(
        rules.contains("use thiserror not anyhow in the CLI"),
        "{rules}"
    );
    assert!(!rules.contains("use anyhow not unwrap"), "{rules}");
    assert!(rules.contains("Never push to main directly"), "{rules}");
}

#[test]
fn a_boilerplate_first_line_is_not_the_failure() {
    let npm = "\n> pi-monorepo@0.0.3 check\n> biome check && tsc\n\nsrc/theme.ts(12,3): error TS2304: Cannot find name 'chalk'.\n";
    let git = "To https://github.com/x/y.git\n ! [rejected]        main -> main (fetch first)\nerror: failed to push some refs";
    let msgs = vec![
        call("bash", r#"{"command":"npm run check\nnpm test"}"#),
        result("bash", npm, true),
        call("bash", r#"{"command":"git push origin main"}"#),
        result("bash", git, true),
        call("edit", r#"{"path":"src/a.ts","oldText":"x"}"#),
        result("edit", "Could not find the exact text in src/a.ts", true),
        call("edit", r#"{"path":"src/a.ts","oldText":"y"}"#),
        result("edit", "Successfully replaced text", false),
    ];
    let s = summarize(&msgs, None, None);
    let failures = section_of(&s, "Tool failures");
    assert!(
        failures.contains(
            "- bash `npm run check`: src/theme.ts(12,3): error TS2304: Cannot find name 'chalk'.\n"
        ),
        "{failures}"
    );
    assert!(
        failures.contains("- bash `git push origin main`: ! [rejected]"),
        "{failures}"
    );
    // Resolved: the error line alone, shorter (the path is in it), read back as resolved.
    assert!(
        failures.contains("- edit: Could not find the exact text in src/a.ts — resolved"),
        "{failures}"
    );
    let again = summarize(&[], Some(&s), None);
    assert_eq!(section_of(&again, "Tool failures"), failures);
    let f = Failure::parse("edit (+2 more): Could not find `x` in a.ts — resolved");
    assert_eq!((f.tool.as_str(), f.more, f.resolved), ("edit", 2, true));
    assert_eq!(f.line, "Could not find `x` in a.ts");
    assert!(!failures.contains("> pi-monorepo"), "{failures}");
    // The same error on other targets is one entry naming the newest and counting the rest.
    let greps: Vec<MessageView> = (0..3)
        .flat_map(|i| {
            [
                call("bash", &format!(r#"{{"command":"grep -n x{i} src"}}"#)),
                result("bash", "Command exited with code 1", true),
            ]
        })
        .collect();
    let s = summarize(&greps, Some(&s), None);
    let failures = section_of(&s, "Tool failures");
    assert!(
        failures.contains("- bash `grep -n x2 src` (+2 more): Command exited with code 1"),
        "{failures}"
    );
    assert_eq!(failures.matches("exited with code 1").count(), 1);
    assert!(failures.contains("bash `npm run check`"), "{failures}");
    // unresolved failures are carried through later compactions
    let later = summarize(&[msg(Role::User, "next thing")], Some(&s), None);
    assert!(
        later.contains("bash `npm run check`: src/theme.ts(12,3)"),
        "{later}"
    );
    assert!(!later.contains(
        "`npm run check`: src/theme.ts(12,3): error TS2304: Cannot find name 'chalk'. — resolved"
    ));
}

#[test]
fn files_are_complete_and_grouped_until_their_budget_then_the_oldest_are_counted() {
    let span = |from: usize, to: usize| -> Vec<MessageView> {
        (from..to)
            .map(|i| {
                call(
                    "edit",
                    &format!(r#"{{"path":"src/mod{}/file{i}.rs"}}"#, i % 4),
                )
            })
            .collect()
    };
    let mut summary = summarize(&span(0, 20), None, None);
    summary = summarize(&span(20, 40), Some(&summary), None);
    let files = section_of(&summary, "Files modified");
    for i in 0..40 {
        assert!(files.contains(&format!("file{i}.rs")), "{files}");
    }
    assert_eq!(files.lines().count(), 5, "one line per directory: {files}");
    // Past the budget: the newest stay, the oldest are counted, across merges.
    for k in 0..10 {
        summary = summarize(&span(40 + k * 40, 80 + k * 40), Some(&summary), None);
    }
    let files = section_of(&summary, "Files modified");
    assert!(files.contains("file439.rs"), "{files}");
    assert!(!files.contains("file0.rs,"), "{files}");
    let elided = files
        .lines()
        .find_map(|l| elided_count(l.trim_start_matches("- ")))
        .expect("a count of the elided files");
    let listed: usize = files
        .lines()
        .skip(2)
        .map(|l| ungrouped(l.trim_start_matches("- ")).len())
        .sum();
    assert_eq!(elided + listed, 440, "{files}");
    assert!(files.len() <= MODIFIED_FILES_BUDGET + 60, "{}", files.len());
}

#[test]
fn the_budget_truncates_the_past_never_the_present() {
    let task = format!("The real task: {}", "keep this ".repeat(60));
    let mut msgs: Vec<MessageView> = (0..300)
        .flat_map(|i| {
            [
                msg(Role::User, &format!("request {i} {}", "y".repeat(90))),
                call(
                    "edit",
                    &format!(r#"{{"path":"src/very/long/path/{i}.rs"}}"#),
                ),
                call("bash", &format!(r#"{{"command":"make target{i}"}}"#)),
                result(
                    "bash",
                    &format!("error: target{i} {}", "z".repeat(200)),
                    true,
                ),
            ]
        })
        .collect();
    msgs.push(msg(Role::User, "Never force-push the release branch."));
    msgs.push(msg(Role::User, &task));
    let s = summarize(&msgs, Some(&"z".repeat(50_000)), Some(&"f".repeat(10_000)));
    assert!(s.chars().count() <= MAX_CHARS, "{}", s.chars().count());
    assert!(s.starts_with(&format!(
        "## Current task\n- {}",
        clip(&task, CURRENT_CHARS)
    )));
    assert!(s.contains("- Never force-push the release branch."), "{s}");
    assert!(s.contains("request 299"), "the newest request stays: {s}");
    assert!(
        files_in(&s)
            .1
            .iter()
            .any(|f| f == "src/very/long/path/299.rs"),
        "the newest file stays: {s}"
    );
    assert!(s.contains("make target299"), "the newest failure stays");
    assert!(s.contains("earlier requests)"), "{s}");
}

#[test]
fn merges_previous_summary_without_nesting() {
    let first = summarize(
        &[
            msg(Role::User, "Goal one"),
            call("edit", r#"{"path":"x.rs"}"#),
        ],
        None,
        None,
    );
    let second = summarize(&[call("write", r#"{"path":"y.rs"}"#)], Some(&first), None);
    assert!(second.contains("## Current task\n- Goal one\n"), "{second}");
    assert!(second.contains("- {x.rs, y.rs}"), "{second}");
    assert_eq!(second.matches("## Current task").count(), 1);
    let free = summarize(&[], Some("The model wrote this."), None);
    assert!(free.contains("## Earlier context\n- The model wrote this."));
    // a summary in the older layout is read too
    let old = "## Goal\n- Old goal\n\n## Files modified\n- a.rs\n\n## Open questions\n- Why?";
    let s = summarize(&[], Some(old), None);
    assert!(s.contains("## Started with\n- Old goal"), "{s}");
    assert!(s.contains("- Why?") && s.contains("- a.rs"), "{s}");
}

#[test]
fn mechanical_facts_for_a_model_summary() {
    let msgs = vec![
        msg(Role::User, "Don't touch the lockfile. Fix the flaky test"),
        call("edit", r#"{"path":"tests/a.rs"}"#),
        call("bash", r#"{"command":"cargo test"}"#),
        result(
            "bash",
            "running 3 tests\nthread 'x' panicked at tests/a.rs:3",
            true,
        ),
    ];
    let m = mechanical(&msgs, None, None);
    assert!(
        m.starts_with("## Current task\n- Don't touch the lockfile."),
        "{m}"
    );
    assert!(m.contains("## Standing instructions\n- Don't touch the lockfile."));
    assert!(m.contains("bash `cargo test`: thread 'x' panicked at tests/a.rs:3"));
    assert!(m.contains("## Files modified\n- tests/a.rs"));
    assert!(!m.contains("Recent exchanges"));
}

/// Every whitespace-separated word the messages hold (tool arguments' strings included), with
/// the quotes and punctuation that may stand around a word in a summary trimmed off.
fn words_of(messages: &[MessageView]) -> HashSet<String> {
    fn strings(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::String(s) => out.push(s.clone()),
            Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
            Value::Object(map) => map.values().for_each(|v| strings(v, out)),
            _ => {}
        }
    }
    let mut texts = Vec::new();
    for m in messages {
        texts.push(m.text.clone());
        for c in &m.tool_calls {
            if let Ok(args) = serde_json::from_str::<Value>(&c.arguments) {
                strings(&args, &mut texts);
            }
        }
    }
    texts
        .iter()
        .flat_map(|t| t.split_whitespace())
        .map(|w| trim_word(w).to_string())
        .collect()
}

fn trim_word(word: &str) -> &str {
    word.trim_matches(|c: char| "`'\"()[]{}<>.,;:!?".contains(c))
}

/// What the demo shows (its generator, replayed through compaction after compaction): a line
/// cut for room ends on a word the messages hold whole, never on a broken one.
#[test]
fn no_summary_line_of_a_generated_session_ends_mid_word() {
    let mut checked = 0;
    for seed in [1, 7, 11, 23] {
        let text = crate::generate::coding_session(seed, 600);
        let views: Vec<MessageView> = crate::Transcript::parse(&text, "generated")
            .unwrap()
            .entries()
            .iter()
            .filter_map(|e| e.view())
            .collect();
        let words = words_of(&views);
        let mut summary: Option<String> = None;
        for span in views.chunks(90) {
            let next = summarize(span, summary.as_deref(), None);
            for line in next.lines() {
                for (at, _) in line.match_indices('…') {
                    let before = line[..at].split_whitespace().last().unwrap_or("");
                    let word = trim_word(before);
                    if word.is_empty() || word == "-" || before.ends_with('/') {
                        continue;
                    }
                    checked += 1;
                    assert!(
                        words.contains(word),
                        "seed {seed}: {line:?} ends on {word:?}, not a word of the session"
                    );
                }
            }
            summary = Some(next);
        }
    }
    assert!(
        checked > 50,
        "only {checked} clipped lines: the test sees too little"
    );
}
