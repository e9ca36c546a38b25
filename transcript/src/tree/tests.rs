use serde_json::json;

use super::*;

const V3_HEADER: &str =
    r#"{"type":"session","version":3,"id":"s1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}"#;

fn msg(id: &str, parent: Option<&str>, message: &str) -> String {
    let parent = parent.map_or("null".to_string(), |p| format!("\"{p}\""));
    format!(
        r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2025-01-01T00:00:01.000Z","message":{message}}}"#
    )
}

fn user(text: &str) -> String {
    format!(r#"{{"role":"user","content":"{text}","timestamp":1}}"#)
}

fn assistant(text: &str, total: u64, stop: &str) -> String {
    format!(
        r#"{{"role":"assistant","content":[{{"type":"text","text":"{text}"}}],"usage":{{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":{total}}},"stopReason":"{stop}","timestamp":2}}"#
    )
}

fn tool_result(text: &str) -> String {
    format!(
        r#"{{"role":"toolResult","toolCallId":"t","toolName":"read","content":[{{"type":"text","text":"{text}"}}],"isError":false,"timestamp":3}}"#
    )
}

fn doc(lines: &[String]) -> String {
    let mut s = V3_HEADER.to_string();
    for l in lines {
        s.push('\n');
        s.push_str(l);
    }
    s.push('\n');
    s
}

fn ids(t: &Transcript, idx: &[usize]) -> Vec<String> {
    idx.iter()
        .map(|&i| t.entries()[i].id().to_string())
        .collect()
}

fn err_of(text: &str) -> TranscriptError {
    Transcript::parse(text, "f.jsonl").unwrap_err()
}

#[test]
fn v1_is_migrated_with_synthetic_ids_and_mapped_index() {
    let m0 = user("first");
    let m1 = assistant("reply", 100, "stop");
    let m2 = user("second");
    let text = [
        r#"{"type":"session","id":"old","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w","provider":"p","modelId":"m"}"#.to_string(),
        format!(r#"{{"type":"message","timestamp":"2025-01-01T00:00:01.000Z","message":{m0}}}"#),
        format!(r#"{{"type":"message","timestamp":"2025-01-01T00:00:02.000Z","message":{m1}}}"#),
        r#"{"type":"thinking_level_change","timestamp":"2025-01-01T00:00:03.000Z","thinkingLevel":"low"}"#.to_string(),
        // index 2 counts the header as 0: it means the second entry (the assistant message)
        r#"{"type":"compaction","timestamp":"2025-01-01T00:00:04.000Z","summary":"sum","firstKeptEntryIndex":2,"tokensBefore":500}"#.to_string(),
        format!(r#"{{"type":"message","timestamp":"2025-01-01T00:00:05.000Z","message":{m2}}}"#),
    ]
    .join("\n")
        + "\n";
    let t = Transcript::parse(&text, "v1.jsonl").unwrap();
    assert_eq!(t.header().version(), 1);
    assert!(t.is_migrated());
    assert_eq!(t.header().cwd(), Some("/w"));
    let e = t.entries();
    assert_eq!(
        ids(&t, &[0, 1, 2, 3, 4]),
        ["00000000", "00000001", "00000002", "00000003", "00000004"]
    );
    assert_eq!(e[0].parent_id(), None);
    assert_eq!(e[3].parent_id(), Some("00000002"));
    assert_eq!(e[3].first_kept_entry_id(), Some("00000001"));
    assert_eq!(e[3].tokens_before(), 500);
    // the message bytes are untouched by migration
    assert_eq!(e[0].message_json(), m0);
    assert_eq!(e[1].message_json(), m1);
    assert!(e[0].line().starts_with(r#"{"type":"message","timestamp""#));
    assert_eq!(t.context(), vec![3, 1, 4]);

    let v3 = t.to_v3_string();
    let lines: Vec<&str> = v3.lines().collect();
    assert_eq!(
        lines[0],
        r#"{"type":"session","version":3,"id":"old","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w","provider":"p","modelId":"m"}"#
    );
    assert_eq!(
        lines[1],
        format!(
            r#"{{"type":"message","id":"00000000","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z","message":{m0}}}"#
        )
    );
    assert_eq!(
        lines[4],
        r#"{"type":"compaction","id":"00000003","parentId":"00000002","timestamp":"2025-01-01T00:00:04.000Z","summary":"sum","firstKeptEntryId":"00000001","tokensBefore":500}"#
    );
    // the migrated text reads back as v3 with the same structure, and is then stable
    let again = Transcript::parse(&v3, "v3.jsonl").unwrap();
    assert!(!again.is_migrated());
    assert_eq!(again.context(), t.context());
    assert_eq!(again.to_v3_string(), v3);
}

#[test]
fn v1_index_zero_keeps_everything() {
    let text = [
        r#"{"type":"session","id":"old"}"#.to_string(),
        format!(r#"{{"type":"message","message":{}}}"#, user("a")),
        r#"{"type":"compaction","summary":"s","firstKeptEntryIndex":0,"tokensBefore":1}"#
            .to_string(),
    ]
    .join("\n");
    let t = Transcript::parse(&text, "v1").unwrap();
    assert_eq!(t.entries()[1].first_kept_entry_id(), Some("00000000"));
    assert_eq!(t.context(), vec![1, 0]);
}

#[test]
fn v2_hook_message_becomes_custom() {
    let hook = r#"{"role":"hookMessage","customType":"reminder","content":"be brief","display":true,"timestamp":5}"#;
    let header = r#"{"type":"session","version":2,"id":"s2","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}"#;
    let plain = msg("a1", None, &user("hi"));
    let text = format!("{header}\n{plain}\n{}\n", msg("a2", Some("a1"), hook));
    let t = Transcript::parse(&text, "v2").unwrap();
    let e = &t.entries()[1];
    assert_eq!(e.context_role(), Some(Role::Custom));
    assert!(e.message_json().contains(r#""role":"custom""#));
    assert_eq!(e.view().unwrap().text, "be brief");
    assert!(!t.entries()[0].is_migrated());
    let v3 = t.to_v3_string();
    assert!(!v3.contains("hookMessage"));
    let lines: Vec<&str> = v3.lines().collect();
    assert_eq!(lines[0], header.replace("\"version\":2", "\"version\":3"));
    assert_eq!(
        lines[1], plain,
        "v2 entries without a renamed role are verbatim"
    );
}

#[test]
fn v3_unknown_types_and_fields_round_trip_byte_for_byte() {
    let text = [
        r#"{"type":"session","version":3,"id":"s","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w","futureHeaderField":{"x":[1,2.50]}}"#,
        r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"hi","newField":1e3},"extra":"kept"}"#,
        r#"{"type":"telemetry_v9","id":"a2","parentId":"a1","timestamp":42,"summary":7,"payload":{"deep":[null,true]}}"#,
        r#"{"type":"label","id":"a3","parentId":"a2","timestamp":"2025-01-01T00:00:02.000Z","targetId":"a1","label":"start"}"#,
        r#"{"type":"custom","id":"a4","parentId":"a3","customType":"ext","data":{"k":"\u00e9"}}"#,
        r#"{"type":"session_info","id":"a5","parentId":"a4","name":"demo"}"#,
        r#"{ "type" : "message", "id":"a6","parentId":"a5","message": {"role":"assistant","content":[],"stopReason":"stop"} }"#,
    ]
    .join("\n")
        + "\n";
    let t = Transcript::parse(&text, "v3").unwrap();
    assert_eq!(t.to_v3_string(), text);
    assert_eq!(t.entries()[1].entry_type(), "telemetry_v9");
    assert_eq!(t.entries()[1].context_role(), None);
    assert_eq!(t.context(), vec![0, 5]);
}

#[test]
fn active_branch_follows_the_leaf_past_sibling_branches() {
    let text = doc(&[
        msg("u1", None, &user("root")),
        msg("a1", Some("u1"), &assistant("one", 10, "stop")),
        msg("u2", Some("a1"), &user("first try")),
        msg("a2", Some("u2"), &assistant("abandoned", 20, "stop")),
        // the user went back to a1 and asked again: a sibling of u2
        msg("u3", Some("a1"), &user("second try")),
        msg("a3", Some("u3"), &assistant("kept", 30, "stop")),
    ]);
    let t = Transcript::parse(&text, "tree").unwrap();
    assert_eq!(t.leaf(), Some(5));
    assert_eq!(ids(&t, &t.active_branch()), ["u1", "a1", "u3", "a3"]);
    assert_eq!(t.context(), t.active_branch());
    assert_eq!(t.index_of("u2"), Some(2));
    assert_eq!(t.context_tokens(), 30);
}

#[test]
fn boundary_loading_after_compaction() {
    let text = doc(&[
        msg("u1", None, &user("old question")),
        msg("a1", Some("u1"), &assistant("old answer", 100, "stop")),
        msg("u2", Some("a1"), &user("kept question")),
        r#"{"type":"model_change","id":"mc","parentId":"u2","provider":"p","modelId":"m"}"#.to_string(),
        msg("a2", Some("mc"), &assistant("kept answer", 200, "stop")),
        r#"{"type":"compaction","id":"c1","parentId":"a2","timestamp":"2025-01-01T00:00:09.000Z","summary":"earlier stuff","firstKeptEntryId":"u2","tokensBefore":200}"#.to_string(),
        msg("u3", Some("c1"), &user("new question")),
    ]);
    let t = Transcript::parse(&text, "b").unwrap();
    assert_eq!(ids(&t, t.context()), ["c1", "u2", "a2", "u3"]);
    assert_eq!(t.compaction_count(), 1);
    let c = &t.entries()[5];
    assert_eq!(c.context_role(), Some(Role::CompactionSummary));
    let view = c.view().unwrap();
    assert_eq!(view.text, "earlier stuff");
    assert_eq!(view.timestamp, 1_735_689_609_000);

    // a second compaction: only the latest is loaded, the older is not repeated
    let mut lines: Vec<String> = text.lines().skip(1).map(str::to_string).collect();
    lines.push(msg("a3", Some("u3"), &assistant("new answer", 300, "stop")));
    lines.push(r#"{"type":"compaction","id":"c2","parentId":"a3","summary":"all of it","firstKeptEntryId":"u3","tokensBefore":300}"#.to_string());
    lines.push(msg("u4", Some("c2"), &user("latest")));
    let t = Transcript::parse(&doc(&lines), "b2").unwrap();
    assert_eq!(ids(&t, t.context()), ["c2", "u3", "a3", "u4"]);
    assert_eq!(t.compaction_count(), 2);
}

#[test]
fn context_tokens_rule() {
    // no usage at all: estimates of everything
    let t = Transcript::parse(
        &doc(&[
            msg("u1", None, &user("12345678")),
            msg("t1", Some("u1"), &tool_result("1234")),
        ]),
        "x",
    )
    .unwrap();
    assert_eq!(t.context_tokens(), 2 + 1);

    // last valid usage + what follows; error and aborted turns skipped
    let t = Transcript::parse(
        &doc(&[
            msg("u1", None, &user("q")),
            msg("a1", Some("u1"), &assistant("ok", 1000, "toolUse")),
            msg("t1", Some("a1"), &tool_result("12345678")), // 2 tokens
            msg("a2", Some("t1"), &assistant("abcd", 5000, "error")), // 1 token
            msg("a3", Some("a2"), &assistant("abcd", 7000, "aborted")), // 1 token
            msg("u2", Some("a3"), &user("1234")),            // 1 token
        ]),
        "x",
    )
    .unwrap();
    assert_eq!(t.context_tokens(), 1000 + 2 + 1 + 1 + 1);

    // usage measured before the latest compaction is stale: summary and kept entries estimated
    let t = Transcript::parse(
        &doc(&[
            msg("u1", None, &user("q")),
            msg("a1", Some("u1"), &assistant("abcd", 90_000, "stop")),
            r#"{"type":"compaction","id":"c","parentId":"a1","summary":"12345678","firstKeptEntryId":"a1","tokensBefore":90000}"#.to_string(),
            msg("u2", Some("c"), &user("1234")),
        ]),
        "x",
    )
    .unwrap();
    assert_eq!(t.context_tokens(), 2 + 1 + 1);
    // ...until a new assistant turn measures the compacted context
    let mut t = t;
    t.append_message(
        &json!({"role":"assistant","content":[],"usage":{"totalTokens":4000},"stopReason":"stop"}),
        "2025-01-01T00:00:10.000Z",
    )
    .unwrap();
    t.append_message(
        &json!({"role":"user","content":"1234"}),
        "2025-01-01T00:00:11.000Z",
    )
    .unwrap();
    assert_eq!(t.context_tokens(), 4001);
}

#[test]
fn errors_name_source_line_and_problem() {
    let cases: Vec<(String, usize, &str)> = vec![
        (format!("{V3_HEADER}\n{}\nnot json\n", msg("a", None, &user("x"))), 3, "not valid JSON"),
        (format!("{V3_HEADER}\n\n{{\"id\":\"a\"}}\n"), 3, "no \"type\""),
        (format!("{V3_HEADER}\n{{\"type\":\"message\",\"message\":{}}}\n", user("x")), 2, "no \"id\""),
        (
            doc(&[msg("a", None, &user("x")), r#"{"type":"compaction","id":"c","parentId":"a","summary":"s","firstKeptEntryId":"zz","tokensBefore":1}"#.into()]),
            3,
            "\"zz\"",
        ),
        (
            format!("{{\"type\":\"session\",\"id\":\"s\"}}\n{{\"type\":\"message\",\"message\":{}}}\n{{\"type\":\"compaction\",\"summary\":\"s\",\"firstKeptEntryIndex\":9}}\n", user("x")),
            3,
            "firstKeptEntryIndex 9 is out of range",
        ),
        (doc(&[msg("a", Some("b"), &user("x")), msg("b", Some("a"), &user("y"))]), 2, "parentId cycle"),
        (doc(&[msg("a", Some("a"), &user("x"))]), 2, "parentId cycle"),
        (doc(&[msg("a", None, &user("x")), msg("a", Some("a"), &user("y"))]), 3, "duplicate id"),
        (String::new(), 1, "empty file"),
        ("\n  \n".to_string(), 1, "empty file"),
        (format!("{}\n", msg("a", None, &user("x"))), 1, "not a session header"),
        (format!("{V3_HEADER}\n{}\n", msg("a", None, r#"{"content":"x"}"#)), 2, "no \"role\""),
        ("{\"type\":\"session\",\"version\":4,\"id\":\"s\"}\n".to_string(), 1, "unsupported transcript version"),
    ];
    for (text, line, problem) in cases {
        let e = err_of(&text);
        let shown = e.to_string();
        assert_eq!(e.file(), "f.jsonl", "{shown}");
        assert_eq!(e.line(), Some(line), "{shown}");
        assert!(shown.starts_with(&format!("f.jsonl:{line}: ")), "{shown}");
        assert!(shown.contains(problem), "{shown} lacks {problem}");
    }
}

#[test]
fn torn_last_line_is_a_warning() {
    let mut text = doc(&[msg("a", None, &user("x"))]);
    text.push_str(r#"{"type":"message","id":"b","par"#);
    let t = Transcript::parse(&text, "torn.jsonl").unwrap();
    assert_eq!(t.entries().len(), 1);
    assert_eq!(t.warnings().len(), 1);
    assert_eq!(t.warnings()[0].line, 3);
    assert!(
        t.warnings()[0]
            .to_string()
            .starts_with("torn.jsonl:3: torn last line")
    );
    // a complete last line without its newline is fine
    let ok = doc(&[msg("a", None, &user("x"))]);
    let t = Transcript::parse(ok.trim_end(), "x").unwrap();
    assert!(t.warnings().is_empty());
    assert_eq!(t.entries().len(), 1);
    // the same garbage followed by a newline is corruption, not a torn append
    assert_eq!(err_of(&format!("{text}\n")).line(), Some(3));
}

#[test]
fn missing_parent_is_a_warning_and_a_root() {
    let t = Transcript::parse(&doc(&[msg("a", Some("gone"), &user("x"))]), "m").unwrap();
    assert_eq!(t.warnings().len(), 1);
    assert!(t.warnings()[0].message.contains("\"gone\""));
    assert_eq!(t.active_branch(), vec![0]);
}

#[test]
fn appends_extend_the_active_branch() {
    let mut t = Transcript::new("sess", "/w", "2025-01-01T00:00:00.000Z");
    assert_eq!(t.leaf(), None);
    assert_eq!(t.context_tokens(), 0);
    let a = t
        .append_message(
            &json!({"role":"user","content":"hello there"}),
            "2025-01-01T00:00:01.000Z",
        )
        .unwrap();
    let b = t.append_message(&json!({"role":"assistant","content":[{"type":"text","text":"hi"}],"stopReason":"stop"}), "2025-01-01T00:00:02.000Z").unwrap();
    assert_eq!((a, b), (0, 1));
    let e = t.entries();
    assert_eq!(e[0].parent_id(), None);
    assert_eq!(e[1].parent_id(), Some(e[0].id()));
    assert_eq!(e[0].id().len(), 8);
    assert!(e[0].id().chars().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(e[0].id(), e[1].id());
    assert_eq!(
        e[0].message_json(),
        r#"{"role":"user","content":"hello there"}"#
    );
    assert_eq!(t.active_branch(), vec![0, 1]);

    for bad in [
        json!("text"),
        json!({"content":"x"}),
        json!({"role":""}),
        json!({"role":"hookMessage"}),
    ] {
        let err = t.append_message(&bad, "t").unwrap_err();
        assert_eq!(err.line(), Some(4), "{err}");
    }
    assert_eq!(t.entries().len(), 2, "rejected appends leave no trace");

    let reparsed = Transcript::parse(&t.to_v3_string(), "again").unwrap();
    assert_eq!(reparsed.to_v3_string(), t.to_v3_string());
    assert_eq!(reparsed.header().id(), "sess");
    assert_eq!(reparsed.header().version(), 3);
}

#[test]
fn append_compaction_validates_the_boundary() {
    let mut t = Transcript::parse(
        &doc(&[
            msg("u1", None, &user("a")),
            msg("a1", Some("u1"), &assistant("b", 10, "stop")),
            msg("side", Some("u1"), &user("sibling")),
            msg("u2", Some("a1"), &user("c")),
        ]),
        "c.jsonl",
    )
    .unwrap();
    let nc = |id: &str| NewCompaction {
        summary: "s".into(),
        first_kept_entry_id: id.into(),
        tokens_before: 10,
        details: Some(json!({"k": 1})),
    };
    let e = t.append_compaction(&nc("nope"), "t").unwrap_err();
    assert!(e.to_string().starts_with("c.jsonl:6: "), "{e}");
    let e = t.append_compaction(&nc("side"), "t").unwrap_err();
    assert!(e.to_string().contains("not on the active branch"), "{e}");
    let c = t
        .append_compaction(&nc("a1"), "2025-01-01T00:00:05.000Z")
        .unwrap();
    assert!(
        t.entries()[c]
            .line()
            .ends_with(r#""tokensBefore":10,"details":{"k":1}}"#)
    );
    assert_eq!(ids(&t, t.context())[1..], ["a1", "u2"]);
    let e = t.append_compaction(&nc("u1"), "t").unwrap_err();
    assert!(
        e.to_string().contains("before the previous compaction"),
        "{e}"
    );
    t.append_compaction(&nc("u2"), "t").unwrap();
    assert_eq!(t.compaction_count(), 2);
}

#[test]
fn the_context_kept_by_appends_is_the_one_a_reload_walks() {
    // Loaded with a side branch (the leaf's branch wins), then every kind of append: messages,
    // a non-context entry, compactions (which move the boundary) and messages after them.
    let mut t = Transcript::parse(
        &doc(&[
            msg("u1", None, &user("a")),
            msg("side", Some("u1"), &user("sibling")),
            msg("a1", Some("u1"), &assistant("b", 10, "stop")),
        ]),
        "kept.jsonl",
    )
    .unwrap();
    let walked = |t: &Transcript| Transcript::parse(&t.to_v3_string(), "again").unwrap();
    // The context's token total is kept with it, and is what summing it says.
    let total_kept = |t: &Transcript| {
        assert_eq!(t.context_total, t.sum_of_context());
        let mut fresh = t.clone();
        fresh.recount_context();
        assert_eq!(t.usage_anchor, fresh.usage_anchor);
        for window in [1, 20, u64::MAX] {
            assert_eq!(
                t.context_tokens_in_window(window),
                walked(t).context_tokens_in_window(window)
            );
        }
    };
    assert_eq!(t.context(), walked(&t).context());
    total_kept(&t);
    let u2 = t.append_message(
        &json!({"role": "user", "content": "c", "timestamp": 1}),
        "t",
    );
    let u2 = u2.unwrap();
    t.append_other(
        "model_change",
        &json!({"provider": "p", "modelId": "m"}),
        "t",
    )
    .unwrap();
    t.append_message(&serde_json::from_str(&tool_result("out")).unwrap(), "t")
        .unwrap();
    assert_eq!(t.context(), walked(&t).context());
    total_kept(&t);
    let compaction = |first: &str| NewCompaction {
        summary: "s".into(),
        first_kept_entry_id: first.into(),
        tokens_before: 10,
        details: None,
    };
    let first = t.entries()[u2].id().to_string();
    let c = t.append_compaction(&compaction(&first), "t").unwrap();
    assert_eq!(t.context()[..2], [c, u2]);
    assert_eq!(t.context(), walked(&t).context());
    total_kept(&t);
    let u3 = t
        .append_message(
            &json!({"role": "user", "content": "d", "timestamp": 2}),
            "t",
        )
        .unwrap();
    let first = t.entries()[u3].id().to_string();
    let c2 = t.append_compaction(&compaction(&first), "t").unwrap();
    assert_eq!(t.context(), [c2, u3]);
    assert_eq!(t.context(), walked(&t).context());
    total_kept(&t);
    // A write undone, and the tokens counted again another way.
    t.truncate(c2);
    assert_eq!(t.context(), walked(&t).context());
    total_kept(&t);
    t.set_token_counter(crate::TokenCounter::new(crate::Encoding::Cl100k));
    total_kept(&t);
    assert_eq!(t.context_tokens_in_window(1), t.sum_of_context());
}

#[test]
fn a_line_holding_two_entries_is_read_as_two_with_a_warning() {
    let a = msg("a", None, &user("first"));
    let b = msg("b", Some("a"), &user("second"));
    let c = msg("c", Some("b"), &user("third"));
    let text = doc(&[a.clone(), format!("{b}{c}")]);
    let t = Transcript::parse(&text, "glued.jsonl").unwrap();
    assert_eq!(ids(&t, t.context()), ["a", "b", "c"]);
    assert_eq!(t.warnings().len(), 1);
    let w = t.warnings()[0].to_string();
    assert!(
        w.starts_with("glued.jsonl:3: 2 JSON entries on one line"),
        "{w}"
    );
    assert_eq!(t.entries()[2].line(), c);
    // with whitespace between them too, and as an unterminated last line
    let t = Transcript::parse(text.replace("}{", "}  {").trim_end(), "g").unwrap();
    assert_eq!(t.entries().len(), 3);

    // v1 positions count entries as pi reads them, and pi skips such a line: it is out of
    // the context and takes no position, but it is kept, whole, for a rewrite
    let glued_x = format!("{{\"type\":\"message\",\"message\":{}}}", user("x"));
    let glued_y = format!("{{\"type\":\"message\",\"message\":{}}}", user("y"));
    let v1 = format!(
        "{{\"type\":\"session\",\"id\":\"s\"}}\n{glued_x}{glued_y}\n{{\"type\":\"message\",\"message\":{}}}\n",
        user("z")
    );
    let t = Transcript::parse(&v1, "v1.jsonl").unwrap();
    assert_eq!(t.entries().len(), 2);
    let z = t.context()[0];
    assert_eq!(t.context().len(), 1);
    assert_eq!(t.entries()[z].id(), "00000000");
    assert!(
        t.warnings()[0].message.contains("kept whole"),
        "{}",
        t.warnings()[0]
    );
    let v3 = t.to_v3_string();
    assert!(v3.contains(&format!("[{glued_x},{glued_y}]")), "{v3}");
    let again = Transcript::parse(&v3, "v3.jsonl").unwrap();
    assert!(again.warnings().is_empty());
    assert_eq!(again.entries().len(), 2);
    assert_eq!(again.context(), t.context());

    // anything else that is not one JSON value stays an error
    let e = err_of(&doc(&[format!("{a}x")]));
    assert!(e.to_string().contains("not valid JSON"), "{e}");
}

#[test]
fn opening_a_file_with_glued_entries_does_not_rewrite_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.jsonl");
    let text = doc(&[
        msg("a", None, &user("first")),
        format!(
            "{}{}",
            msg("b", Some("a"), &user("second")),
            msg("c", Some("b"), &user("third"))
        ),
    ]);
    std::fs::write(&path, &text).unwrap();
    let (_f, t) = crate::store::TranscriptFile::open(&path).unwrap();
    assert_eq!(t.entries().len(), 3);
    assert_eq!(t.warnings().len(), 1);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    assert!(!crate::store::backup_path(&path).exists());
}

#[test]
fn a_bom_is_not_content() {
    let text = format!("\u{feff}{}", doc(&[msg("a", None, &user("x"))]));
    let t = Transcript::parse(&text, "bom.jsonl").unwrap();
    assert_eq!(t.header().id(), "s1");
    assert_eq!(t.entries().len(), 1);
    assert!(t.warnings().is_empty());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bom.jsonl");
    std::fs::write(&path, &text).unwrap();
    assert_eq!(Transcript::load(&path).unwrap().entries().len(), 1);
}

#[test]
fn a_lone_unterminated_line_is_judged_as_the_header() {
    let e = err_of(r#"{"type":"session","version":3,"id"#);
    assert_eq!(e.line(), Some(1));
    assert!(e.to_string().contains("not a session header"), "{e}");
    assert!(!e.to_string().contains("empty"), "{e}");
    let t = Transcript::parse(V3_HEADER, "h").unwrap();
    assert!(t.entries().is_empty());
}

#[test]
fn valid_json_of_the_wrong_shape_is_named_without_rust_types() {
    for (line, kind) in [
        ("[1,2]", "an array"),
        ("\"x\"", "a string"),
        ("7", "a number"),
    ] {
        let e = err_of(&format!("{V3_HEADER}\n{line}\n")).to_string();
        assert!(
            e.ends_with(&format!(":2: entry is {kind}, not a JSON object")),
            "{e}"
        );
    }
    let e = err_of(&format!(
        "{V3_HEADER}\n{}\n",
        msg("a", None, r#"{"role":"user","content":[7]}"#)
    ))
    .to_string();
    assert!(!e.contains("struct"), "{e}");
}

#[test]
fn implausible_usage_is_ignored_with_a_warning() {
    let huge = u64::MAX;
    let text = doc(&[
        msg("u1", None, &user("12345678")),
        msg("a1", Some("u1"), &assistant("abcd", huge, "stop")),
        r#"{"type":"compaction","id":"c","parentId":"a1","summary":"s","firstKeptEntryId":"a1","tokensBefore":1e30}"#.into(),
    ]);
    let t = Transcript::parse(&text, "u.jsonl").unwrap();
    // the absurd total counts as absent: the parts (input 1 + output 1) stand for it
    assert_eq!(t.entries()[1].usage_total(), Some(2));
    assert_eq!(t.entries()[2].tokens_before(), 0);
    let w: Vec<String> = t.warnings().iter().map(ToString::to_string).collect();
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(
        w[0].starts_with("u.jsonl:3: usage.totalTokens 1844674407"),
        "{w:?}"
    );
    assert!(
        w[1].starts_with(
            "u.jsonl:4: tokensBefore 1000000000000000000000000000000 is not a plausible"
        ),
        "{w:?}"
    );
}

#[test]
fn unknown_roles_are_kept_verbatim_and_not_sent_to_the_model() {
    let odd = r#"{"role":"narrator","content":{"scene":5},"timestamp":4}"#;
    let text = doc(&[
        msg("u1", None, &user("12345678")),
        msg("n1", Some("u1"), odd),
    ]);
    let mut t = Transcript::parse(&text, "r.jsonl").unwrap();
    assert_eq!(t.entries()[1].message_json(), odd);
    assert_eq!(t.entries()[1].context_role(), None);
    assert_eq!(t.context(), vec![0]);
    assert_eq!(t.context_tokens(), 2);
    // appends take them too (replay copies a recorded session's messages this way)
    let i = t
        .append_message(&json!({"role":"narrator","content":"x"}), "t")
        .unwrap();
    assert_eq!(t.entries()[i].entry_type(), "message");
    let i = t
        .append_message_text(r#"{"role":"audit", "n": 1.50}"#, "t")
        .unwrap();
    assert!(
        t.entries()[i]
            .line()
            .contains(r#"{"role":"audit", "n": 1.50}"#)
    );
    assert_eq!(t.context(), vec![0]);
    let back = Transcript::parse(&t.to_v3_string(), "again").unwrap();
    assert_eq!(back.to_v3_string(), t.to_v3_string());
    // a message still needs a role
    assert!(t.append_message(&json!({"content":"x"}), "t").is_err());
    assert!(t.append_message(&json!({"role":""}), "t").is_err());
}

#[test]
fn usage_from_another_window_does_not_stand_for_the_context() {
    // recorded in a 200k-window session: the latest turn measured 150k
    let text = doc(&[
        msg("u1", None, &user("12345678")),                         // 2
        msg("a1", Some("u1"), &assistant("abcd", 9_000, "stop")),   // 1
        msg("u2", Some("a1"), &user("1234")),                       // 1
        msg("a2", Some("u2"), &assistant("abcd", 150_000, "stop")), // 1
        msg("u3", Some("a2"), &user("1234")),                       // 1
    ]);
    let mut t = Transcript::parse(&text, "x").unwrap();
    assert_eq!(t.context_tokens(), 150_001);
    assert_eq!(t.context_tokens_in_window(200_000), 150_001);
    // at a 16k window that figure cannot describe this context; nor can the older one
    assert_eq!(t.context_tokens_in_window(16_000), 2 + 1 + 1 + 1 + 1);
    t.set_context_window(Some(16_000));
    assert_eq!(t.context_tokens(), 6);
    t.set_context_window(None);
    assert_eq!(t.context_tokens(), 150_001);
}

/// Read on two threads or on one, a file gives the same transcript or the same error.
#[test]
fn reading_in_two_halves_gives_what_reading_in_one_gives() {
    let session = crate::generate::coding_session(8, 40);
    let mut rng = crate::generate::Mutator::new(0x7a1f);
    let tokens: &[&[u8]] = &[
        b"}{",
        b"\n",
        b"\xff",
        b"\"",
        b"\\ud83d",
        b"\"parentId\":null,",
    ];
    let mut inputs = vec![session.clone().into_bytes()];
    for _ in 0..200 {
        inputs.push(rng.mutate(session.as_bytes(), tokens));
    }
    for input in inputs {
        let Ok(text) = String::from_utf8(input) else {
            continue;
        };
        let one = Transcript::parse_with(text.clone(), "s", false, usize::MAX);
        let two = Transcript::parse_with(text.clone(), "s", false, 0);
        match (one, two) {
            (Ok(one), Ok(two)) => {
                assert_eq!(one.to_v3_string(), two.to_v3_string(), "{text}");
                assert_eq!(one.warnings(), two.warnings(), "{text}");
                assert_eq!(one.context(), two.context(), "{text}");
                assert_eq!(one.context_tokens(), two.context_tokens(), "{text}");
            }
            (Err(one), Err(two)) => assert_eq!(one.to_string(), two.to_string(), "{text}"),
            (one, two) => panic!("one thread {one:?}, two {two:?} on {text}"),
        }
    }
}
