//! What Node's `JSON.stringify` writes is read: a string cut inside an emoji is written as a
//! lone surrogate escape (`"\ud83d"`), which Node reads back. Every reader here (a full load,
//! `status`'s backwards scan, an append of a runtime's message) reads it the same way.

use ctxhost_transcript::{Transcript, status};

const HEADER: &str =
    r#"{"type":"session","version":3,"id":"s1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}"#;

fn message(id: &str, parent: Option<&str>, role: &str, text: &str) -> String {
    let parent = parent.map_or("null".to_string(), |p| format!("\"{p}\""));
    format!(
        r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2025-01-01T00:00:01.000Z","message":{{"role":"{role}","content":"{text}","timestamp":1}}}}"#
    )
}

fn file_of(lines: &[String]) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), lines.join("\n") + "\n").unwrap();
    file
}

#[test]
fn lone_surrogates_are_read_by_every_reader_alike() {
    let compaction = r#"{"type":"compaction","id":"c1","parentId":"a2","timestamp":"2025-01-01T00:00:02.000Z","summary":"earlier \udc00 work","firstKeptEntryId":"a2","tokensBefore":100}"#;
    let plain = vec![
        HEADER.to_string(),
        message("a1", None, "user", r"cut \ud83d here"),
        message("a2", Some("a1"), "user", r"pair \ud83d\ude00 stays"),
    ];
    let mut compacted = plain.clone();
    compacted.push(compaction.to_string());
    compacted.push(message("a3", Some("c1"), "user", r"tail \ud83d"));
    for lines in [plain, compacted] {
        let file = file_of(&lines);
        let t = Transcript::load(file.path()).unwrap();
        let texts: Vec<String> = t
            .entries()
            .iter()
            .filter_map(|e| e.view())
            .map(|v| v.text)
            .collect();
        assert!(texts.iter().any(|t| t.contains('\u{fffd}')), "{texts:?}");
        assert!(texts.iter().any(|t| t.contains('😀')), "{texts:?}");
        let s = status::scan(file.path()).unwrap();
        assert_eq!(s.context_tokens, t.context_tokens());
        assert_eq!(s.context_messages, t.context().len());
    }
}

#[test]
fn a_runtime_message_with_half_a_pair_is_appended_and_reads_back() {
    let mut t = Transcript::parse(&format!("{HEADER}\n"), "s.jsonl").unwrap();
    let index = t
        .append_message_text(
            r#"{"role":"user","content":"cut \ud83d","timestamp":1}"#,
            "2025-01-01T00:00:01.000Z",
        )
        .unwrap();
    let text = t.entries()[index].view().unwrap().text;
    assert_eq!(text, "cut \u{fffd}");
    let again = Transcript::parse(&t.to_v3_string(), "again").unwrap();
    assert_eq!(again.entries()[0].view().unwrap().text, text);
}
