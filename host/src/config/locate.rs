//! Where each key of a JSON5 document is written: its dotted path and line, for messages and
//! `config show`. A scan of the text (strings, comments, nesting), not a second parser: the
//! document has already parsed when this runs.

use std::collections::HashMap;

/// One nesting level: an object (with the key its current value belongs to) or an array
/// (with the index of its current element).
enum Frame {
    Object { key: Option<String> },
    Array { index: usize },
}

/// The 1-based line of every object key, by dotted path (`agents.defaults.compaction.enabled`;
/// array elements by index). Keys written twice keep their last line, as the parser keeps the
/// last value.
pub fn key_lines(text: &str) -> HashMap<String, usize> {
    let mut lines = HashMap::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut last_word: Option<String> = None;
    let mut line = 1;
    let mut chars = text.chars().peekable();
    // Each frame contributes the key (or index) its current value sits under.
    let path_of = |stack: &[Frame]| {
        stack
            .iter()
            .filter_map(|frame| match frame {
                Frame::Object { key } => key.clone(),
                Frame::Array { index } => Some(index.to_string()),
            })
            .collect::<Vec<_>>()
            .join(".")
    };
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut star = false;
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                    }
                    if star && c == '/' {
                        break;
                    }
                    star = c == '*';
                }
            }
            '"' | '\'' => {
                let quote = c;
                let mut word = String::new();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some(escaped) = chars.next() {
                                if escaped == '\n' {
                                    line += 1;
                                }
                                word.push(escaped);
                            }
                        }
                        c if c == quote => break,
                        '\n' => {
                            line += 1;
                            word.push(c);
                        }
                        c => word.push(c),
                    }
                }
                last_word = Some(word);
            }
            '{' | '[' => {
                stack.push(if c == '{' {
                    Frame::Object { key: None }
                } else {
                    Frame::Array { index: 0 }
                });
                last_word = None;
            }
            '}' | ']' => {
                stack.pop();
                last_word = None;
            }
            ':' => {
                if let (Some(word), Some(Frame::Object { key })) =
                    (last_word.take(), stack.last_mut())
                {
                    *key = Some(word);
                    lines.insert(path_of(&stack), line);
                }
            }
            ',' => {
                match stack.last_mut() {
                    Some(Frame::Object { key }) => *key = None,
                    Some(Frame::Array { index }) => *index += 1,
                    None => {}
                }
                last_word = None;
            }
            c if c.is_whitespace() => {}
            c => {
                let mut word = String::from(c);
                while let Some(&next) = chars.peek() {
                    if next.is_whitespace() || "{}[]:,/\"'".contains(next) {
                        break;
                    }
                    word.push(next);
                    chars.next();
                }
                last_word = Some(word);
            }
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_get_their_lines_through_comments_strings_and_arrays() {
        let text = "{\n  // a comment: with a colon\n  agents: {\n    defaults: { contextWindow: 1000,\n      compaction: {\n        'enabled': false, /* x: y\n */ model: \"a:b\",\n        pruneProtectedTools: ['x', 'y'],\n        \"prune\": { enabled: true },\n      },\n    },\n  },\n  plugins: [ { id: 1 }, { id: 2 } ],\n}\n";
        let lines = key_lines(text);
        assert_eq!(lines["agents"], 3);
        assert_eq!(lines["agents.defaults"], 4);
        assert_eq!(lines["agents.defaults.contextWindow"], 4);
        assert_eq!(lines["agents.defaults.compaction.enabled"], 6);
        assert_eq!(lines["agents.defaults.compaction.model"], 7);
        assert_eq!(lines["agents.defaults.compaction.pruneProtectedTools"], 8);
        assert_eq!(lines["agents.defaults.compaction.prune.enabled"], 9);
        assert_eq!(lines["plugins.1.id"], 13);
        assert!(!lines.contains_key("a comment"));
    }
}
