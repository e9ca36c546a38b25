//! Reading one line as little as the walk needs: its top-level `type`, `id` and `parentId` in
//! any JSON spelling, nested values skipped rather than searched, and a compaction's few members.

use std::borrow::Cow;

use serde::Deserialize;

/// What the backward walk needs from one entry line.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Light<'a> {
    pub(super) kind: Option<Cow<'a, str>>,
    pub(super) id: Option<Cow<'a, str>>,
    pub(super) parent_id: Option<Cow<'a, str>>,
}

/// The members of a compaction line the walk needs (it is decoded fully: compactions are few).
#[derive(Deserialize)]
#[serde(expecting = "an entry object")]
pub(super) struct CompactionLine<'a> {
    #[serde(rename = "firstKeptEntryId")]
    pub(super) first_kept: Option<String>,
    // Free-form for other writers: kept raw, read as a `CompactionRecord` only if an object.
    #[serde(borrow)]
    pub(super) details: Option<&'a serde_json::value::RawValue>,
}

/// A JSON string literal starting at `b[i]` (`"`): its end (one past the closing quote).
pub(super) fn skip_string(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    loop {
        j += memchr::memchr2(b'"', b'\\', b.get(j..)?)?;
        if b[j] == b'\\' {
            j += 2;
        } else {
            return Some(j + 1);
        }
    }
}

/// Any JSON value starting at `b[i]`: its end. Strings inside are skipped as strings, so
/// brackets in text do not count.
pub(super) fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => skip_string(b, i),
        b'{' | b'[' => skip_nested(b, i),
        _ => {
            let n = b[i..]
                .iter()
                .position(|c| matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .unwrap_or(b.len() - i);
            (n > 0).then_some(i + n)
        }
    }
}

/// An object or array starting at `b[i]`: its end.
#[inline]
fn skip_nested(b: &[u8], i: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut j = i;
    loop {
        match b.get(j)? {
            b'"' => {
                j = skip_string(b, j)?;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(j + 1);
                }
            }
            _ => {}
        }
        j += 1;
    }
}

pub(super) fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// A string literal's value; escapes (`"typ\u0065"`) are decoded, so any spelling matches.
/// Without escapes (as a rule) it is borrowed: the walk allocates nothing per line for it.
pub(super) fn string_value(lit: &[u8]) -> Option<Cow<'_, str>> {
    if lit.contains(&b'\\') {
        serde_json::from_slice::<String>(lit).ok().map(Cow::Owned)
    } else {
        std::str::from_utf8(lit.get(1..lit.len().checked_sub(1)?)?)
            .ok()
            .map(Cow::Borrowed)
    }
}

/// A member name's bytes: as written when plain ASCII (every name a transcript writer uses),
/// so the walk compares bytes and validates nothing per name; else its decoded value.
pub(super) fn name_bytes(lit: &[u8]) -> Option<Cow<'_, [u8]>> {
    let inner = lit.get(1..lit.len().checked_sub(1)?)?;
    if inner.is_ascii() && !inner.contains(&b'\\') {
        return Some(Cow::Borrowed(inner));
    }
    Some(match string_value(lit)? {
        Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
        Cow::Owned(s) => Cow::Owned(s.into_bytes()),
    })
}

/// The top-level `type`, `id` and `parentId` of an entry line. Reading stops once all three
/// are known (the `type` alone for a v1 line, which has no ids), unless the entry is a
/// compaction (whose line is then decoded in full).
pub(super) fn skim(line: &[u8], v1: bool) -> Result<Light<'_>, String> {
    let bad = || "not valid JSON".to_string();
    let mut light = Light::default();
    let open = skip_ws(line, 0);
    let mut i = match line.get(open) {
        Some(b'{') => skip_ws(line, open + 1),
        Some(b'[') => return Err("entry is an array, not a JSON object".into()),
        _ => return Err(bad()),
    };
    if line.get(i) == Some(&b'}') {
        return Ok(light);
    }
    let mut seen = 0;
    loop {
        let m = member(line, i).ok_or_else(bad)?;
        seen |= light.note(&m.name, m.value);
        if light.complete(seen, v1) {
            return Ok(light);
        }
        i = skip_ws(line, m.end);
        match line.get(i) {
            Some(b',') => i = skip_ws(line, i + 1),
            Some(b'}') => return Ok(light),
            _ => return Err(bad()),
        }
    }
}

/// A member of an object, as read from its line.
struct Member<'a> {
    name: Cow<'a, [u8]>,
    value: &'a [u8],
    /// Just after the value.
    end: usize,
}

/// The member starting at `line[i]`.
#[inline]
fn member(line: &[u8], i: usize) -> Option<Member<'_>> {
    let (name, start) = member_name(line, i)?;
    let end = skip_value(line, start)?;
    Some(Member {
        name,
        value: &line[start..end],
        end,
    })
}

/// The member starting at `line[i]`: its name, and where its value starts (not read).
#[inline]
pub(super) fn member_name(line: &[u8], i: usize) -> Option<(Cow<'_, [u8]>, usize)> {
    if line.get(i) != Some(&b'"') {
        return None;
    }
    let key_end = skip_string(line, i)?;
    let key = name_bytes(line.get(i..key_end)?)?;
    let i = skip_ws(line, key_end);
    if line.get(i) != Some(&b':') {
        return None;
    }
    Some((key, skip_ws(line, i + 1)))
}

/// Bits of the members [`Light::note`] has seen.
const KIND: u8 = 1;
const ID: u8 = 2;
const PARENT: u8 = 4;

impl<'a> Light<'a> {
    /// Takes the member `key` if it is one of the three, and says which (0 for any other).
    #[inline]
    fn note(&mut self, key: &[u8], value: &'a [u8]) -> u8 {
        let text = || {
            (value.first() == Some(&b'"'))
                .then(|| string_value(value))
                .flatten()
        };
        let (slot, bit) = match key {
            b"type" => (&mut self.kind, KIND),
            b"id" => (&mut self.id, ID),
            b"parentId" => (&mut self.parent_id, PARENT),
            _ => return 0,
        };
        *slot = text();
        bit
    }

    /// Whether the members `seen` are all a line is read for: a compaction is decoded in full.
    #[inline]
    fn complete(&self, seen: u8, v1: bool) -> bool {
        let needed = if v1 { KIND } else { KIND | ID | PARENT };
        seen & needed == needed && self.kind.as_deref() != Some("compaction")
    }
}

/// Whether a line may hold two JSON objects (a `}` then `{` with only blanks between, anywhere:
/// text inside strings can look so too). False only when it surely holds one.
pub(super) fn may_hold_two(line: &[u8]) -> bool {
    memchr::memchr_iter(b'}', line).any(|i| {
        line[i + 1..]
            .iter()
            .find(|b| !b.is_ascii_whitespace())
            .is_some_and(|&b| b == b'{')
    })
}
