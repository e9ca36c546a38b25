//! One line of a transcript, decoded once: identity, tree link, what it contributes to the
//! model context (role, token estimate, usage) and where its message JSON lives in the line.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use crate::message::{self, MessageView};
use crate::migrate::splice_ids;
use crate::record::CompactionRecord;
use crate::role::Role;
use crate::time::parse_iso_ms;
use crate::tokens::TokenCounter;

mod decode;
mod header;

pub use header::Header;

/// The text of one line: a slice of the buffer a whole file was read into, shared by all its
/// entries (loading copies no line, cloning an entry copies no text), or a line of its own.
#[derive(Clone)]
pub(crate) struct Line {
    buf: Arc<String>,
    range: Range<usize>,
}

impl Line {
    /// `buf[range]`; `range` must lie on char boundaries of `buf`.
    pub(crate) fn slice(buf: &Arc<String>, range: Range<usize>) -> Line {
        debug_assert!(buf.get(range.clone()).is_some());
        Line {
            buf: Arc::clone(buf),
            range,
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        self.buf.get(self.range.clone()).unwrap_or("")
    }
}

impl From<String> for Line {
    fn from(text: String) -> Line {
        let range = 0..text.len();
        Line {
            buf: Arc::new(text),
            range,
        }
    }
}

impl From<&str> for Line {
    fn from(text: &str) -> Line {
        Line::from(text.to_string())
    }
}

impl fmt::Debug for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// A short text of an entry (its id, its parent's): where it sits in the line, so that neither
/// loading nor cloning an entry allocates for it, or its own copy (decoded, synthesised).
#[derive(Debug, Clone)]
enum Text {
    At(Range<usize>),
    Own(Box<str>),
}

impl Text {
    fn get<'a>(&'a self, line: &'a Line) -> &'a str {
        match self {
            Text::At(range) => line.as_str().get(range.clone()).unwrap_or(""),
            Text::Own(text) => text,
        }
    }
}

impl From<String> for Text {
    fn from(text: String) -> Text {
        Text::Own(text.into_boxed_str())
    }
}

/// What a tool result says about its tool, kept from decoding so that pruning decisions need
/// no decoding of the output.
#[derive(Debug, Clone, Default)]
struct ToolFacts {
    /// Where `toolName` sits in the line (fast path), or its decoded text.
    name: Option<Result<Range<usize>, Box<str>>>,
    is_error: bool,
}

impl ToolFacts {
    /// A tool result's facts as the fast path read them; None for other messages.
    #[inline]
    fn of_envelope(m: &crate::envelope::MessageLine) -> Option<ToolFacts> {
        (m.summary.role == Some(Role::ToolResult)).then(|| ToolFacts {
            name: m.tool_name.clone().map(Ok),
            is_error: m.is_error == Some(true),
        })
    }
}

/// One entry (a line after the header).
#[derive(Debug, Clone)]
pub struct Entry {
    /// The line in v3 form (equal to the file's line unless migrated).
    line: Line,
    /// The line as read, when migration changed it.
    original: Option<Line>,
    /// A v1 line whose v3 form is `line` with `id` and `parentId` spliced in: made on first
    /// use, in `spliced` (a v1 file is mostly such lines, and most loads never write).
    v1_ids: bool,
    spliced: OnceLock<String>,
    /// For tool results: the tool's name and whether it failed (what pruning asks).
    tool: Option<ToolFacts>,
    line_no: usize,
    id: Text,
    parent_id: Option<Text>,
    kind: Cow<'static, str>,
    /// None when absent or not a readable ISO-8601 time.
    timestamp_ms: Option<u64>,
    /// Byte range of the `message` member's value inside `line`.
    message: Option<Range<usize>>,
    /// AgentMessage synthesised for summary/custom entries.
    synth: Option<String>,
    role: Option<Role>,
    tokens: u32,
    usage_total: Option<u64>,
    first_kept_id: Option<String>,
    tokens_before: u64,
    /// For compaction entries: their `details`.
    meta: Option<Box<CompactionRecord>>,
    /// A value that was ignored as implausible, for the reader to report as a warning.
    note: Option<String>,
    /// Set by the transcript when a compaction on the active branch pruned this tool result.
    pub(crate) pruned: bool,
    // Resolved by the transcript once every id is known.
    pub(crate) parent: Option<usize>,
    pub(crate) first_kept: Option<usize>,
}

/// What a pruned tool output is replaced by in the context.
pub const PRUNED_TEXT: &str = "[output pruned for context]";

/// The synthetic id of the v1 entry at `index`: deterministic, so re-loading a v1 file gives
/// the same ids, and unique within the file.
pub(crate) fn v1_id(index: usize) -> String {
    if index > u32::MAX as usize {
        return format!("{index:08x}");
    }
    // Every line of a v1 file gets one: written directly, not through the formatter.
    const HEX: &[u8; 16] = b"0123456789abcdef";
    (0..8)
        .rev()
        .map(|k| char::from(HEX[(index >> (4 * k)) & 0xf]))
        .collect()
}

/// How a v1 message line starts when its ids can be spliced in after its type.
const V1_MESSAGE_PREFIX: &str = "{\"type\":\"message\",";

/// The ids of a `message` line the fast path read (see `envelope`), when its entry is built
/// from that reading; None sends the line to the serde decoder. Loading and the check of a
/// whole file (`check.rs`) both ask here, so they take the same lines the same way.
pub(crate) enum FastIds {
    /// A v2/v3 line: where its `id` and `parentId` sit in it.
    Own(Range<usize>, Option<Range<usize>>),
    /// A v1 line, whose ids follow from its position.
    V1,
}

pub(crate) fn fast_ids(
    fast: &crate::envelope::MessageLine,
    text: &str,
    version: u32,
) -> Option<FastIds> {
    match version {
        2 | 3 => {
            let id = fast.id.clone().filter(|r| !r.is_empty())?;
            Some(FastIds::Own(id, fast.parent_id.clone().flatten()))
        }
        _ if fast.id.is_none()
            && fast.parent_id.is_none()
            && text.starts_with(V1_MESSAGE_PREFIX) =>
        {
            Some(FastIds::V1)
        }
        _ => None,
    }
}

/// How the file's version shapes an entry's decoding.
pub(crate) struct Decode {
    pub version: u32,
    /// Position among the entries (v1 ids and parents derive from it).
    pub index: usize,
    /// Number of entries in the file (bounds v1 `firstKeptEntryIndex`).
    pub entry_count: usize,
}

impl Entry {
    /// Decode one line; the error is the problem text (the caller adds file and line).
    pub(crate) fn decode(line: Line, line_no: usize, d: &Decode) -> Result<Entry, String> {
        if let Some(fast) = crate::envelope::message_line(line.as_str()) {
            match fast_ids(&fast, line.as_str(), d.version) {
                Some(FastIds::Own(id, parent)) => {
                    let ids = (Text::At(id), parent.map(Text::At));
                    return Ok(Entry::from_envelope(line, line_no, fast, ids, false));
                }
                // Most of a v1 file: a message line without ids, its v3 form made when first
                // asked for (see `Entry::v3_line`).
                Some(FastIds::V1) => {
                    let ids = (
                        Text::from(v1_id(d.index)),
                        d.index.checked_sub(1).map(|i| Text::from(v1_id(i))),
                    );
                    return Ok(Entry::from_envelope(line, line_no, fast, ids, true));
                }
                None => {}
            }
        }
        Entry::decode_serde(line, line_no, d)
    }

    /// A `message` line the fast path read (see `envelope`).
    fn from_envelope(
        line: Line,
        line_no: usize,
        m: crate::envelope::MessageLine,
        ids: (Text, Option<Text>),
        v1: bool,
    ) -> Entry {
        let tool = ToolFacts::of_envelope(&m);
        let timestamp_ms = m.timestamp.and_then(|r| parse_iso_ms(&line.as_str()[r]));
        let (role, tokens, usage_total) = m.summary.counted();
        Entry {
            v1_ids: v1,
            tool,
            timestamp_ms,
            message: Some(m.message),
            role,
            tokens,
            usage_total,
            note: m.summary.usage_problem,
            ..Entry::bare(line, line_no, ids, Cow::Borrowed("message"))
        }
    }

    /// An entry of `kind` on `line` with nothing measured, found or resolved yet: what the
    /// decoders fill in.
    #[inline]
    fn bare(
        line: Line,
        line_no: usize,
        (id, parent_id): (Text, Option<Text>),
        kind: Cow<'static, str>,
    ) -> Entry {
        Entry {
            line,
            original: None,
            v1_ids: false,
            spliced: OnceLock::new(),
            tool: None,
            line_no,
            id,
            parent_id,
            kind,
            timestamp_ms: None,
            message: None,
            synth: None,
            role: None,
            tokens: 0,
            usage_total: None,
            first_kept_id: None,
            tokens_before: 0,
            meta: None,
            note: None,
            pruned: false,
            parent: None,
            first_kept: None,
        }
    }

    /// The v2/v3 id; for v1 files a synthesised, deterministic one (`{index:08x}`).
    pub fn id(&self) -> &str {
        self.id.get(&self.line)
    }

    pub fn parent_id(&self) -> Option<&str> {
        self.parent_id.as_ref().map(|p| p.get(&self.line))
    }

    /// `message`, `compaction`, ...; unknown types are kept as they are.
    pub fn entry_type(&self) -> &str {
        &self.kind
    }

    /// The original JSON line, verbatim.
    pub fn line(&self) -> &str {
        self.original.as_ref().unwrap_or(&self.line).as_str()
    }

    /// The line as a v3 file holds it (equal to [`Entry::line`] for v3 input).
    pub fn v3_line(&self) -> &str {
        if !self.v1_ids {
            return self.line.as_str();
        }
        self.spliced.get_or_init(|| {
            let line = self.line.as_str();
            splice_ids(line, self.id(), self.parent_id())
                .map_or_else(|| line.to_string(), |(v3, _, _)| v3)
        })
    }

    /// Whether reading migrated this entry (its v3 line differs from the file's).
    pub fn is_migrated(&self) -> bool {
        self.original.is_some() || self.v1_ids
    }

    /// 1-based line in the source file; 0 for entries appended in memory.
    pub fn line_number(&self) -> usize {
        self.line_no
    }

    /// Entry timestamp in Unix milliseconds (0 when absent or unreadable).
    pub fn timestamp_ms(&self) -> u64 {
        self.timestamp_ms.unwrap_or(0)
    }

    /// Entry timestamp in Unix milliseconds; None when absent or unreadable (so it is shown as
    /// unknown rather than as 1970-01-01).
    pub fn timestamp(&self) -> Option<u64> {
        self.timestamp_ms
    }

    /// A value ignored while decoding (an implausible usage figure), taken once for a warning.
    pub(crate) fn take_note(&mut self) -> Option<String> {
        self.note.take()
    }

    /// Estimated tokens this entry adds to the context (0 for entries not sent to the model;
    /// the placeholder's estimate for a pruned tool result).
    pub fn tokens(&self) -> u32 {
        if self.pruned {
            crate::tokens::estimate_text(PRUNED_TEXT)
        } else {
            self.tokens
        }
    }

    pub(crate) fn set_tokens(&mut self, tokens: u32) {
        self.tokens = tokens;
    }

    /// For a tool result: the tool's name (`toolName`), as its view has it, without decoding
    /// the message.
    pub fn tool_name(&self) -> Option<&str> {
        match &self.tool.as_ref()?.name {
            Some(Ok(range)) => self.line.as_str().get(range.clone()),
            Some(Err(name)) => Some(name),
            None => None,
        }
    }

    /// For a tool result: whether it reports a failure (`isError`), without decoding it.
    pub fn is_error(&self) -> bool {
        self.tool.as_ref().is_some_and(|t| t.is_error)
    }

    /// Whether a compaction on the active branch pruned this tool result's output.
    pub fn is_pruned(&self) -> bool {
        self.pruned
    }

    /// For compaction entries: what their `details` record (layer, trigger, pruned ids...).
    pub fn compaction_record(&self) -> Option<&CompactionRecord> {
        self.meta.as_deref()
    }

    /// Some for entries sent to the model.
    pub fn context_role(&self) -> Option<Role> {
        self.role
    }

    /// `usage.totalTokens` of a non-error, non-aborted assistant message.
    pub fn usage_total(&self) -> Option<u64> {
        self.usage_total
    }

    /// For compaction entries: the first entry kept after the boundary (v1: mapped from the
    /// index).
    pub fn first_kept_entry_id(&self) -> Option<&str> {
        self.first_kept_id.as_deref()
    }

    /// For compaction entries: `tokensBefore`.
    pub fn tokens_before(&self) -> u64 {
        self.tokens_before
    }

    /// The AgentMessage JSON: for `message` entries the `message` member byte-identical to the
    /// file; for compaction / branch_summary / custom_message a synthesised one; "" otherwise.
    pub fn message_json(&self) -> Cow<'_, str> {
        if let Some(s) = &self.synth {
            return Cow::Borrowed(s);
        }
        match &self.message {
            Some(r) if self.kind == "message" => {
                Cow::Borrowed(self.line.as_str().get(r.clone()).unwrap_or(""))
            }
            _ => Cow::Borrowed(""),
        }
    }

    /// The AgentMessage as the model gets it: [`Entry::message_json`], except for a pruned
    /// tool result, whose content becomes [`PRUNED_TEXT`] (the file keeps the original bytes).
    pub fn context_message_json(&self) -> Cow<'_, str> {
        if !self.pruned {
            return self.message_json();
        }
        let json = self.message_json();
        let Ok(Value::Object(mut map)) = serde_json::from_str::<Value>(&json) else {
            return json;
        };
        map.insert(
            "content".into(),
            serde_json::json!([{"type": "text", "text": PRUNED_TEXT}]),
        );
        map.remove("details");
        Cow::Owned(Value::Object(map).to_string())
    }

    /// The message JSON of a context entry (for re-counting tokens).
    pub(crate) fn message_json_for_count(&self) -> Option<Cow<'_, str>> {
        self.role.map(|_| self.message_json())
    }

    /// The decoded message, for context entries.
    pub fn view(&self) -> Option<MessageView> {
        self.role?;
        let json = self.message_json();
        message::view(&json, self.timestamp_ms()).ok().flatten()
    }
}

// Here rather than in `tokens`, which knows messages but not entries: the dependency runs
// one way, entry -> tokens.
impl TokenCounter {
    /// Exact tokens of an entry's context message (None for entries not sent to the model).
    pub(crate) fn count_entry(&self, entry: &Entry) -> Option<u32> {
        self.count_message(&entry.message_json_for_count()?)
    }
}

#[cfg(test)]
mod tests;
