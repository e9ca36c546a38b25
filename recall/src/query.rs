//! What a search asks, checked, and the FTS5 expression it becomes.

use ctxhost_transcript::Role;

use crate::error::RecallError;

/// Longest query accepted, in characters (a model pasting a whole file is told so).
pub(crate) const MAX_QUERY_CHARS: usize = 1_000;
/// Words of a query that are searched for; the rest are ignored (and said to be).
pub(crate) const MAX_QUERY_WORDS: usize = 32;
/// Hits a search returns when it does not say, and at most.
pub(crate) const DEFAULT_LIMIT: u32 = 10;
pub(crate) const MAX_LIMIT: u32 = 50;

/// One search: words, ranked by how many of them (and how rare) an entry holds, and filters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchQuery {
    /// The words to find.
    pub query: String,
    /// Only entries of this role.
    pub role: Option<Role>,
    /// Only tool results of this tool (and assistant messages calling it).
    pub tool: Option<String>,
    /// Only failed (true) or successful (false) tool results.
    pub is_error: Option<bool>,
    /// Only entries at or after this time (Unix milliseconds).
    pub after_ms: Option<u64>,
    /// Only entries before this time (Unix milliseconds).
    pub before_ms: Option<u64>,
    /// Hits to return (1..=50; `None` is 10).
    pub limit: Option<u32>,
}

impl SearchQuery {
    /// A query for `words` with no filter.
    pub fn words(words: impl Into<String>) -> Self {
        Self {
            query: words.into(),
            ..Self::default()
        }
    }

    pub(crate) fn limit(&self) -> Result<u32, RecallError> {
        match self.limit {
            None => Ok(DEFAULT_LIMIT),
            Some(n @ 1..=MAX_LIMIT) => Ok(n),
            Some(n) => Err(RecallError::invalid(format!(
                "limit is {n}; it must be between 1 and {MAX_LIMIT}"
            ))),
        }
    }

    /// The query's words, lower-cased, in order, each once.
    pub(crate) fn terms(&self) -> Result<Vec<String>, RecallError> {
        let chars = self.query.chars().count();
        if chars > MAX_QUERY_CHARS {
            return Err(RecallError::invalid(format!(
                "query is {chars} characters; at most {MAX_QUERY_CHARS} (search for a few \
                 distinctive words, not a whole text)"
            )));
        }
        let mut terms: Vec<String> = Vec::new();
        for word in words(&self.query) {
            let word = word.to_lowercase();
            if !terms.contains(&word) {
                terms.push(word);
            }
        }
        if terms.is_empty() {
            return Err(RecallError::invalid(
                "query has no words to search for (letters or digits)",
            ));
        }
        terms.truncate(MAX_QUERY_WORDS);
        Ok(terms)
    }
}

/// The words of a text as the index's tokenizer sees them: runs of letters and digits.
pub(crate) fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
}

/// The FTS5 expression for `terms`: all of them (`AND`) or any (`OR`), each quoted so no word
/// is read as an operator (`AND`, `NEAR`, a column filter).
pub(crate) fn match_expression(terms: &[String], all: bool) -> String {
    terms
        .iter()
        .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(if all { " AND " } else { " OR " })
}

/// The FTS5 expression for entries holding all of `terms` but (at most) one: each way of
/// leaving one out, `OR`ed.
pub(crate) fn all_but_one_expression(terms: &[String]) -> String {
    (0..terms.len())
        .map(|left_out| {
            let rest: Vec<String> = terms
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != left_out)
                .map(|(_, t)| t.clone())
                .collect();
            format!("({})", match_expression(&rest, true))
        })
        .collect::<Vec<_>>()
        .join(" OR ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_but_one_leaves_out_each_word_in_turn() {
        let terms: Vec<String> = ["a", "b", "c"].map(String::from).into();
        assert_eq!(
            all_but_one_expression(&terms),
            "(\"b\" AND \"c\") OR (\"a\" AND \"c\") OR (\"a\" AND \"b\")"
        );
    }

    #[test]
    fn terms_are_words_once_each_lowercased() {
        let q = SearchQuery::words("Fix the TypeError in src/core/agent-session.ts, the fix");
        assert_eq!(
            q.terms().unwrap(),
            [
                "fix",
                "the",
                "typeerror",
                "in",
                "src",
                "core",
                "agent",
                "session",
                "ts"
            ]
        );
    }

    #[test]
    fn operators_and_quotes_are_only_words() {
        let q = SearchQuery::words("NEAR(a b) AND \"x\" OR col:y*");
        let expr = match_expression(&q.terms().unwrap(), false);
        assert_eq!(
            expr,
            "\"near\" OR \"a\" OR \"b\" OR \"and\" OR \"x\" OR \"or\" OR \"col\" OR \"y\""
        );
        let all = match_expression(&["a".into(), "b".into()], true);
        assert_eq!(all, "\"a\" AND \"b\"");
    }

    #[test]
    fn empty_and_huge_queries_say_why() {
        let err = SearchQuery::words(" ,;- ").terms().unwrap_err().to_string();
        assert!(err.contains("no words"), "{err}");
        let err = SearchQuery::words("a".repeat(1_001))
            .terms()
            .unwrap_err()
            .to_string();
        assert!(err.contains("1001 characters"), "{err}");
    }

    #[test]
    fn limits_are_bounded() {
        let mut q = SearchQuery::words("x");
        assert_eq!(q.limit().unwrap(), DEFAULT_LIMIT);
        q.limit = Some(0);
        assert!(
            q.limit()
                .unwrap_err()
                .to_string()
                .contains("between 1 and 50")
        );
        q.limit = Some(50);
        assert_eq!(q.limit().unwrap(), 50);
    }
}
