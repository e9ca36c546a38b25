//! The index file: one SQLite database beside the transcript (`<file>.recall.sqlite`) with a
//! contentless FTS5 table over every entry's text, a row of facts per entry for the filters,
//! and what it was built from, so it can tell when it no longer matches its transcript.
//!
//! The transcript is the truth and the index is derived: [`RecallIndex::sync`] appends what
//! the transcript gained since, in one transaction, and rebuilds from scratch when the file is
//! from another session, shorter than what was indexed, rewritten under it, or unreadable. A
//! kill at any moment leaves either the old state or the new one; the next sync catches up.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use ctxhost_transcript::{Entry, Transcript};
use rusqlite::{Connection, ErrorCode, OptionalExtension, params};

use crate::error::RecallError;
use crate::listed::{Listed, Ranked, copy_key};
use crate::query::{SearchQuery, all_but_one_expression, match_expression};
use crate::text;

/// How much more a user request or a failed tool result weighs than other entries with the
/// same words: they are what an agent searches its past for most (bm25 is negative, better
/// is lower, so the weight multiplies it).
const ROLE_WEIGHT: &str = "(CASE WHEN f.role = 'user' THEN 2.0 \
     WHEN f.role = 'toolResult' AND f.is_error THEN 2.0 ELSE 1.0 END)";

/// Rows read per hit asked for, so that copies of a listed text can be passed over and the
/// hits still filled (a row is two integers; no entry is decoded to tell copies apart).
const COPIES_READ: u32 = 20;

/// Entries a round ranks at most: the newest this many holding its words. FTS5 walks the
/// words' lists from their end and stops there, so a search costs the same on a 1 GB session
/// as on a small one; words held by more entries than this are found among the newest first.
const RANKED_WINDOW: u32 = 2000;

/// Bump when the tables or what is indexed change: an index of another schema is rebuilt.
const SCHEMA: i64 = 3;

/// Where the index of the transcript at `transcript` lives.
pub fn index_path(transcript: &Path) -> PathBuf {
    let mut name = transcript.as_os_str().to_owned();
    name.push(".recall.sqlite");
    PathBuf::from(name)
}

/// What one [`RecallIndex::sync`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SyncReport {
    /// The index was built from the start (first use, or it no longer matched).
    pub rebuilt: bool,
    /// Entries read from the transcript by this sync.
    pub entries: usize,
}

/// One entry a search found.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hit {
    /// The entry's position in the transcript file (the contract's entry reference).
    pub entry: u32,
    /// Its id in the file.
    pub id: String,
    /// Its role (v3 spelling).
    pub role: String,
    /// For tool results (and tool calls), the tool's name.
    pub tool: Option<String>,
    /// A failed tool result.
    pub is_error: bool,
    /// Unix milliseconds, when the entry has a time.
    pub timestamp: Option<u64>,
    /// The text around the first match.
    pub snippet: String,
    /// Whether the entry is in the session's current context (false: only a summary, or
    /// nothing, stands for it now).
    pub in_context: bool,
}

/// Where an index file goes when the transcript's own directory cannot hold one (a shared or
/// read-only folder): `<home>/recall-cache/<blake3 of the transcript's canonical path>.sqlite`,
/// home being `$CTXHOST_HOME`, else `$HOME/.ctxhost` (as the host finds it). `None` when
/// neither variable is set.
pub fn cache_index_path(transcript: &Path) -> Option<PathBuf> {
    let home = std::env::var_os("CTXHOST_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".ctxhost"))
        })?;
    Some(cache_index_path_in(&home, transcript))
}

fn cache_index_path_in(home: &Path, transcript: &Path) -> PathBuf {
    // The file may not exist yet: canonicalize what does, so two spellings of one transcript
    // share one cache entry.
    let canonical = std::fs::canonicalize(transcript).unwrap_or_else(|_| {
        match (transcript.parent(), transcript.file_name()) {
            (Some(dir), Some(name)) => std::fs::canonicalize(dir)
                .map(|d| d.join(name))
                .unwrap_or_else(|_| transcript.to_path_buf()),
            _ => transcript.to_path_buf(),
        }
    });
    let key = blake3::hash(canonical.as_os_str().as_encoded_bytes());
    home.join("recall-cache")
        .join(format!("{}.sqlite", key.to_hex()))
}

/// A session's full-text index.
pub struct RecallIndex {
    /// The file, or for an in-memory index the file it would have been (for messages).
    path: PathBuf,
    in_memory: bool,
    /// Replaced in place when a search finds the file corrupt, so a search (`&self`) can
    /// rebuild the index from the transcript instead of failing.
    conn: RefCell<Connection>,
}

impl RecallIndex {
    /// Opens the index of the transcript at `transcript` (creating it when missing; replacing
    /// a file that is not a readable index). Nothing is indexed until [`RecallIndex::sync`].
    ///
    /// When the transcript's directory cannot hold the index (read-only, shared), it goes to
    /// the cache under the ctxhost home ([`cache_index_path`]), and failing that lives in
    /// memory for this process: a search never fails because of where the transcript is.
    pub fn open(transcript: &Path) -> Result<Self, RecallError> {
        Self::open_with_cache(transcript, cache_index_path(transcript).as_deref())
    }

    /// [`RecallIndex::open`] with the fallback file given (`None`: straight to memory).
    fn open_with_cache(transcript: &Path, cached: Option<&Path>) -> Result<Self, RecallError> {
        let beside = index_path(transcript);
        let beside_error = match Self::open_file(&beside) {
            Ok(index) => return Ok(index),
            Err(e) => e,
        };
        if let Some(cached) = cached {
            if let Some(dir) = cached.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            match Self::open_file(cached) {
                Ok(index) => {
                    tracing::warn!(
                        "{beside_error}; the recall index of {} is kept in {} instead",
                        transcript.display(),
                        cached.display()
                    );
                    return Ok(index);
                }
                Err(cache_error) => tracing::warn!("{cache_error}"),
            }
        }
        tracing::warn!(
            "{beside_error}; the recall index of {} is kept in memory for this process",
            transcript.display()
        );
        Self::open_memory(&beside)
    }

    /// An index held in memory only (rebuilt by every process that opens it); `path` names the
    /// file it stands in for.
    fn open_memory(path: &Path) -> Result<Self, RecallError> {
        let error = |source| RecallError::Index {
            path: path.to_path_buf(),
            source,
        };
        let conn = Connection::open_in_memory().map_err(error)?;
        prepare(&conn).map_err(error)?;
        Ok(Self {
            path: path.to_path_buf(),
            in_memory: true,
            conn: RefCell::new(conn),
        })
    }

    /// Whether the index lives in memory only (no file could be written).
    pub fn is_in_memory(&self) -> bool {
        self.in_memory
    }

    /// Opens the index file at `path` itself.
    pub fn open_file(path: &Path) -> Result<Self, RecallError> {
        match Self::try_open(path) {
            Ok(index) => Ok(index),
            Err(first) => {
                tracing::warn!(index = %path.display(), "{first}; rebuilding the recall index");
                remove_index_files(path);
                Self::try_open(path).map_err(|source| RecallError::Index {
                    path: path.to_path_buf(),
                    source,
                })
            }
        }
    }

    fn try_open(path: &Path) -> rusqlite::Result<Self> {
        let conn = Connection::open(path)?;
        // Derived data: a crash loses at most what the next sync re-reads, never the
        // transcript; the rollback journal keeps each sync all-or-nothing.
        conn.pragma_update(None, "synchronous", "OFF")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        // No integrity check here: it reads the whole file on every open (a 1 GB session's index
        // is hundreds of MB). Damaged pages are found by the sync or search that reads them,
        // which rebuild the index from the transcript and answer.
        prepare(&conn)?;
        Ok(Self {
            path: path.to_path_buf(),
            in_memory: false,
            conn: RefCell::new(conn),
        })
    }

    /// The index file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Brings the index level with `transcript`: appends the entries added since the last sync,
    /// or rebuilds when the index was built from something else. A corrupt file is replaced.
    pub fn sync(&mut self, transcript: &Transcript) -> Result<SyncReport, RecallError> {
        match self.try_sync(transcript) {
            Ok(report) => Ok(report),
            Err(first) => {
                tracing::warn!(index = %self.path.display(), "{first}; rebuilding the recall index");
                self.rebuild(transcript)
            }
        }
    }

    /// Replaces the index with an empty one and indexes all of `transcript` again.
    fn rebuild(&self, transcript: &Transcript) -> Result<SyncReport, RecallError> {
        let fresh = if self.in_memory {
            Self::open_memory(&self.path)?
        } else {
            remove_index_files(&self.path);
            Self::try_open(&self.path).map_err(|source| self.error(source))?
        };
        self.conn.replace(fresh.conn.into_inner());
        let mut report = self.try_sync(transcript).map_err(|s| self.error(s))?;
        report.rebuilt = true;
        Ok(report)
    }

    fn error(&self, source: rusqlite::Error) -> RecallError {
        RecallError::Index {
            path: self.path.clone(),
            source,
        }
    }

    fn try_sync(&self, transcript: &Transcript) -> rusqlite::Result<SyncReport> {
        let entries = transcript.entries();
        let built = self.built_from()?;
        let matches = built.as_ref().is_some_and(|b| b.matches(transcript));
        if matches && built.as_ref().is_some_and(|b| b.count == entries.len()) {
            return Ok(SyncReport::default());
        }
        let from = if matches {
            built.map_or(0, |b| b.count)
        } else {
            0
        };
        let mut conn = self.conn.borrow_mut();
        let tx = conn.transaction()?;
        if from == 0 {
            tx.execute_batch("DELETE FROM entries; DELETE FROM body;")?;
        }
        {
            let mut facts = tx.prepare_cached(
                "INSERT OR REPLACE INTO entries (seq, id, role, tool, is_error, ts, copy) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?;
            let mut body = tx.prepare_cached("INSERT INTO body (rowid, text) VALUES (?1, ?2)")?;
            for (seq, entry) in entries.iter().enumerate().skip(from) {
                let Some(view) = entry.view() else { continue };
                let tool = view
                    .tool_name
                    .clone()
                    .or_else(|| view.tool_calls.first().map(|c| c.name.clone()));
                let indexed = text::indexed(&view);
                facts.execute(params![
                    seq as i64,
                    entry.id(),
                    view.role.as_str(),
                    tool,
                    view.is_error,
                    entry.timestamp().map(|t| t as i64),
                    copy_key(&indexed),
                ])?;
                body.execute(params![seq as i64, indexed])?;
            }
        }
        let last = entries.len().checked_sub(1).map(|i| entries[i].id());
        let first = entries.first().map(Entry::id);
        for (key, value) in [
            ("session", Some(transcript.header().id())),
            ("first", first),
            ("last", last),
        ] {
            tx.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
                params![key, value.unwrap_or("")],
            )?;
        }
        tx.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('count', ?1)",
            params![entries.len() as i64],
        )?;
        tx.commit()?;
        Ok(SyncReport {
            rebuilt: from == 0,
            entries: entries.len() - from,
        })
    }

    fn built_from(&self) -> rusqlite::Result<Option<BuiltFrom>> {
        let conn = self.conn.borrow();
        let get = |key: &str| -> rusqlite::Result<Option<rusqlite::types::Value>> {
            conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
                .optional()
        };
        use rusqlite::types::Value as V;
        let (
            Some(V::Text(session)),
            Some(V::Integer(count)),
            Some(V::Text(first)),
            Some(V::Text(last)),
        ) = (get("session")?, get("count")?, get("first")?, get("last")?)
        else {
            return Ok(None);
        };
        Ok(Some(BuiltFrom {
            session,
            count: usize::try_from(count).unwrap_or(usize::MAX),
            first,
            last,
        }))
    }

    /// Ranked hits for `query` among the indexed entries of `transcript` (call
    /// [`RecallIndex::sync`] first so they are all indexed). Damage to the index found while
    /// searching rebuilds it from the transcript, then the search runs again.
    pub fn search(
        &self,
        transcript: &Transcript,
        query: &SearchQuery,
    ) -> Result<Vec<Hit>, RecallError> {
        match self.try_search(transcript, query) {
            Err(RecallError::Index { source, .. }) if is_corruption(&source) => {
                tracing::warn!(index = %self.path.display(), "{source}; rebuilding the recall index");
                self.rebuild(transcript)?;
                self.try_search(transcript, query)
            }
            other => other,
        }
    }

    fn try_search(
        &self,
        transcript: &Transcript,
        query: &SearchQuery,
    ) -> Result<Vec<Hit>, RecallError> {
        let terms = query.terms()?;
        let limit = query.limit()?;
        // Entries holding every word first; then those missing one word (a half-remembered
        // query often has one word wrong), then any word: each round only fills what the
        // stricter one left. Matching all first also keeps a search of common words fast:
        // ranking scores every match.
        let mut rounds = vec![match_expression(&terms, true)];
        if terms.len() > 2 {
            rounds.push(all_but_one_expression(&terms));
        }
        if terms.len() > 1 {
            rounds.push(match_expression(&terms, false));
        }
        let in_context = ContextPositions::of(transcript);
        let entries = transcript.entries();
        let mut listed = Listed::new(limit as usize, |seq| in_context.contains(seq));
        for expression in rounds {
            if listed.is_full() {
                break;
            }
            // More rows than the limit: copies of a listed text take no place of their own.
            let rows = (self.ranked(&expression, query, limit.saturating_mul(COPIES_READ)))
                .map_err(|e| self.error(e))?;
            for row in rows {
                listed.offer(row);
            }
        }
        let rows = (listed.rows.iter())
            .map(|ranked| self.facts(ranked.seq))
            .collect::<rusqlite::Result<Vec<Row>>>()
            .map_err(|e| self.error(e))?;
        Ok(rows
            .into_iter()
            .filter_map(|row| {
                let entry = entries.get(row.seq)?;
                // A stale row (the transcript changed since the sync) is left out, not shown.
                if entry.id() != row.id {
                    return None;
                }
                let view = entry.view()?;
                Some(Hit {
                    entry: row.seq as u32,
                    id: row.id,
                    role: row.role,
                    tool: row.tool,
                    is_error: row.is_error,
                    timestamp: entry.timestamp(),
                    snippet: text::snippet(&text::searchable(&view), &terms),
                    in_context: in_context.contains(row.seq),
                })
            })
            .collect())
    }

    /// The best-ranked matches of `expression` among the newest [`RANKED_WINDOW`] entries
    /// holding its words that pass the query's filters.
    fn ranked(
        &self,
        expression: &str,
        query: &SearchQuery,
        limit: u32,
    ) -> rusqlite::Result<Vec<Ranked>> {
        let conn = self.conn.borrow();
        let mut statement = conn.prepare_cached(&format!(
            "SELECT seq, copy FROM ( \
                 SELECT body.rowid AS seq, f.copy AS copy, bm25(body) * {ROLE_WEIGHT} AS score \
                 FROM body JOIN entries f ON f.seq = body.rowid \
                 WHERE body MATCH ?1 \
                   AND (?2 IS NULL OR f.role = ?2) \
                   AND (?3 IS NULL OR f.tool = ?3) \
                   AND (?4 IS NULL OR (f.role = 'toolResult' AND f.is_error = ?4)) \
                   AND (?5 IS NULL OR f.ts >= ?5) \
                   AND (?6 IS NULL OR f.ts < ?6) \
                 ORDER BY body.rowid DESC LIMIT {RANKED_WINDOW}) \
             ORDER BY score, seq DESC LIMIT ?7"
        ))?;
        let rows = statement.query_map(
            params![
                expression,
                query.role.map(|r| r.as_str()),
                query.tool,
                query.is_error,
                query.after_ms.map(|t| t as i64),
                query.before_ms.map(|t| t as i64),
                limit,
            ],
            |row| {
                Ok(Ranked {
                    seq: row.get::<_, i64>(0)? as usize,
                    copy: row.get(1)?,
                })
            },
        )?;
        rows.collect()
    }

    /// The facts kept of the entry at `seq`.
    fn facts(&self, seq: usize) -> rusqlite::Result<Row> {
        let conn = self.conn.borrow();
        let mut facts =
            conn.prepare_cached("SELECT id, role, tool, is_error FROM entries WHERE seq = ?1")?;
        facts.query_row([seq as i64], |row| {
            Ok(Row {
                seq,
                id: row.get(0)?,
                role: row.get(1)?,
                tool: row.get(2)?,
                is_error: row.get(3)?,
            })
        })
    }

    /// Bytes the index takes on disk.
    pub fn size_bytes(&self) -> u64 {
        if self.in_memory {
            return 0;
        }
        std::fs::metadata(&self.path).map_or(0, |m| m.len())
    }
}

struct Row {
    seq: usize,
    id: String,
    role: String,
    tool: Option<String>,
    is_error: bool,
}

/// What the index was built from: enough to tell an append (the same file, grown) from
/// anything else (another session, a rewrite, a shorter file).
struct BuiltFrom {
    session: String,
    count: usize,
    first: String,
    last: String,
}

impl BuiltFrom {
    fn matches(&self, transcript: &Transcript) -> bool {
        let entries = transcript.entries();
        if self.session != transcript.header().id() || self.count > entries.len() {
            return false;
        }
        match self.count.checked_sub(1) {
            None => true,
            Some(last) => entries[0].id() == self.first && entries[last].id() == self.last,
        }
    }
}

/// Which positions are in the current context. The context is its compaction entry (when
/// there is one) and then entries in file order, so it is searched in place, not copied and
/// sorted on every search (760k entries on a 1 GB session); a context in another order is
/// sorted once.
enum ContextPositions<'a> {
    InOrder(&'a [usize]),
    Sorted(Vec<usize>),
}

impl<'a> ContextPositions<'a> {
    fn of(transcript: &'a Transcript) -> Self {
        let context = transcript.context();
        if context.get(1..).is_none_or(|rest| rest.is_sorted()) {
            Self::InOrder(context)
        } else {
            let mut sorted = context.to_vec();
            sorted.sort_unstable();
            Self::Sorted(sorted)
        }
    }

    fn contains(&self, position: usize) -> bool {
        match self {
            Self::InOrder(context) => {
                context.first() == Some(&position)
                    || context
                        .get(1..)
                        .is_some_and(|rest| rest.binary_search(&position).is_ok())
            }
            Self::Sorted(sorted) => sorted.binary_search(&position).is_ok(),
        }
    }
}

/// Makes `conn` an index of this schema (a file of another is emptied), and proves it can be
/// written: a read-only file or a directory where the journal cannot be created fails here, at
/// open, where [`RecallIndex::open`] can still put the index elsewhere.
fn prepare(conn: &Connection) -> rusqlite::Result<()> {
    let schema: Option<i64> = conn
        .query_row("SELECT value FROM meta WHERE key = 'schema'", [], |row| {
            row.get(0)
        })
        .optional()
        .or_else(|e| match e {
            rusqlite::Error::SqliteFailure(_, Some(ref m)) if m.starts_with("no such table") => {
                Ok(None)
            }
            e => Err(e),
        })?;
    if schema == Some(SCHEMA) {
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema', ?1)",
            [SCHEMA],
        )?;
        Ok(())
    } else {
        create_tables(conn)
    }
}

/// Whether `error` means the index file is damaged (and so only rebuilding it helps).
fn is_corruption(error: &rusqlite::Error) -> bool {
    matches!(
        error,
        rusqlite::Error::SqliteFailure(e, _)
            if matches!(e.code, ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase)
    )
}

fn create_tables(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(&format!(
        "DROP TABLE IF EXISTS meta;
         DROP TABLE IF EXISTS entries;
         DROP TABLE IF EXISTS body;
         CREATE TABLE meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID;
         CREATE TABLE entries (
             seq INTEGER PRIMARY KEY, id TEXT NOT NULL, role TEXT NOT NULL, tool TEXT,
             is_error INTEGER NOT NULL, ts INTEGER, copy INTEGER NOT NULL);
         CREATE VIRTUAL TABLE body USING fts5(
             text, content='', tokenize='porter unicode61 remove_diacritics 2');
         INSERT INTO meta (key, value) VALUES ('schema', {SCHEMA});"
    ))
}

fn remove_index_files(path: &Path) {
    for suffix in ["", "-journal", "-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(name));
    }
}

#[cfg(test)]
mod tests;
