//! Bounds on the strings a guest hands the host that the host keeps or prints: an engine can
//! return megabytes, or terminal escape sequences, in a field meant for one line.

/// Longest engine id, name and version the host keeps (longer ones are cut).
pub(super) const MAX_INFO_ID: usize = 128;
pub(super) const MAX_INFO_NAME: usize = 256;
pub(super) const MAX_INFO_VERSION: usize = 64;
/// An engine's error message or reason is for a log line, not a payload.
pub(super) const MAX_MESSAGE: usize = 4096;
/// A tool's answer goes to the model and stays in its history: bounded well below a call's
/// byte limit.
pub(super) const MAX_TOOL_OUTPUT: usize = 32 << 10;

/// One line of at most `max` bytes (plus a note of what was cut), with control characters
/// (newlines, escapes) shown as `\u{fffd}` so it cannot forge output lines or drive a terminal.
pub(super) fn line(text: &str, max: usize) -> String {
    clean(text, max, |c| c.is_control())
}

/// Like [`line`], but newlines and tabs stay.
pub(super) fn message(text: &str, max: usize) -> String {
    clean(text, max, |c| c.is_control() && c != '\n' && c != '\t')
}

fn clean(text: &str, max: usize, replace: impl Fn(char) -> bool) -> String {
    let mut cut = text.len().min(max);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut out: String = text[..cut]
        .chars()
        .map(|c| if replace(c) { '\u{fffd}' } else { c })
        .collect();
    if cut < text.len() {
        out.push_str(&format!("… ({} more bytes)", text.len() - cut));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut_on_a_char_boundary_and_says_so() {
        assert_eq!(line("short", 10), "short");
        let cut = line(&"é".repeat(10), 5);
        assert_eq!(cut, "éé… (16 more bytes)");
        assert!(line(&"x".repeat(64 << 20), MAX_INFO_NAME).len() < MAX_INFO_NAME + 32);
    }

    #[test]
    fn control_characters_cannot_reach_a_terminal() {
        assert_eq!(line("a\x1b[31mred\nb", 100), "a\u{fffd}[31mred\u{fffd}b");
        assert_eq!(message("a\nb\x07", 100), "a\nb\u{fffd}");
    }
}
