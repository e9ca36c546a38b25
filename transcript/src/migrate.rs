//! Rewriting v1/v2 lines as v3. Message entries of v1 files get their `id`/`parentId` spliced
//! in as text, so the `message` bytes stay identical to the file; the rare entries that need a
//! structural change (compaction boundaries, renamed roles) are re-serialised.

use serde_json::{Map, Value};

fn quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

fn id_members(id: &str, parent: Option<&str>) -> String {
    format!(
        "\"id\":{},\"parentId\":{}",
        quote(id),
        parent.map_or_else(|| "null".to_string(), quote)
    )
}

/// Insert `"id":..,"parentId":..` right after a leading `{"type":"..."` member. Returns the new
/// line and (insert position, inserted length) so byte ranges after it can be shifted; None
/// when the line does not start that way (the caller then re-serialises).
pub(crate) fn splice_ids(
    line: &str,
    id: &str,
    parent: Option<&str>,
) -> Option<(String, usize, usize)> {
    let pos = leading_type_end(line)?;
    // An object with only a type member would need no comma; such a line is no v1 entry.
    if line[pos..].trim_start().starts_with('}') {
        return None;
    }
    let insert = format!(",{}", id_members(id, parent));
    let mut out = String::with_capacity(line.len() + insert.len());
    out.push_str(&line[..pos]);
    out.push_str(&insert);
    out.push_str(&line[pos..]);
    Some((out, pos, insert.len()))
}

/// Where a leading `{"type":"..."` member ends (after its closing quote), if the line starts
/// with one.
fn leading_type_end(line: &str) -> Option<usize> {
    const PREFIX: &str = "{\"type\":\"";
    let body = line.strip_prefix(PREFIX)?;
    let mut escaped = false;
    for (i, b) in body.bytes().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' => escaped = true,
            b'"' => return Some(PREFIX.len() + i + 1),
            _ => {}
        }
    }
    None
}

/// What a structural rewrite changes.
pub(crate) struct Rewrite<'a> {
    /// New id/parentId (v1); None keeps the line's own.
    pub ids: Option<(&'a str, Option<&'a str>)>,
    /// Replace `firstKeptEntryIndex` by this `firstKeptEntryId` (v1 compaction).
    pub first_kept_id: Option<&'a str>,
    /// Rename message role `hookMessage` to `custom` (v2 -> v3).
    pub hook_to_custom: bool,
}

/// Re-serialise an entry line with the changes applied; other members keep their order.
pub(crate) fn rewrite_entry(line: &str, change: &Rewrite<'_>) -> Result<String, String> {
    let value: Value = serde_json::from_str(line).map_err(|e| format!("invalid JSON: {e}"))?;
    let Value::Object(old) = value else {
        return Err("entry is not a JSON object".into());
    };
    let mut new = Map::with_capacity(old.len() + 2);
    for (key, val) in old {
        change.carry(key, val, &mut new);
    }
    Ok(Value::Object(new).to_string())
}

impl Rewrite<'_> {
    /// Member `key` of the old entry into `new`, changed as this rewrite says; new ids go
    /// right after `type`.
    fn carry(&self, key: String, mut val: Value, new: &mut Map<String, Value>) {
        match key.as_str() {
            "id" | "parentId" if self.ids.is_some() => return,
            "firstKeptEntryIndex" if self.first_kept_id.is_some() => {
                let id = self.first_kept_id.unwrap_or_default();
                new.insert("firstKeptEntryId".into(), Value::String(id.into()));
                return;
            }
            "message" if self.hook_to_custom => rename_hook_role(&mut val),
            _ => {}
        }
        let is_type = key == "type";
        new.insert(key, val);
        if is_type && let Some((id, parent)) = self.ids {
            new.insert("id".into(), Value::String(id.into()));
            new.insert(
                "parentId".into(),
                parent.map_or(Value::Null, |p| Value::String(p.into())),
            );
        }
    }
}

/// A message of role `hookMessage` as the `custom` one v3 has for it.
fn rename_hook_role(message: &mut Value) {
    if let Some(role) = message.get_mut("role")
        && role == "hookMessage"
    {
        *role = Value::String("custom".into());
    }
}

/// The header as a version 3 line (`version` placed after `type`, as pi writes it).
pub(crate) fn header_v3(raw: &str) -> String {
    let Ok(Value::Object(old)) = serde_json::from_str::<Value>(raw) else {
        return raw.to_string();
    };
    let mut new = Map::with_capacity(old.len() + 1);
    for (key, val) in old {
        if key == "version" {
            continue;
        }
        let is_type = key == "type";
        new.insert(key, val);
        if is_type {
            new.insert("version".into(), Value::from(3));
        }
    }
    if !new.contains_key("version") {
        new.insert("version".into(), Value::from(3));
    }
    Value::Object(new).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splice_keeps_every_other_byte() {
        let line =
            r#"{"type":"message","timestamp":"t","message":{"role":"user","content":"a  b"}}"#;
        let (out, pos, len) = splice_ids(line, "00000001", Some("00000000")).unwrap();
        assert_eq!(
            out,
            r#"{"type":"message","id":"00000001","parentId":"00000000","timestamp":"t","message":{"role":"user","content":"a  b"}}"#
        );
        assert_eq!(&out[..pos], &line[..pos]);
        assert_eq!(&out[pos + len..], &line[pos..]);
        assert!(splice_ids(r#"{"timestamp":"t","type":"x"}"#, "a", None).is_none());
    }

    #[test]
    fn rewrite_maps_index_and_renames_hook_role() {
        let line = r#"{"type":"compaction","timestamp":"t","summary":"s","firstKeptEntryIndex":3,"tokensBefore":9,"extra":[1]}"#;
        let out = rewrite_entry(
            line,
            &Rewrite {
                ids: Some(("00000004", Some("00000003"))),
                first_kept_id: Some("00000002"),
                hook_to_custom: false,
            },
        )
        .unwrap();
        assert_eq!(
            out,
            r#"{"type":"compaction","id":"00000004","parentId":"00000003","timestamp":"t","summary":"s","firstKeptEntryId":"00000002","tokensBefore":9,"extra":[1]}"#
        );
        let hook = r#"{"type":"message","id":"a","parentId":null,"message":{"role":"hookMessage","content":"x"}}"#;
        let out = rewrite_entry(
            hook,
            &Rewrite {
                ids: None,
                first_kept_id: None,
                hook_to_custom: true,
            },
        )
        .unwrap();
        assert_eq!(
            out,
            r#"{"type":"message","id":"a","parentId":null,"message":{"role":"custom","content":"x"}}"#
        );
    }

    #[test]
    fn header_gets_version_3_after_type() {
        assert_eq!(
            header_v3(r#"{"type":"session","id":"s","cwd":"/"}"#),
            r#"{"type":"session","version":3,"id":"s","cwd":"/"}"#
        );
        assert_eq!(
            header_v3(r#"{"type":"session","version":2,"id":"s"}"#),
            r#"{"type":"session","version":3,"id":"s"}"#
        );
    }
}
