//! Token estimation by the agent-runtime convention: chars/4 rounded up, an image = 4,800 chars.
//! Chars are Unicode scalar values (pi counts UTF-16 units; the difference is noise for an
//! estimate and scalars are what Rust counts cheaply).

use crate::message::summarize;

/// What one image block counts as, in characters.
pub const IMAGE_CHARS: usize = 4800;

pub(crate) fn chars_to_tokens(chars: usize) -> u32 {
    u32::try_from(chars.div_ceil(4)).unwrap_or(u32::MAX)
}

/// chars/4, rounded up.
pub fn estimate_text(text: &str) -> u32 {
    chars_to_tokens(text.chars().count())
}

/// Estimate an AgentMessage (text, thinking, tool-call name + arguments JSON, images,
/// bashExecution command + output, summaries). Unknown roles count 0; a message whose content
/// cannot be decoded counts as its whole JSON text, which over- rather than under-estimates.
pub fn estimate_message(message: &serde_json::Value) -> u32 {
    let json = message.to_string();
    match summarize(&json) {
        Ok(s) => s.tokens,
        Err(_) => estimate_text(&json),
    }
}

/// Length of a JSON text as `JSON.stringify` would write it (insignificant whitespace dropped),
/// without building a value: tool-call arguments are counted this way.
pub(crate) fn compact_json_chars(raw: &str) -> usize {
    let (mut n, mut in_string, mut escaped) = (0, false, false);
    for c in raw.chars() {
        if in_string {
            n += 1;
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if !matches!(c, ' ' | '\t' | '\n' | '\r') {
            n += 1;
            in_string = c == '"';
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_rounds_up_and_counts_scalars() {
        assert_eq!(estimate_text(""), 0);
        assert_eq!(estimate_text("abcd"), 1);
        assert_eq!(estimate_text("abcde"), 2);
        assert_eq!(estimate_text("ééé"), 1); // 3 scalars, 6 bytes
    }

    #[test]
    fn messages_by_role() {
        assert_eq!(
            estimate_message(&json!({"role":"user","content":"12345678"})),
            2
        );
        let user_img = json!({"role":"user","content":[
            {"type":"text","text":"1234"},{"type":"image","data":"AAAA","mimeType":"image/png"}]});
        assert_eq!(estimate_message(&user_img), (4 + 4800) / 4);
        let assistant = json!({"role":"assistant","content":[
            {"type":"thinking","thinking":"abcd"},
            {"type":"toolCall","id":"1","name":"bash","arguments":{"command":"ls"}}]});
        // 4 + "bash"(4) + {"command":"ls"}(16) = 24
        assert_eq!(estimate_message(&assistant), 6);
        let bash = json!({"role":"bashExecution","command":"ls","output":"abcdef"});
        assert_eq!(estimate_message(&bash), 2);
        let summary = json!({"role":"compactionSummary","summary":"x".repeat(40),"tokensBefore":1});
        assert_eq!(estimate_message(&summary), 10);
        assert_eq!(
            estimate_message(&json!({"role":"mystery","content":"long text"})),
            0
        );
        // undecodable content: counted as its JSON text
        let bad = json!({"role":"user","content":12});
        assert_eq!(estimate_message(&bad), estimate_text(&bad.to_string()));
    }

    #[test]
    fn compact_length_ignores_whitespace_outside_strings() {
        assert_eq!(
            compact_json_chars(r#"{ "a" : "b c" }"#),
            compact_json_chars(r#"{"a":"b c"}"#)
        );
        assert_eq!(compact_json_chars(r#"{"a":"\" x"}"#), 12);
    }
}
