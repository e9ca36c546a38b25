//! The conversation's thread, without a model: which user messages matter is read from the
//! *shape* of the conversation, never from its words, so it works in any language.
//!
//! - summary: the first user message (100 chars) + " ... " + the last one (100 chars);
//! - key exchanges: the first user message, every user message that follows a long agent
//!   response (> 500 chars: the user is answering something substantial), and the last two
//!   user–agent pairs; at most 8, each gist the first 120 chars.

use serde::{Deserialize, Serialize};

use crate::checkpoint::{Exchange, ExchangeRole, Thread};

/// Characters of a message kept for the summary and the topic.
pub const SUMMARY_CHARS: usize = 100;
/// Characters of a message kept as an exchange's gist.
pub const GIST_CHARS: usize = 120;
/// An agent response longer than this makes the user's next message a key exchange.
pub const LONG_RESPONSE_CHARS: usize = 500;
/// At most this many key exchanges.
pub const MAX_EXCHANGES: usize = 8;
/// The last this many user–agent pairs are always key exchanges.
const RECENT_PAIRS: usize = 2;

/// The first `max` characters of `text`, whitespace runs folded into one space, with `…` when
/// something was cut. Gists are single-line so a restore stays compact and predictable.
pub fn gist(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut words = text.split_whitespace();
    let mut count = 0;
    let mut truncated = false;
    'words: for (i, word) in words.by_ref().enumerate() {
        for c in (i > 0).then_some(' ').into_iter().chain(word.chars()) {
            if count == max {
                truncated = true;
                break 'words;
            }
            out.push(c);
            count += 1;
        }
    }
    if truncated {
        out.truncate(out.trim_end().len());
        out.push('…');
    }
    out
}

/// One user message and the agent's answer to it (the last text the agent wrote in that turn).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pair {
    /// The user message's position among the session's user messages (0-based).
    pub seq: u32,
    pub user: String,
    pub agent: Option<String>,
}

/// What thread extraction remembers between messages (persisted as `thread.json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadState {
    /// User messages seen.
    pub user_messages: u32,
    /// The first user message's gist (120 chars) and summary part (100 chars).
    pub first: Option<Pair>,
    pub first_summary: String,
    /// The last user message's first 100 characters: the summary's end and the working topic.
    pub last_summary: String,
    /// User messages that followed a long agent response, newest last (at most 8 kept).
    pub follow_ups: Vec<Pair>,
    /// The newest pairs, newest last; the last one is the turn in progress.
    pub recent: Vec<Pair>,
    /// Characters the agent has written since the last user message.
    pub agent_chars: usize,
}

impl ThreadState {
    /// A user message arrived. Returns whether it follows a long agent response.
    pub fn user(&mut self, text: &str) -> bool {
        let follows_long_response =
            self.user_messages > 0 && self.agent_chars > LONG_RESPONSE_CHARS;
        let pair = Pair {
            seq: self.user_messages,
            user: gist(text, GIST_CHARS),
            agent: None,
        };
        if self.first.is_none() {
            self.first = Some(pair.clone());
            self.first_summary = gist(text, SUMMARY_CHARS);
        }
        if follows_long_response {
            self.follow_ups.push(pair.clone());
            trim_front(&mut self.follow_ups, MAX_EXCHANGES);
        }
        self.recent.push(pair);
        trim_front(&mut self.recent, RECENT_PAIRS);
        self.last_summary = gist(text, SUMMARY_CHARS);
        self.user_messages += 1;
        self.agent_chars = 0;
        follows_long_response
    }

    /// The agent wrote `text` (one assistant message; tool calls alone write nothing).
    pub fn agent(&mut self, text: &str) {
        let chars = text.chars().count();
        if chars == 0 {
            return;
        }
        self.agent_chars += chars;
        if let Some(pair) = self.recent.last_mut() {
            pair.agent = Some(gist(text, GIST_CHARS));
        }
    }

    /// The thread as the checkpoint records it.
    pub fn to_thread(&self) -> Thread {
        let summary = match (self.user_messages, &self.first) {
            (0, _) | (_, None) => String::new(),
            (1, _) => self.first_summary.clone(),
            _ => format!("{} ... {}", self.first_summary, self.last_summary),
        };
        Thread {
            summary,
            key_exchanges: self.key_exchanges(),
        }
    }

    /// First message, follow-ups, recent pairs: in conversation order, each user message once,
    /// at most [`MAX_EXCHANGES`] (the oldest follow-ups give way first).
    fn key_exchanges(&self) -> Vec<Exchange> {
        let recent_seqs: Vec<u32> = self.recent.iter().map(|p| p.seq).collect();
        let first_seq = self.first.as_ref().map(|p| p.seq);
        let recent_len: usize = self
            .recent
            .iter()
            .map(|p| 1 + usize::from(p.agent.is_some()))
            .sum();
        let first_len = usize::from(first_seq.is_some_and(|s| !recent_seqs.contains(&s)));
        let room = MAX_EXCHANGES.saturating_sub(recent_len + first_len);
        let follow_ups: Vec<&Pair> = self
            .follow_ups
            .iter()
            .filter(|p| Some(p.seq) != first_seq && !recent_seqs.contains(&p.seq))
            .collect();
        let skip = follow_ups.len().saturating_sub(room);

        let user = |p: &Pair| Exchange {
            role: ExchangeRole::User,
            gist: p.user.clone(),
        };
        let mut exchanges = Vec::with_capacity(MAX_EXCHANGES);
        if let Some(first) = self.first.as_ref().filter(|_| first_len == 1) {
            exchanges.push(user(first));
        }
        exchanges.extend(follow_ups[skip..].iter().map(|p| user(p)));
        for pair in &self.recent {
            exchanges.push(user(pair));
            if let Some(agent) = &pair.agent {
                exchanges.push(Exchange {
                    role: ExchangeRole::Agent,
                    gist: agent.clone(),
                });
            }
        }
        exchanges.truncate(MAX_EXCHANGES);
        exchanges
    }
}

/// Drops the oldest items so at most `max` remain.
fn trim_front<T>(items: &mut Vec<T>, max: usize) {
    let excess = items.len().saturating_sub(max);
    items.drain(..excess);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gists(thread: &Thread) -> Vec<(ExchangeRole, &str)> {
        thread
            .key_exchanges
            .iter()
            .map(|e| (e.role, e.gist.as_str()))
            .collect()
    }

    #[test]
    fn gists_fold_whitespace_and_cut_on_characters() {
        assert_eq!(gist("  a\n\n b\tc  ", 10), "a b c");
        assert_eq!(gist("abcdef", 3), "abc…");
        assert_eq!(gist("ab cdef", 3), "ab…");
        assert_eq!(gist("日本語のテキスト", 3), "日本語…");
        assert_eq!(gist("", 3), "");
        assert_eq!(gist("abc", 3), "abc");
    }

    #[test]
    fn summary_is_first_and_last_user_message() {
        let mut state = ThreadState::default();
        assert_eq!(state.to_thread().summary, "");
        state.user(&"x".repeat(150));
        assert_eq!(state.to_thread().summary, format!("{}…", "x".repeat(100)));
        state.agent("ok");
        state.user("second\nmessage");
        assert_eq!(
            state.to_thread().summary,
            format!("{}… ... second message", "x".repeat(100))
        );
    }

    #[test]
    fn key_exchanges_are_first_follow_ups_and_last_two_pairs() {
        use ExchangeRole::{Agent, User};
        let long = "L".repeat(501);
        let mut state = ThreadState::default();
        assert!(!state.user("task"));
        state.agent("short");
        assert!(!state.user("m1"));
        state.agent(&long);
        assert!(state.user("after long 1"));
        state.agent("short");
        state.agent(&"y".repeat(300));
        state.agent(&"z".repeat(300)); // 600 chars over two messages: a long response
        assert!(state.user("after long 2"));
        state.agent("fine");
        assert!(!state.user("m4"));
        state.agent("answer 4");
        assert!(!state.user("m5"));

        let thread = state.to_thread();
        assert_eq!(
            gists(&thread),
            [
                (User, "task"),
                (User, "after long 1"),
                (User, "after long 2"),
                (User, "m4"),
                (Agent, "answer 4"),
                (User, "m5"),
            ]
        );
    }

    #[test]
    fn at_most_eight_exchanges_oldest_follow_ups_give_way() {
        let long = "L".repeat(600);
        let mut state = ThreadState::default();
        state.user("task");
        for i in 0..12 {
            state.agent(&long);
            state.user(&format!("follow-up {i}"));
        }
        state.agent("last answer");
        let thread = state.to_thread();
        assert_eq!(thread.key_exchanges.len(), MAX_EXCHANGES);
        let gists: Vec<&str> = thread
            .key_exchanges
            .iter()
            .map(|e| e.gist.as_str())
            .collect();
        assert_eq!(gists[0], "task");
        assert_eq!(
            &gists[gists.len() - 4..],
            [
                "follow-up 10",
                &gist(&long, GIST_CHARS),
                "follow-up 11",
                "last answer"
            ]
        );
        assert_eq!(gists[1], "follow-up 7");
        assert!(
            thread
                .key_exchanges
                .iter()
                .all(|e| e.gist.chars().count() <= GIST_CHARS + 1)
        );
    }
}
