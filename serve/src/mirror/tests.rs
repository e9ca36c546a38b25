use super::*;
use serde_json::json;
use std::path::Path;
use torn::torn_commit_start;

#[test]
fn session_files_group_by_agent_and_encode_keys() {
    let dir = Path::new("/h/sessions");
    assert_eq!(
        session_file(dir, "agent:main:main").unwrap(),
        dir.join("agents/main/agent%3Amain%3Amain.jsonl")
    );
    assert_eq!(session_file(dir, "plain").unwrap(), dir.join("plain.jsonl"));
    assert_eq!(
        session_file(dir, "agent:../x:y").unwrap(),
        dir.join("agents/..%2Fx/agent%3A..%2Fx%3Ay.jsonl")
    );
}

#[test]
fn a_commit_cut_short_starts_at_its_first_message() {
    let header = "{\"type\":\"session\"}\n";
    let m = "{\"type\":\"message\",\"message\":{}}\n";
    let marker = "{\"type\":\"custom\",\"customType\":\"ctxhost.mirror\"}\n";
    let compaction = "{\"type\":\"compaction\"}\n";
    let whole = format!("{header}{m}{m}{marker}{compaction}");
    assert_eq!(torn_commit_start(whole.as_bytes()), None);
    let torn = format!("{whole}{m}{m}");
    assert_eq!(torn_commit_start(torn.as_bytes()), Some(whole.len()));
    let torn_line = format!("{whole}{m}{{\"type\":\"mess");
    assert_eq!(torn_commit_start(torn_line.as_bytes()), Some(whole.len()));
    let no_marker = format!("{header}{m}");
    assert_eq!(torn_commit_start(no_marker.as_bytes()), Some(header.len()));
}

#[test]
fn consecutive_kept_positions_collapse_into_ranges() {
    let mut items = translate::Items::default();
    for position in [0, 1, 2, 5] {
        items.keep(position);
    }
    items.push(translate::Item::Client(ClientItem::message(json!({}))));
    items.keep(6);
    items.keep(7);
    let transcript = Transcript::new("s", "/w", "2025-01-01T00:00:00.000Z");
    let expected = [
        ClientItem::Range { from: 0, to: 2 },
        ClientItem::Index { index: 5 },
        ClientItem::message(json!({})),
        ClientItem::Range { from: 6, to: 7 },
    ];
    assert_eq!(items.render(&transcript), expected);
    // The open run stays open: a next turn extends it.
    items.keep(8);
    assert_eq!(
        items.render(&transcript).last(),
        Some(&ClientItem::Range { from: 6, to: 8 })
    );
}

#[test]
fn inserted_messages_are_sendable_and_marked() {
    let summary = inserted(
        r#"{"role":"compactionSummary","summary":"did x","tokensBefore":5,"timestamp":7}"#,
    );
    assert_eq!(summary["role"], "user");
    assert_eq!(summary["timestamp"], 7);
    assert!(
        summary["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("did x")
    );
    assert_eq!(summary["__ctxhost"]["kind"], "compactionSummary");
    let user = inserted(r#"{"role":"user","content":"hi"}"#);
    assert_eq!(user["content"], "hi");
    assert_eq!(user["__ctxhost"]["inserted"], true);
}

#[test]
fn an_engine_is_given_the_budget_narrowed_to_the_configured_window() {
    assert_eq!(narrowed_budget(32_000, Some(128_000)), Some(32_000));
    assert_eq!(narrowed_budget(32_000, Some(8_000)), Some(8_000));
    assert_eq!(narrowed_budget(32_000, None), None);
}
