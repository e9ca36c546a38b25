//! One line to show a text by: whitespace folded, and a long one cut where it carries least.

/// Whitespace (newlines included) folded to single spaces.
pub fn fold(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One line, at most `max` chars. A longer one is cut at word boundaries and marks what it
/// left out with `…`, after giving up first what carries nothing: a polite opening (`please`,
/// `can you`), then the words between its opening and the paths or identifiers further on
/// (`Rename the config field … docs/design.md…`). A reader recognises a request by its verb,
/// object and the names it mentions, not by a broken word.
pub fn clip(text: &str, max: usize) -> String {
    let flat = fold(text);
    if flat.chars().count() <= max {
        return flat;
    }
    let words = without_filler_opening(&flat);
    if words[0].chars().count() + 1 > max {
        return clip_word(words[0], max.saturating_sub(1));
    }
    // The opening (verb and object), then up to two names past it, then the opening grown
    // word by word while it fits: the line starts as the message does, so it can be found.
    let mut keep = vec![false; words.len()];
    keep[0] = true;
    if words.len() > 1 {
        keep[1] = true;
        if rendered(&words, &keep).chars().count() > max {
            keep[1] = false;
        }
    }
    let mut names = 0;
    for i in 2..words.len() {
        if names == 2 {
            break;
        }
        if carries_a_name(words[i]) {
            keep[i] = true;
            if rendered(&words, &keep).chars().count() > max {
                keep[i] = false;
            } else {
                names += 1;
            }
        }
    }
    for i in 1..words.len() {
        if keep[i] {
            continue;
        }
        keep[i] = true;
        if rendered(&words, &keep).chars().count() > max {
            keep[i] = false;
            break;
        }
    }
    rendered(&words, &keep)
}

/// The kept words, ` … ` where words between them were left out and `…` after the last when
/// words follow it.
fn rendered(words: &[&str], keep: &[bool]) -> String {
    let mut out = String::new();
    let mut last = None;
    for (i, word) in words.iter().enumerate().filter(|(i, _)| keep[*i]) {
        match last {
            None => {}
            Some(previous) if previous + 1 == i => out.push(' '),
            Some(_) => {
                out.truncate(out.trim_end_matches([',', ';', ':']).len());
                out.push_str(" … ");
            }
        }
        out.push_str(word);
        last = Some(i);
    }
    if last.is_some_and(|l| l + 1 < words.len()) {
        out.truncate(out.trim_end_matches([',', ';', ':']).len());
        out.push('…');
    }
    out
}

/// Openings that only ask politely; a clipped line drops them before any word that asks.
const FILLER_OPENINGS: &[&[&str]] = &[
    &["can", "you", "please"],
    &["could", "you", "please"],
    &["would", "you", "please"],
    &["i", "need", "you", "to"],
    &["i", "want", "you", "to"],
    &["i'd", "like", "you", "to"],
    &["can", "you"],
    &["could", "you"],
    &["would", "you"],
    &["please"],
    &["ok,"],
    &["okay,"],
    &["so,"],
    &["hey,"],
];

fn without_filler_opening(flat: &str) -> Vec<&str> {
    let words: Vec<&str> = flat.split(' ').collect();
    for opening in FILLER_OPENINGS {
        let matches = opening.len() < words.len()
            && (words.iter().zip(opening.iter())).all(|(w, o)| w.eq_ignore_ascii_case(o));
        if matches {
            return words[opening.len()..].to_vec();
        }
    }
    words
}

/// A path, file name or identifier: what names the thing a request is about.
fn carries_a_name(word: &str) -> bool {
    let w = word.trim_matches(|c: char| !c.is_alphanumeric() && c != '/' && c != '_');
    let inner = |c: char| {
        w.chars()
            .collect::<Vec<_>>()
            .windows(3)
            .any(|t| t[0].is_alphanumeric() && t[1] == c && t[2].is_alphanumeric())
    };
    let camel = w
        .chars()
        .collect::<Vec<_>>()
        .windows(2)
        .any(|p| p[0].is_lowercase() && p[1].is_uppercase());
    word.starts_with('`')
        || w.contains('/')
        || w.contains("::")
        || inner('.')
        || inner('_')
        || camel
}

/// A single word longer than the room: a path keeps its end (the file name), anything else is
/// cut after its last separator that fits, so the line still ends where a part of it ends.
fn clip_word(word: &str, room: usize) -> String {
    let chars: Vec<char> = word.chars().collect();
    if word.contains('/') {
        let tail: String = chars[chars.len().saturating_sub(room)..].iter().collect();
        let from_separator = tail.find('/').map_or(tail.as_str(), |i| &tail[i..]);
        return format!("…{from_separator}");
    }
    let head = &chars[..room.min(chars.len())];
    let cut = (head.iter())
        .rposition(|c| !c.is_alphanumeric())
        .filter(|&i| i > 0)
        .unwrap_or(head.len());
    let mut out: String = head[..cut].iter().collect();
    out.push('…');
    out
}
