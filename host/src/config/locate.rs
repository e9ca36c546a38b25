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
    let mut text = Text {
        chars: text.chars().peekable(),
        line: 1,
    };
    let mut keys = Keys::default();
    while let Some(c) = text.chars.next() {
        match c {
            '\n' => text.line += 1,
            '/' if text.chars.peek() == Some(&'/') => text.skip_line_comment(),
            '/' if text.chars.peek() == Some(&'*') => text.skip_block_comment(),
            '"' | '\'' => keys.last_word = Some(text.quoted(c)),
            '{' => keys.open(Frame::Object { key: None }),
            '[' => keys.open(Frame::Array { index: 0 }),
            '}' | ']' => keys.close(),
            ':' => keys.key_ends(text.line),
            ',' => keys.value_ends(),
            c if c.is_whitespace() => {}
            c => keys.last_word = Some(text.bare_word(c)),
        }
    }
    keys.lines
}

/// The document's characters, read once, with the line the reader is on.
struct Text<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    line: usize,
}

impl Text<'_> {
    /// Past a `//` comment and the line it ends.
    fn skip_line_comment(&mut self) {
        for c in self.chars.by_ref() {
            if c == '\n' {
                self.line += 1;
                break;
            }
        }
    }

    /// Past a `/* */` comment, counting the lines it spans.
    fn skip_block_comment(&mut self) {
        self.chars.next();
        let mut star = false;
        for c in self.chars.by_ref() {
            if c == '\n' {
                self.line += 1;
            }
            if star && c == '/' {
                break;
            }
            star = c == '*';
        }
    }

    /// A string's text up to its closing `quote`, escapes resolved to the escaped character.
    fn quoted(&mut self, quote: char) -> String {
        let mut word = String::new();
        while let Some(c) = self.chars.next() {
            let c = match c {
                '\\' => match self.chars.next() {
                    Some(escaped) => escaped,
                    None => break,
                },
                c if c == quote => break,
                c => c,
            };
            if c == '\n' {
                self.line += 1;
            }
            word.push(c);
        }
        word
    }

    /// An unquoted word (a key or a literal) starting with `first`.
    fn bare_word(&mut self, first: char) -> String {
        let mut word = String::from(first);
        while let Some(next) = self
            .chars
            .next_if(|&next| !next.is_whitespace() && !"{}[]:,/\"'".contains(next))
        {
            word.push(next);
        }
        word
    }
}

/// The keys found so far, and where the scan is in the document's nesting.
#[derive(Default)]
struct Keys {
    lines: HashMap<String, usize>,
    stack: Vec<Frame>,
    /// The last string or word read: the key, when a `:` follows.
    last_word: Option<String>,
}

impl Keys {
    fn open(&mut self, frame: Frame) {
        self.stack.push(frame);
        self.last_word = None;
    }

    fn close(&mut self) {
        self.stack.pop();
        self.last_word = None;
    }

    /// A `:` on `line`: the last word read is the current object's key.
    fn key_ends(&mut self, line: usize) {
        if let (Some(word), Some(Frame::Object { key })) =
            (self.last_word.take(), self.stack.last_mut())
        {
            *key = Some(word);
            self.lines.insert(self.path(), line);
        }
    }

    /// A `,`: the next member or element begins.
    fn value_ends(&mut self) {
        match self.stack.last_mut() {
            Some(Frame::Object { key }) => *key = None,
            Some(Frame::Array { index }) => *index += 1,
            None => {}
        }
        self.last_word = None;
    }

    /// The dotted path of the current value: each frame's key, or index.
    fn path(&self) -> String {
        (self.stack.iter())
            .filter_map(|frame| match frame {
                Frame::Object { key } => key.clone(),
                Frame::Array { index } => Some(index.to_string()),
            })
            .collect::<Vec<_>>()
            .join(".")
    }
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
