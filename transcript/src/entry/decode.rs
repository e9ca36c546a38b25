//! Decoding a line with serde: every line the fast path (`envelope`) leaves, and every rule.
//! In steps: the envelope (type, ids, timestamp), what the entry's type adds (the message it
//! stands for, a compaction's members), the migration to the v3 line, a tool result's facts.

use std::borrow::Cow;
use std::ops::Range;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::{Decode, Entry, Line, Text, ToolFacts, v1_id};
use crate::migrate::{Rewrite, rewrite_entry, splice_ids};
use crate::record::CompactionRecord;
use crate::role::Role;
use crate::time::parse_iso_ms;
use crate::tokens::{self, Summary};

/// `toolName` and `isError` of a tool result message, for lines serde decodes.
#[derive(Deserialize)]
struct ToolOnly<'a> {
    #[serde(rename = "toolName", borrow)]
    tool_name: Option<Cow<'a, str>>,
    #[serde(rename = "isError")]
    is_error: Option<bool>,
}

#[derive(Deserialize)]
#[serde(expecting = "an entry object")]
struct RawEntry<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(rename = "parentId", borrow, default)]
    parent_id: Member<'a>,
    // Loosely typed members: only interpreted for the entry types that define them, so an
    // unknown entry type may use the same names for anything.
    #[serde(borrow)]
    timestamp: Option<&'a RawValue>,
    #[serde(borrow)]
    message: Option<&'a RawValue>,
    #[serde(borrow)]
    summary: Option<&'a RawValue>,
    #[serde(rename = "firstKeptEntryId", borrow)]
    first_kept_entry_id: Option<&'a RawValue>,
    #[serde(rename = "firstKeptEntryIndex", borrow)]
    first_kept_entry_index: Option<&'a RawValue>,
    #[serde(rename = "tokensBefore", borrow)]
    tokens_before: Option<&'a RawValue>,
    #[serde(rename = "fromId", borrow)]
    from_id: Option<&'a RawValue>,
    #[serde(rename = "customType", borrow)]
    custom_type: Option<&'a RawValue>,
    #[serde(borrow)]
    content: Option<&'a RawValue>,
    #[serde(borrow)]
    display: Option<&'a RawValue>,
    #[serde(borrow)]
    details: Option<&'a RawValue>,
}

/// `parentId`: absent, or present (null or an id). A v1 line that already has the member must be
/// re-serialised rather than have a second one spliced in.
#[derive(Default)]
enum Member<'a> {
    #[default]
    Absent,
    Present(Option<Cow<'a, str>>),
}

impl<'a> Member<'a> {
    fn as_deref(&self) -> Option<&str> {
        match self {
            Member::Present(Some(s)) => Some(s),
            _ => None,
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Member<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(expecting = "a string or null")]
        struct Wrap<'a>(#[serde(borrow)] Option<Cow<'a, str>>);
        Ok(Member::Present(Wrap::deserialize(d)?.0))
    }
}

#[derive(Deserialize)]
#[serde(expecting = "an entry object")]
struct MessageOnly<'a> {
    #[serde(borrow)]
    message: Option<&'a RawValue>,
}

/// Where a sub-slice of `line` sits in it (serde borrowed it from there).
fn range_in(line: &str, part: &str) -> Range<usize> {
    let start = (part.as_ptr() as usize).saturating_sub(line.as_ptr() as usize);
    start..start + part.len()
}

fn json_problem(line: &str, e: serde_json::Error) -> String {
    match e.classify() {
        serde_json::error::Category::Data => {
            // Valid JSON of the wrong shape is named as such, not as a decoding failure.
            let kind = match line.trim_start().as_bytes().first() {
                Some(b'[') => "an array",
                Some(b'"') => "a string",
                Some(b'{') => return format!("malformed entry: {e}"),
                Some(b't' | b'f') => "a boolean",
                Some(b'n') => "null",
                _ => "a number",
            };
            format!("entry is {kind}, not a JSON object")
        }
        _ => format!("not valid JSON: {e}"),
    }
}

fn field<'a, T: Deserialize<'a>>(
    raw: Option<&'a RawValue>,
    name: &str,
) -> Result<Option<T>, String> {
    raw.map(|r| serde_json::from_str(r.get()))
        .transpose()
        .map_err(|e| format!("field \"{name}\": {e}"))
}

fn required<'a, T: Deserialize<'a>>(
    raw: Option<&'a RawValue>,
    name: &str,
    kind: &str,
) -> Result<T, String> {
    field(raw, name)?.ok_or_else(|| format!("{kind} entry has no \"{name}\""))
}

fn quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

impl Entry {
    /// Decode one line with serde (see the module docs).
    pub(super) fn decode_serde(line: Line, line_no: usize, d: &Decode) -> Result<Entry, String> {
        let text = line.as_str();
        let raw: RawEntry<'_> = serde_json::from_str(text).map_err(|e| json_problem(text, e))?;
        let kind = kind_of(&raw)?;
        let (id, parent_id) = ids_of(&raw, &kind, d)?;
        let typed = Typed::of(&raw, &kind, d)?;
        let hook = typed.is_hook();
        let migration = Migration {
            rewrite: needs_rewrite(&raw, &kind, d, hook),
            ids: (&id, parent_id.as_deref()),
            first_kept_id: typed.first_kept_id.as_deref(),
            hook,
            message: raw.message.map(|m| range_in(text, m.get())),
        };
        let migrated = migration.apply(line, d)?;
        let ids = (Text::from(id), parent_id.map(Text::from));
        Ok(typed.into_entry(migrated, line_no, ids, kind))
    }
}

/// `timestamp`, when it is a readable ISO-8601 time.
fn timestamp_of(raw: &RawEntry<'_>) -> Option<u64> {
    field::<Cow<'_, str>>(raw.timestamp, "timestamp")
        .ok()
        .flatten()
        .and_then(|t| parse_iso_ms(&t))
}

/// The entry's type; `message` (most lines) without an allocation.
fn kind_of(raw: &RawEntry<'_>) -> Result<Cow<'static, str>, String> {
    match raw.kind.as_deref() {
        Some("") | None => Err("entry has no \"type\"".into()),
        Some("session") => Err("a second session header".into()),
        Some("message") => Ok(Cow::Borrowed("message")),
        Some(k) => Ok(Cow::Owned(k.to_string())),
    }
}

/// `id` and `parentId`; a v1 entry's follow from its position.
fn ids_of(raw: &RawEntry<'_>, kind: &str, d: &Decode) -> Result<(String, Option<String>), String> {
    if d.version < 2 {
        return Ok((v1_id(d.index), d.index.checked_sub(1).map(v1_id)));
    }
    match raw.id.as_deref() {
        Some(id) if !id.is_empty() => {
            Ok((id.to_string(), raw.parent_id.as_deref().map(str::to_string)))
        }
        _ => Err(format!("{kind} entry has no \"id\"")),
    }
}

/// What an entry's type adds to it: the message it stands for when the model gets it (`info`
/// measures it; `synth` is its JSON for the types that are not messages themselves), and a
/// compaction's members.
#[derive(Default)]
struct Typed {
    timestamp_ms: Option<u64>,
    info: Option<Summary>,
    synth: Option<String>,
    first_kept_id: Option<String>,
    tokens_before: u64,
    meta: Option<Box<CompactionRecord>>,
    /// A value ignored as implausible, for a warning.
    note: Option<String>,
}

impl Typed {
    fn of(raw: &RawEntry<'_>, kind: &str, d: &Decode) -> Result<Typed, String> {
        let mut typed = Typed {
            timestamp_ms: timestamp_of(raw),
            ..Typed::default()
        };
        let timestamp_ms = typed.timestamp_ms.unwrap_or(0);
        match kind {
            "message" => typed.info = Some(message_summary(raw)?),
            "compaction" => typed.compaction(raw, d, timestamp_ms)?,
            "branch_summary" => typed.synth = Some(branch_summary(raw, timestamp_ms)?),
            "custom_message" => typed.synth = Some(custom_message(raw, timestamp_ms)?),
            _ => {}
        }
        if let Some(json) = &typed.synth {
            typed.info = Some(tokens::summarize(json)?);
        }
        if let Some(problem) = typed.info.as_ref().and_then(|i| i.usage_problem.clone()) {
            typed.note = Some(problem);
        }
        Ok(typed)
    }

    /// A v2 `hookMessage`, which v3 writes as a `custom` message.
    fn is_hook(&self) -> bool {
        (self.info.as_ref()).is_some_and(|i| i.role_name == "hookMessage")
    }

    /// The entry, its line migrated.
    fn into_entry(
        self,
        migrated: Migrated,
        line_no: usize,
        ids: (Text, Option<Text>),
        kind: Cow<'static, str>,
    ) -> Entry {
        let (role, tokens, usage_total) =
            (self.info.as_ref()).map_or((None, 0, None), Summary::counted);
        let tool = (role == Some(Role::ToolResult) && kind == "message")
            .then(|| tool_facts(&migrated.line, migrated.message.clone()))
            .flatten();
        Entry {
            original: migrated.original,
            tool,
            timestamp_ms: self.timestamp_ms,
            message: migrated.message,
            synth: self.synth,
            role,
            tokens,
            usage_total,
            first_kept_id: self.first_kept_id,
            tokens_before: self.tokens_before,
            meta: self.meta,
            note: self.note,
            ..Entry::bare(migrated.line, line_no, ids, kind)
        }
    }

    fn compaction(
        &mut self,
        raw: &RawEntry<'_>,
        d: &Decode,
        timestamp_ms: u64,
    ) -> Result<(), String> {
        let kind = "compaction";
        let summary: String = required(raw.summary, "summary", kind)?;
        self.first_kept_id = Some(first_kept_id(raw, d)?);
        self.read_tokens_before(raw)?;
        // Details are free-form for other writers: a shape we do not know is no error.
        self.meta = raw
            .details
            .and_then(|d| CompactionRecord::from_json(d.get()))
            .map(Box::new);
        self.synth = Some(compaction_summary(
            &summary,
            self.tokens_before,
            timestamp_ms,
        ));
        Ok(())
    }

    /// A compaction's `tokensBefore`; an implausible count is ignored with a note.
    fn read_tokens_before(&mut self, raw: &RawEntry<'_>) -> Result<(), String> {
        let Some(t) = field::<f64>(raw.tokens_before, "tokensBefore")? else {
            return Ok(());
        };
        match tokens::plausible(t) {
            Some(t) => self.tokens_before = t,
            None => {
                self.note = Some(format!(
                    "tokensBefore {t} is not a plausible token count; ignored"
                ))
            }
        }
        Ok(())
    }
}

/// What a `message` entry's message says for accounting; it must have a role.
fn message_summary(raw: &RawEntry<'_>) -> Result<Summary, String> {
    let m = raw.message.ok_or("message entry has no \"message\"")?;
    let summary = tokens::summarize(m.get())?;
    if summary.role_name.is_empty() {
        return Err("message has no \"role\"".into());
    }
    Ok(summary)
}

/// The message a compaction stands for when the model gets it.
fn compaction_summary(summary: &str, tokens_before: u64, timestamp_ms: u64) -> String {
    format!(
        "{{\"role\":\"compactionSummary\",\"summary\":{},\"tokensBefore\":{tokens_before},\"timestamp\":{timestamp_ms}}}",
        quote(summary),
    )
}

fn branch_summary(raw: &RawEntry<'_>, timestamp_ms: u64) -> Result<String, String> {
    let summary: String = required(raw.summary, "summary", "branch_summary")?;
    let from: Option<String> = field(raw.from_id, "fromId")?;
    Ok(format!(
        "{{\"role\":\"branchSummary\",\"summary\":{},\"fromId\":{},\"timestamp\":{timestamp_ms}}}",
        quote(&summary),
        from.as_deref().map_or_else(|| "null".into(), quote)
    ))
}

fn custom_message(raw: &RawEntry<'_>, timestamp_ms: u64) -> Result<String, String> {
    let custom_type: Option<String> = field(raw.custom_type, "customType")?;
    let display: Option<bool> = field(raw.display, "display")?;
    let details = raw
        .details
        .map(|d| format!(",\"details\":{}", d.get()))
        .unwrap_or_default();
    Ok(format!(
        "{{\"role\":\"custom\",\"customType\":{},\"content\":{},\"display\":{}{details},\"timestamp\":{timestamp_ms}}}",
        custom_type.as_deref().map_or_else(|| "null".into(), quote),
        raw.content.map_or("\"\"", |c| c.get()),
        display.unwrap_or(true),
    ))
}

/// Whether the line must be re-serialised to be a v3 line (a v1 message line without ids of
/// its own only needs them spliced in).
fn needs_rewrite(raw: &RawEntry<'_>, kind: &str, d: &Decode, hook: bool) -> bool {
    match d.version {
        3 => false,
        2 => hook,
        _ => {
            kind == "compaction"
                || hook
                || raw.id.is_some()
                || matches!(raw.parent_id, Member::Present(_))
        }
    }
}

/// A line in its v3 form.
struct Migrated {
    line: Line,
    /// The line as read, when it differs.
    original: Option<Line>,
    /// Where the message sits in `line`.
    message: Option<Range<usize>>,
}

/// How a line becomes its v3 form.
struct Migration<'a> {
    rewrite: bool,
    /// The entry's id and parent (spliced or written into a v1 line).
    ids: (&'a str, Option<&'a str>),
    first_kept_id: Option<&'a str>,
    /// A v2 `hookMessage` becomes a `custom` message.
    hook: bool,
    /// Where the message sits in the line as read.
    message: Option<Range<usize>>,
}

impl Migration<'_> {
    fn apply(self, line: Line, d: &Decode) -> Result<Migrated, String> {
        let spliced = (d.version == 1 && !self.rewrite)
            .then(|| self.spliced(line.as_str()))
            .flatten();
        if let Some((new, message)) = spliced {
            return Ok(Migrated {
                line: Line::from(new),
                original: Some(line),
                message,
            });
        }
        if !self.rewrite && d.version != 1 {
            return Ok(Migrated {
                line,
                original: None,
                message: self.message,
            });
        }
        self.rewritten(line, d)
    }

    /// A v1 line with its ids spliced in, and where its message moved to.
    fn spliced(&self, text: &str) -> Option<(String, Option<Range<usize>>)> {
        let (id, parent) = self.ids;
        let (new, pos, len) = splice_ids(text, id, parent)?;
        let message = self.message.clone().map(|r| {
            if r.start >= pos {
                r.start + len..r.end + len
            } else {
                r
            }
        });
        Some((new, message))
    }

    /// The line re-serialised as v3.
    fn rewritten(self, line: Line, d: &Decode) -> Result<Migrated, String> {
        let rewrite = Rewrite {
            ids: (d.version == 1).then_some(self.ids),
            first_kept_id: self.first_kept_id.filter(|_| d.version == 1),
            hook_to_custom: self.hook,
        };
        let new = rewrite_entry(line.as_str(), &rewrite)?;
        let parsed: MessageOnly<'_> =
            serde_json::from_str(&new).map_err(|e| json_problem(&new, e))?;
        let message = parsed.message.map(|m| range_in(&new, m.get()));
        Ok(Migrated {
            line: Line::from(new),
            original: Some(line),
            message,
        })
    }
}

/// A tool result's tool name and error flag, read from its message in the v3 line.
fn tool_facts(line: &Line, message: Option<Range<usize>>) -> Option<ToolFacts> {
    let json = line.as_str().get(message?)?;
    let facts: ToolOnly<'_> = serde_json::from_str(json).ok()?;
    Some(ToolFacts {
        name: facts.tool_name.map(|n| Err(n.into())),
        is_error: facts.is_error == Some(true),
    })
}

/// A compaction's `firstKeptEntryId`; a v1 file may give the entry's index instead.
fn first_kept_id(raw: &RawEntry<'_>, d: &Decode) -> Result<String, String> {
    if d.version >= 2 {
        return required(raw.first_kept_entry_id, "firstKeptEntryId", "compaction");
    }
    v1_first_kept(raw, d)
}

/// pi's v1 `firstKeptEntryIndex` indexes the file's lines with the header at 0, so entry `n-1`
/// is meant; 0 (the header itself) means "keep everything", i.e. the first entry.
fn v1_first_kept(raw: &RawEntry<'_>, d: &Decode) -> Result<String, String> {
    if let Some(id) = field::<String>(raw.first_kept_entry_id, "firstKeptEntryId")? {
        return Ok(id);
    }
    let n: u64 = required(
        raw.first_kept_entry_index,
        "firstKeptEntryIndex",
        "compaction",
    )?;
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    if n > d.entry_count || d.entry_count == 0 {
        return Err(format!(
            "firstKeptEntryIndex {n} is out of range (the file has {} entries)",
            d.entry_count
        ));
    }
    Ok(v1_id(n.saturating_sub(1)))
}
