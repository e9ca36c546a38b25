//! Appends: each new entry is written as a v3 line, decoded once, linked into the tree and
//! the kept context, as loading would have read it.

use super::*;

impl Transcript {
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
        let entry = self.decode_appended(line)?;
        let prunes: Vec<usize> = (entry.compaction_record())
            .map(|m| {
                (m.pruned_entry_ids.iter())
                    .filter_map(|id| self.index_of(id))
                    .collect()
            })
            .unwrap_or_default();
        self.by_id.insert(entry.id().to_string(), index);
        let boundary = entry.entry_type() == "compaction";
        self.entries.push(entry);
        if boundary {
            self.set_context(self.walk_context());
            self.revision += 1;
        } else if self.is_message_context(index) {
            self.push_context(index);
        }
        if !prunes.is_empty() {
            self.mark_pruned(prunes);
        }
        Ok(index)
    }

    /// A new v3 line as the entry after the last, under the current leaf and counted as the
    /// others are; what decoding notes is a warning.
    fn decode_appended(&mut self, line: String) -> Result<Entry, TranscriptError> {
        let index = self.entries.len();
        let decode = Decode {
            version: 3,
            index,
            entry_count: index + 1,
        };
        let line_no = self.next_line_number();
        let mut entry = Entry::decode(Line::from(line), 0, &decode)
            .map_err(|p| TranscriptError::invalid(&self.source, line_no, p))?;
        if let Some(note) = entry.take_note() {
            push_warning(&mut self.warnings, &self.source, line_no, note);
        }
        self.place_appended(&mut entry);
        Ok(entry)
    }

    /// An appended entry under the current leaf, its first kept entry found, counted as the
    /// others are.
    fn place_appended(&self, entry: &mut Entry) {
        entry.parent = self.leaf();
        entry.first_kept = entry.first_kept_entry_id().and_then(|k| self.index_of(k));
        if let Some(counter) = &self.counter
            && let Some(tokens) = counter.count_entry(entry)
        {
            entry.set_tokens(tokens);
        }
    }

    /// An append refused: `problem`, at the line the entry would have taken.
    fn refused(&self, problem: String) -> TranscriptError {
        TranscriptError::invalid(&self.source, self.next_line_number(), problem)
    }

    /// Marks the tool results among `entries` that are on the active branch as pruned, and
    /// re-counts the context.
    fn mark_pruned(&mut self, entries: Vec<usize>) {
        let branch: std::collections::HashSet<usize> = self.active_branch().into_iter().collect();
        self.mark_tool_results_pruned(entries.into_iter().filter(|j| branch.contains(j)));
        self.recount_context();
    }

    /// Drops the entries from `len` on: appended here but never written (a failed write), so
    /// the transcript is again what the file holds. Everything an append changed is undone:
    /// ids, the context, and the tool results a dropped compaction pruned.
    pub fn truncate(&mut self, len: usize) {
        if len >= self.entries.len() {
            return;
        }
        let dropped_prunes = self.entries[len..].iter().any(|e| {
            e.compaction_record()
                .is_some_and(|m| !m.pruned_entry_ids.is_empty())
        });
        for e in &self.entries[len..] {
            self.by_id.remove(e.id());
        }
        self.entries.truncate(len);
        if dropped_prunes {
            for e in &mut self.entries {
                e.pruned = false;
            }
            self.apply_prunes();
        }
        self.set_context(self.walk_context());
        self.revision += 1;
    }

    fn id_members(&self) -> (String, String) {
        let parent = self
            .leaf()
            .map_or_else(|| "null".to_string(), |i| quote(self.entries[i].id()));
        (quote(&self.fresh_id()), parent)
    }

    /// Why `message` cannot be appended as an AgentMessage, if it cannot: callers appending
    /// several check them all first, so a bad one leaves the transcript unchanged.
    pub fn check_message(message: &Value) -> Result<(), String> {
        let Value::Object(map) = message else {
            return Err("message must be a JSON object".into());
        };
        match map.get("role").and_then(Value::as_str) {
            Some("hookMessage") => {
                Err("role \"hookMessage\" is written as \"custom\" in v3".into())
            }
            // Roles this crate does not know are kept verbatim and not sent to the model (see
            // `Role`): a runtime's own message kinds must survive, as they do in pi.
            Some("") => Err("message has an empty \"role\"".into()),
            Some(_) => Ok(()),
            None => Err("message has no \"role\"".into()),
        }
    }

    /// Append a v3 message entry under the current leaf; returns its index. The message must be
    /// an object with a known `role`.
    pub fn append_message(
        &mut self,
        message: &Value,
        timestamp_iso: &str,
    ) -> Result<usize, TranscriptError> {
        self.append_message_as(message, &message.to_string(), timestamp_iso)
    }

    /// Append a message given as JSON text, kept byte for byte in the file (a runtime's own
    /// fields and number spellings survive); checked as `append_message` checks a value.
    pub fn append_message_text(
        &mut self,
        message: &str,
        timestamp_iso: &str,
    ) -> Result<usize, TranscriptError> {
        // A runtime's own writer may leave half a surrogate pair: read as the file will be.
        let message = &*crate::lenient::str(message);
        let value: Value = serde_json::from_str(message)
            .map_err(|e| self.refused(format!("message is not JSON: {e}")))?;
        if message.contains(['\n', '\r']) {
            // A line break between tokens would split the entry's line: write it compactly.
            return self.append_message(&value, timestamp_iso);
        }
        self.append_message_as(&value, message, timestamp_iso)
    }

    /// `message` checked as a value, written as `text` (its JSON spelling).
    fn append_message_as(
        &mut self,
        message: &Value,
        text: &str,
        timestamp_iso: &str,
    ) -> Result<usize, TranscriptError> {
        Self::check_message(message).map_err(|p| self.refused(p))?;
        let (id, parent) = self.id_members();
        let line = format!(
            "{{\"type\":\"message\",\"id\":{id},\"parentId\":{parent},\"timestamp\":{},\"message\":{text}}}",
            quote(timestamp_iso)
        );
        self.push_line(line)
    }

    /// Append an entry of another type (`custom`, `label`, `session_info`, ...) given as an
    /// object with its own members; `type`, `id`, `parentId` and `timestamp` are set here.
    /// Messages and compactions have their own appends.
    pub fn append_other(
        &mut self,
        entry_type: &str,
        members: &Value,
        timestamp_iso: &str,
    ) -> Result<usize, TranscriptError> {
        if matches!(entry_type, "message" | "compaction" | "session" | "") {
            let problem = format!("entry type {entry_type:?} cannot be appended this way");
            return Err(self.refused(problem));
        }
        let Value::Object(map) = members else {
            return Err(self.refused("entry members must be a JSON object".into()));
        };
        let (id, parent) = self.id_members();
        let mut line = format!(
            "{{\"type\":{},\"id\":{id},\"parentId\":{parent},\"timestamp\":{}",
            quote(entry_type),
            quote(timestamp_iso)
        );
        end_with_members(&mut line, map);
        self.push_line(line)
    }

    /// Append a compaction entry. The first kept entry must be on the active branch and not
    /// before the previous compaction's first kept entry (a boundary never moves back).
    pub fn append_compaction(
        &mut self,
        c: &NewCompaction,
        timestamp_iso: &str,
    ) -> Result<usize, TranscriptError> {
        let k = &c.first_kept_entry_id;
        self.check_first_kept(k).map_err(|p| self.refused(p))?;
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

    /// Why entry `k` cannot be a new compaction's first kept entry, if it cannot: it must be
    /// on the active branch, not before the previous compaction's first kept entry.
    fn check_first_kept(&self, k: &str) -> Result<(), String> {
        let Some(idx) = self.index_of(k) else {
            return Err(format!(
                "firstKeptEntryId {k:?} is not an entry of this transcript"
            ));
        };
        let branch = self.active_branch();
        let Some(pos) = branch.iter().position(|&i| i == idx) else {
            return Err(format!(
                "firstKeptEntryId {k:?} is not on the active branch"
            ));
        };
        if let Some(p) = self.latest_compaction(&branch)
            && let Some(prev) = self.first_kept_position(&branch, p)
            && pos < prev
        {
            return Err(format!(
                "firstKeptEntryId {k:?} is before the previous compaction's first kept entry {:?}",
                self.entries[branch[prev]].id()
            ));
        }
        Ok(())
    }
}

/// The members of an entry of another type after its `type`, `id`, `parentId` and
/// `timestamp` (which are set by the append, not taken from `members`), and its closing brace.
fn end_with_members(line: &mut String, members: &serde_json::Map<String, Value>) {
    for (k, v) in members {
        if matches!(k.as_str(), "type" | "id" | "parentId" | "timestamp") {
            continue;
        }
        line.push_str(&format!(",{}:{v}", quote(k)));
    }
    line.push('}');
}
