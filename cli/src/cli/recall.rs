//! `ctxhost context {search,expand}`: the operator's side of recall, over the same index and
//! with the same arguments as the agent's `ctx_search` / `ctx_expand` tools. No engine runs:
//! the transcript is read and its index brought level with it.

use std::path::Path;

use clap::Args;
use ctxhost::Host;
use ctxhost::recall::tools::{self, Call};
use ctxhost::recall::{Expansion, Hit, RecallIndex};
use ctxhost::transcript::time::format_iso_ms;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::output::Report;
use super::sessions::{SessionFlag, load_transcript};

/// `context search`.
#[derive(Args)]
pub(super) struct SearchArgs {
    #[command(flatten)]
    session: SessionFlag,
    /// Words to find (ranked: entries holding more of them, and rarer ones, first).
    query: String,
    /// Only entries of this role (user, assistant, toolResult, bashExecution, custom,
    /// branchSummary, compactionSummary).
    #[arg(long)]
    role: Option<String>,
    /// Only results of (and calls to) this tool.
    #[arg(long)]
    tool: Option<String>,
    /// Only failed tool results.
    #[arg(long)]
    errors: bool,
    /// Only entries at or after this time (RFC 3339).
    #[arg(long)]
    after: Option<String>,
    /// Only entries before this time (RFC 3339).
    #[arg(long)]
    before: Option<String>,
    /// Hits to show (1-50).
    #[arg(long, default_value_t = 10)]
    limit: u32,
    #[arg(long)]
    json: bool,
}

/// `context expand`.
#[derive(Args)]
pub(super) struct ExpandArgs {
    #[command(flatten)]
    session: SessionFlag,
    /// An entry id, or a summary's citation (`#1a2b3c4d`, `#1a2b3c4d..#5e6f7a8b`).
    #[arg(required_unless_present_any = ["from", "cursor"])]
    id: Option<String>,
    /// First entry of a range (with --to).
    #[arg(long, requires = "to", conflicts_with_all = ["id", "cursor"])]
    from: Option<String>,
    /// Last entry of a range (with --from).
    #[arg(long, requires = "from")]
    to: Option<String>,
    /// Continue where a cut expansion stopped.
    #[arg(long, conflicts_with = "id")]
    cursor: Option<String>,
    /// Cap on the text shown, in estimated tokens (100-16000).
    #[arg(long, default_value_t = 2000)]
    max_tokens: u32,
    #[arg(long)]
    json: bool,
}

impl SearchArgs {
    pub(super) fn json(&self) -> bool {
        self.json
    }

    fn arguments(&self) -> Value {
        let mut args = Map::new();
        args.insert("query".into(), json!(self.query));
        let optional = [
            ("role", self.role.clone()),
            ("tool", self.tool.clone()),
            ("after", self.after.clone()),
            ("before", self.before.clone()),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                args.insert(key.into(), json!(value));
            }
        }
        if self.errors {
            args.insert("isError".into(), json!(true));
        }
        args.insert("limit".into(), json!(self.limit));
        Value::Object(args)
    }
}

impl ExpandArgs {
    pub(super) fn json(&self) -> bool {
        self.json
    }

    fn arguments(&self) -> Value {
        let mut args = Map::new();
        for (key, value) in [
            ("id", &self.id),
            ("from", &self.from),
            ("to", &self.to),
            ("cursor", &self.cursor),
        ] {
            if let Some(value) = value {
                args.insert(key.into(), json!(value));
            }
        }
        args.insert("maxTokens".into(), json!(self.max_tokens));
        Value::Object(args)
    }
}

/// What `context search` found (docs/cli-json/context-search.schema.json).
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct SearchReport {
    session: String,
    query: String,
    /// The index was built from the start by this search (first use, or out of step).
    index_rebuilt: bool,
    index_bytes: u64,
    #[schemars(with = "Vec<HitShape>")]
    hits: Vec<Hit>,
}

/// What `context expand` opened (docs/cli-json/context-expand.schema.json).
#[derive(Serialize, JsonSchema)]
pub(super) struct ExpandReport {
    session: String,
    #[serde(flatten)]
    #[schemars(with = "ExpansionShape")]
    expansion: Expansion,
}

/// A search hit as the recall crate serializes it: the schema's side only, held to the real
/// output by the command's validation test.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(dead_code)]
struct HitShape {
    /// The entry's position in the transcript file.
    entry: u32,
    /// Its id in the file (what `context expand --id` takes).
    id: String,
    /// Its role (v3 spelling).
    role: String,
    /// For tool results (and tool calls), the tool's name.
    tool: Option<String>,
    /// A failed tool result.
    is_error: bool,
    /// Unix milliseconds, when the entry has a time.
    timestamp: Option<u64>,
    /// The text around the first match.
    snippet: String,
    /// Whether the entry is in the session's current context.
    in_context: bool,
}

/// An expansion as the recall crate serializes it (schema side only, as [`HitShape`]).
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct ExpansionShape {
    /// Each entry's heading line and text, in file order.
    text: String,
    /// Ids of the entries shown (whole or in part).
    entries: Vec<String>,
    /// Estimated tokens of `text`.
    tokens: u32,
    /// A cursor to pass back for what did not fit; null when everything was shown.
    next: Option<String>,
}

pub(super) fn search(host: &Host, args: &SearchArgs) -> anyhow::Result<SearchReport> {
    let (_, path) = args.session.existing(host)?;
    let Call::Search(query) = decode(tools::SEARCH, &args.arguments())? else {
        unreachable!("ctx_search decodes to a search")
    };
    let transcript = load_transcript(&path)?;
    let mut index = RecallIndex::open(&path)?;
    let synced = index.sync(&transcript)?;
    let hits = index.search(&transcript, &query)?;
    Ok(SearchReport {
        session: path.display().to_string(),
        query: query.query,
        index_rebuilt: synced.rebuilt,
        index_bytes: index.size_bytes(),
        hits,
    })
}

pub(super) fn expand(host: &Host, args: &ExpandArgs) -> anyhow::Result<ExpandReport> {
    let (_, path) = args.session.existing(host)?;
    let Call::Expand(request) = decode(tools::EXPAND, &args.arguments())? else {
        unreachable!("ctx_expand decodes to an expansion")
    };
    expand_at(&path, &request)
}

fn expand_at(
    path: &Path,
    request: &ctxhost::recall::ExpandRequest,
) -> anyhow::Result<ExpandReport> {
    let transcript = load_transcript(path)?;
    Ok(ExpandReport {
        session: path.display().to_string(),
        expansion: ctxhost::recall::expand(&transcript, request)?,
    })
}

/// The CLI's flags go through the tools' own decoding, so both are checked the same way.
fn decode(tool: &str, arguments: &Value) -> anyhow::Result<Call> {
    match tools::decode(tool, arguments) {
        Some(call) => Ok(call?),
        None => anyhow::bail!("{tool} is not a recall tool"),
    }
}

impl Report for SearchReport {
    fn lines(&self) -> Vec<String> {
        let mut lines = vec![format!(
            "{} entries of {} match {:?}{}",
            self.hits.len(),
            self.session,
            self.query,
            if self.index_rebuilt {
                " (index built now)"
            } else {
                ""
            }
        )];
        for hit in &self.hits {
            let when = hit.timestamp.map(format_iso_ms).unwrap_or_default();
            let tool = hit
                .tool
                .as_deref()
                .map(|t| format!(" {t}"))
                .unwrap_or_default();
            let error = if hit.is_error { " error" } else { "" };
            let place = if hit.in_context { "" } else { " compacted" };
            lines.push(format!(
                "{}  {}{tool}{error}{place}  {when}",
                hit.id, hit.role
            ));
            lines.push(format!("    {}", hit.snippet));
        }
        if let Some(first) = self.hits.first() {
            lines.push(format!(
                "open one: ctxhost context expand --session {} {}",
                self.session, first.id
            ));
        }
        lines
    }
}

impl Report for ExpandReport {
    fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.expansion.text.lines().map(str::to_string).collect();
        if let Some(next) = &self.expansion.next {
            lines.push(format!(
                "(cut at {} tokens; continue: ctxhost context expand --session {} --cursor '{next}')",
                self.expansion.tokens, self.session
            ));
        }
        lines
    }
}
