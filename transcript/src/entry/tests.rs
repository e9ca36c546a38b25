use super::*;

const V3: Decode = Decode {
    version: 3,
    index: 0,
    entry_count: 1,
};

#[test]
fn message_json_is_a_slice_of_the_line() {
    let line = r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2025-01-01T00:00:00Z","message": {"role":"user","content":"hi  there"} ,"x":1}"#;
    let e = Entry::decode(line.into(), 2, &V3).unwrap();
    assert_eq!(e.message_json(), r#"{"role":"user","content":"hi  there"}"#);
    assert_eq!(e.context_role(), Some(Role::User));
    assert_eq!(e.tokens(), 3);
    assert_eq!(e.line(), line);
    assert!(!e.is_migrated());
}

#[test]
fn summaries_are_synthesised_as_agent_messages() {
    let line = r#"{"type":"compaction","id":"c","parentId":"b","timestamp":"1970-01-01T00:00:01Z","summary":"did \"x\"","firstKeptEntryId":"a","tokensBefore":77}"#;
    let e = Entry::decode(line.into(), 2, &V3).unwrap();
    assert_eq!(
        e.message_json(),
        r#"{"role":"compactionSummary","summary":"did \"x\"","tokensBefore":77,"timestamp":1000}"#
    );
    assert_eq!(e.context_role(), Some(Role::CompactionSummary));
    assert_eq!(e.view().unwrap().text, "did \"x\"");
    let custom = r#"{"type":"custom_message","id":"d","parentId":"c","customType":"note","content":[{"type":"text","text":"abc"}],"display":false}"#;
    let e = Entry::decode(custom.into(), 3, &V3).unwrap();
    assert_eq!(
        e.message_json(),
        r#"{"role":"custom","customType":"note","content":[{"type":"text","text":"abc"}],"display":false,"timestamp":0}"#
    );
    assert_eq!(e.view().unwrap().text, "abc");
    let other = r#"{"type":"model_change","id":"e","parentId":"d","provider":"p","modelId":"m"}"#;
    let e = Entry::decode(other.into(), 4, &V3).unwrap();
    assert_eq!(e.message_json(), "");
    assert_eq!(e.context_role(), None);
    assert_eq!(e.view(), None);
    assert_eq!(e.tokens(), 0);
}

#[test]
fn v1_line_with_a_parent_member_is_rewritten_not_spliced() {
    let d = Decode {
        version: 1,
        index: 1,
        entry_count: 2,
    };
    let line = r#"{"type":"message","parentId":null,"message":{"role":"user","content":"x"}}"#;
    let e = Entry::decode(line.into(), 3, &d).unwrap();
    assert_eq!(
        e.v3_line(),
        r#"{"type":"message","id":"00000001","parentId":"00000000","message":{"role":"user","content":"x"}}"#
    );
    assert_eq!(e.message_json(), r#"{"role":"user","content":"x"}"#);
    assert_eq!(e.line(), line);
}

/// What an entry says, for comparing the two decoders.
fn facts(e: &Entry) -> String {
    format!(
        "{:?}",
        (
            e.id(),
            e.parent_id(),
            e.entry_type(),
            e.timestamp(),
            e.message_json(),
            e.context_role(),
            e.tokens(),
            e.usage_total(),
            &e.note,
            e.line(),
            e.v3_line(),
            e.is_migrated(),
        )
    ) + &format!("{:?}", (e.tool_name(), e.is_error()))
}

/// Every line the fast path reads, it reads as serde does: lines of generated sessions
/// (v3, and v1 by dropping their ids), each also mutated byte by byte.
#[test]
fn the_fast_path_agrees_with_serde() {
    let text = crate::generate::coding_session(5, 300);
    let mut lines: Vec<(u32, String)> = Vec::new();
    for line in text.lines().skip(1) {
        lines.push((3, line.to_string()));
        let v: Value = serde_json::from_str(line).unwrap();
        if let Value::Object(mut map) = v {
            map.shift_remove("id");
            map.shift_remove("parentId");
            lines.push((1, Value::Object(map).to_string()));
        }
    }
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |n: usize| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % n.max(1) as u64) as usize
    };
    let mut fast = 0;
    for (version, line) in lines {
        let mut variants = vec![line.clone()];
        for _ in 0..20 {
            let mut bytes = line.clone().into_bytes();
            let at = next(bytes.len());
            const BYTES: &[u8] = b"\\\"{}[],:0e.-u \t";
            match next(4) {
                0 if at < bytes.len() => bytes[at] = BYTES[next(BYTES.len())],
                1 if at < bytes.len() => {
                    bytes.remove(at);
                }
                2 => bytes.insert(at, BYTES[next(BYTES.len())]),
                _ => bytes.truncate(at),
            }
            if let Ok(s) = String::from_utf8(bytes) {
                variants.push(s);
            }
        }
        for v in variants {
            let d = Decode {
                version,
                index: 4,
                entry_count: 9,
            };
            let quick = Entry::decode(Line::from(v.as_str()), 2, &d);
            let slow = Entry::decode_serde(Line::from(v.as_str()), 2, &d);
            fast += usize::from(crate::envelope::message_line(&v).is_some());
            match (quick, slow) {
                (Ok(a), Ok(b)) => {
                    assert_eq!(facts(&a), facts(&b), "{v}");
                    if a.context_role() == Some(Role::ToolResult)
                        && let Some(view) = a.view()
                    {
                        assert_eq!(a.tool_name(), view.tool_name.as_deref(), "{v}");
                        assert_eq!(a.is_error(), view.is_error, "{v}");
                    }
                }
                (Err(a), Err(b)) => assert_eq!(a, b, "{v}"),
                (a, b) => panic!("decoders disagree on {v}: {a:?} / {b:?}"),
            }
        }
    }
    assert!(fast > 500, "the fast path read only {fast} lines");
}

#[test]
fn v1_ids_are_eight_hex_digits() {
    assert_eq!(v1_id(0), "00000000");
    assert_eq!(v1_id(0xabc), "00000abc");
    assert_eq!(v1_id(u32::MAX as usize), "ffffffff");
    assert_eq!(v1_id(1 << 32), "100000000");
}

#[test]
fn required_fields() {
    let err = |l: &str| Entry::decode(l.into(), 2, &V3).unwrap_err();
    assert!(err(r#"{"id":"a"}"#).contains("no \"type\""));
    assert!(err(r#"{"type":"message","message":{"role":"user"}}"#).contains("no \"id\""));
    assert!(err(r#"{"type":"message","id":"a"}"#).contains("no \"message\""));
    assert!(err(r#"{"type":"compaction","id":"a","summary":"s"}"#).contains("firstKeptEntryId"));
    assert!(err("{nope").contains("not valid JSON"));
}
