//! The in-memory transcript: parse (v1/v2/v3, migrated to v3), the entry tree, boundary loading
//! of the context, token accounting and appends. Everything per entry is decoded once at parse
//! or append time so `context()` and `context_tokens()` are plain walks over indices.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::path::Path;

use serde::de::IgnoredAny;
use serde_json::Value;

use crate::entry::{Decode, Entry, Header};
use crate::error::{LoadWarning, TranscriptError};
use crate::role::Role;

/// A session transcript.
#[derive(Debug, Clone)]
pub struct Transcript {
    source: String,
    header: Header,
    entries: Vec<Entry>,
    by_id: HashMap<String, usize>,
    warnings: Vec<LoadWarning>,
}

/// A compaction to append (see [`Transcript::append_compaction`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NewCompaction {
    pub summary: String,
    pub first_kept_entry_id: String,
    pub tokens_before: u64,
    pub details: Option<Value>,
}

fn quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

impl Transcript {
    /// An empty version 3 transcript.
    pub fn new(session_id: &str, cwd: &str, timestamp_iso: &str) -> Transcript {
        Transcript {
            source: format!("<session {session_id}>"),
            header: Header::new_v3(session_id, cwd, timestamp_iso),
            entries: Vec::new(),
            by_id: HashMap::new(),
            warnings: Vec::new(),
        }
    }

    /// Read a load from disk; errors name the path.
    pub fn load(path: &Path) -> Result<Transcript, TranscriptError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| TranscriptError::io(path, "cannot read transcript", e))?;
        Transcript::parse(&text, &path.display().to_string())
    }

    /// Parse JSONL of any supported version; v1/v2 are migrated to v3 in memory. `source`
    /// names the file in errors and warnings.
    pub fn parse(text: &str, source: &str) -> Result<Transcript, TranscriptError> {
        let mut lines: Vec<(usize, &str)> = text
            .split('\n')
            .enumerate()
            .map(|(i, l)| (i + 1, l.strip_suffix('\r').unwrap_or(l)))
            .filter(|(_, l)| !l.trim().is_empty())
            .collect();
        let mut warnings = Vec::new();
        // A crash mid-write leaves a last line without its newline; if it is not JSON it is
        // the torn tail of an append, not corruption of what came before.
        if !text.ends_with('\n')
            && let Some(&(line, last)) = lines.last()
            && serde_json::from_str::<IgnoredAny>(last).is_err()
        {
            warnings.push(LoadWarning {
                source: source.to_string(),
                line,
                message: "torn last line (no trailing newline, not JSON) ignored".into(),
            });
            lines.pop();
        }
        let Some(&(header_line, header_text)) = lines.first() else {
            return Err(TranscriptError::invalid(
                source,
                1,
                "empty file: no session header",
            ));
        };
        let header = Header::parse(header_text)
            .map_err(|p| TranscriptError::invalid(source, header_line, p))?;
        let entry_count = lines.len() - 1;
        let mut entries = Vec::with_capacity(entry_count);
        for (index, &(line_no, text)) in lines[1..].iter().enumerate() {
            let decode = Decode {
                version: header.version(),
                index,
                entry_count,
            };
            let entry = Entry::decode(text.to_string(), line_no, &decode)
                .map_err(|p| TranscriptError::invalid(source, line_no, p))?;
            entries.push(entry);
        }
        let mut t = Transcript {
            source: source.to_string(),
            header,
            entries,
            by_id: HashMap::new(),
            warnings,
        };
        t.link()?;
        Ok(t)
    }

    /// Index ids, resolve parents and compaction boundaries, reject duplicates and cycles.
    fn link(&mut self) -> Result<(), TranscriptError> {
        let src = self.source.clone();
        let mut by_id = HashMap::with_capacity(self.entries.len());
        for (i, e) in self.entries.iter().enumerate() {
            if let Some(&first) = by_id.get(e.id()) {
                let first_line = self.entries.get(first).map_or(0, Entry::line_number);
                return Err(TranscriptError::invalid(
                    &src,
                    e.line_number(),
                    format!(
                        "duplicate id {:?} (first used on line {first_line})",
                        e.id()
                    ),
                ));
            }
            by_id.insert(e.id().to_string(), i);
        }
        let mut warnings = Vec::new();
        for e in &mut self.entries {
            e.parent = match e.parent_id() {
                None => None,
                Some(p) => {
                    let found = by_id.get(p).copied();
                    if found.is_none() {
                        warnings.push(LoadWarning {
                            source: src.clone(),
                            line: e.line_number(),
                            message: format!("parentId {p:?} not found; entry treated as a root"),
                        });
                    }
                    found
                }
            };
            if let Some(k) = e.first_kept_entry_id() {
                let Some(&idx) = by_id.get(k) else {
                    return Err(TranscriptError::invalid(
                        &src,
                        e.line_number(),
                        format!("compaction firstKeptEntryId {k:?} is not an entry of this file"),
                    ));
                };
                e.first_kept = Some(idx);
            }
        }
        self.warnings.extend(warnings);
        self.by_id = by_id;
        self.check_cycles()
    }

    /// Parent links must form a forest; a cycle would make the active branch endless.
    fn check_cycles(&self) -> Result<(), TranscriptError> {
        const NEW: u8 = 0;
        const ON_PATH: u8 = 1;
        const DONE: u8 = 2;
        let mut state = vec![NEW; self.entries.len()];
        let mut path = Vec::new();
        for start in 0..self.entries.len() {
            let mut cur = Some(start);
            while let Some(c) = cur {
                match state[c] {
                    DONE => break,
                    ON_PATH => {
                        let e = &self.entries[c];
                        return Err(TranscriptError::invalid(
                            &self.source,
                            e.line_number(),
                            format!("parentId cycle through entry {:?}", e.id()),
                        ));
                    }
                    _ => {}
                }
                state[c] = ON_PATH;
                path.push(c);
                cur = self.entries[c].parent;
            }
            for p in path.drain(..) {
                state[p] = DONE;
            }
        }
        Ok(())
    }

    /// The name errors and warnings use for this transcript.
    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// File order; the index is the engine-facing entry reference.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub fn warnings(&self) -> &[LoadWarning] {
        &self.warnings
    }

    /// Whether the file was an older version (writing it back produces different bytes).
    pub fn is_migrated(&self) -> bool {
        self.header.version() < 3
    }

    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.by_id.get(id).copied()
    }

    pub fn entry_by_id(&self, id: &str) -> Option<&Entry> {
        self.index_of(id).and_then(|i| self.entries.get(i))
    }

    /// The last entry of the file.
    pub fn leaf(&self) -> Option<usize> {
        self.entries.len().checked_sub(1)
    }

    /// Root..leaf by parentId.
    pub fn active_branch(&self) -> Vec<usize> {
        let mut out = Vec::new();
        let mut cur = self.leaf();
        // Links were checked acyclic; the bound only guards against future mistakes.
        while let Some(i) = cur
            && out.len() <= self.entries.len()
        {
            out.push(i);
            cur = self.entries[i].parent;
        }
        out.reverse();
        out
    }

    fn latest_compaction(&self, branch: &[usize]) -> Option<usize> {
        branch
            .iter()
            .rposition(|&i| self.entries[i].entry_type() == "compaction")
    }

    /// Position in `branch[..before]` of the first entry kept by the compaction at `branch[p]`.
    fn first_kept_position(&self, branch: &[usize], p: usize) -> Option<usize> {
        let k = self.entries[branch[p]].first_kept?;
        branch[..p].iter().position(|&i| i == k)
    }

    fn is_message_context(&self, i: usize) -> bool {
        let e = &self.entries[i];
        e.context_role().is_some() && e.entry_type() != "compaction"
    }

    /// What is sent to the model, by boundary loading: with a compaction on the active branch,
    /// the latest compaction followed by the context entries from its first kept entry on
    /// (older compactions are not repeated); otherwise every context entry of the branch.
    pub fn context(&self) -> Vec<usize> {
        let branch = self.active_branch();
        let Some(p) = self.latest_compaction(&branch) else {
            return branch
                .into_iter()
                .filter(|&i| self.is_message_context(i))
                .collect();
        };
        let mut out = Vec::with_capacity(branch.len() + 1);
        out.push(branch[p]);
        // Like pi: a first kept entry not found before the boundary keeps only what follows it.
        let from = self.first_kept_position(&branch, p).unwrap_or(p + 1);
        out.extend(
            branch[from..]
                .iter()
                .copied()
                .filter(|&i| i != branch[p] && self.is_message_context(i)),
        );
        out
    }

    /// Context size by the TRANSCRIPTS.md rule over `context()`: the last valid assistant
    /// usage plus estimates of what follows it; estimates of everything without one. Usage
    /// recorded before the latest compaction measured the uncompacted context, so it is not
    /// used (the summary and kept entries are estimated instead).
    pub fn context_tokens(&self) -> u64 {
        let ctx = self.context();
        let boundary = ctx
            .first()
            .copied()
            .filter(|&i| self.entries[i].entry_type() == "compaction");
        let mut trailing = 0u64;
        for &i in ctx.iter().rev() {
            let e = &self.entries[i];
            if let Some(total) = e.usage_total()
                && boundary.is_none_or(|b| i > b)
            {
                return total.saturating_add(trailing);
            }
            trailing += u64::from(e.tokens());
        }
        trailing
    }

    /// Compaction entries on the active branch.
    pub fn compaction_count(&self) -> usize {
        self.active_branch()
            .into_iter()
            .filter(|&i| self.entries[i].entry_type() == "compaction")
            .count()
    }

    fn fresh_id(&self) -> String {
        let state = RandomState::new();
        let mut attempt = 0u64;
        loop {
            let h = state.hash_one((self.entries.len(), attempt, self.header.id()));
            let id = format!("{:08x}", h as u32);
            if !self.by_id.contains_key(&id) {
                return id;
            }
            attempt += 1;
        }
    }

    fn next_line_number(&self) -> usize {
        self.entries.len() + 2
    }

    /// Decode a new v3 line, link it under the current leaf and index it.
    fn push_line(&mut self, line: String) -> Result<usize, TranscriptError> {
        let index = self.entries.len();
        let decode = Decode {
            version: 3,
            index,
            entry_count: index + 1,
        };
        let line_no = self.next_line_number();
        let mut entry = Entry::decode(line, 0, &decode)
            .map_err(|p| TranscriptError::invalid(&self.source, line_no, p))?;
        entry.parent = self.leaf();
        entry.first_kept = entry.first_kept_entry_id().and_then(|k| self.index_of(k));
        self.by_id.insert(entry.id().to_string(), index);
        self.entries.push(entry);
        Ok(index)
    }

    fn id_members(&self) -> (String, String) {
        let parent = self
            .leaf()
            .map_or_else(|| "null".to_string(), |i| quote(self.entries[i].id()));
        (quote(&self.fresh_id()), parent)
    }

    /// Append a v3 message entry under the current leaf; returns its index. The message must be
    /// an object with a known `role`.
    pub fn append_message(
        &mut self,
        message: &Value,
        timestamp_iso: &str,
    ) -> Result<usize, TranscriptError> {
        let line_no = self.next_line_number();
        let bad = |p: &str| Err(TranscriptError::invalid(&self.source, line_no, p));
        let Value::Object(map) = message else {
            return bad("message must be a JSON object");
        };
        match map.get("role").and_then(Value::as_str) {
            Some("hookMessage") => {
                return bad("role \"hookMessage\" is written as \"custom\" in v3");
            }
            Some(r) if Role::parse(r).is_some() => {}
            Some(r) => return bad(&format!("unknown message role {r:?}")),
            None => return bad("message has no \"role\""),
        }
        let (id, parent) = self.id_members();
        let line = format!(
            "{{\"type\":\"message\",\"id\":{id},\"parentId\":{parent},\"timestamp\":{},\"message\":{message}}}",
            quote(timestamp_iso)
        );
        self.push_line(line)
    }

    /// Append a compaction entry. The first kept entry must be on the active branch and not
    /// before the previous compaction's first kept entry (a boundary never moves back).
    pub fn append_compaction(
        &mut self,
        c: &NewCompaction,
        timestamp_iso: &str,
    ) -> Result<usize, TranscriptError> {
        let line_no = self.next_line_number();
        let bad = |p: String| Err(TranscriptError::invalid(&self.source, line_no, p));
        let k = &c.first_kept_entry_id;
        let Some(idx) = self.index_of(k) else {
            return bad(format!(
                "firstKeptEntryId {k:?} is not an entry of this transcript"
            ));
        };
        let branch = self.active_branch();
        let Some(pos) = branch.iter().position(|&i| i == idx) else {
            return bad(format!(
                "firstKeptEntryId {k:?} is not on the active branch"
            ));
        };
        if let Some(p) = self.latest_compaction(&branch)
            && let Some(prev) = self.first_kept_position(&branch, p)
            && pos < prev
        {
            return bad(format!(
                "firstKeptEntryId {k:?} is before the previous compaction's first kept entry {:?}",
                self.entries[branch[prev]].id()
            ));
        }
        let (id, parent) = self.id_members();
        let details = c
            .details
            .as_ref()
            .map(|d| format!(",\"details\":{d}"))
            .unwrap_or_default();
        let line = format!(
            "{{\"type\":\"compaction\",\"id\":{id},\"parentId\":{parent},\"timestamp\":{},\"summary\":{},\"firstKeptEntryId\":{},\"tokensBefore\":{}{details}}}",
            quote(timestamp_iso),
            quote(&c.summary),
            quote(k),
            c.tokens_before
        );
        self.push_line(line)
    }

    /// The whole transcript as version 3 JSONL (v3 lines verbatim, migrated ones rewritten).
    pub fn to_v3_string(&self) -> String {
        let header = self.header.v3_line();
        let len = header.len()
            + 1
            + self
                .entries
                .iter()
                .map(|e| e.v3_line().len() + 1)
                .sum::<usize>();
        let mut out = String::with_capacity(len);
        out.push_str(&header);
        out.push('\n');
        for e in &self.entries {
            out.push_str(e.v3_line());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests;
