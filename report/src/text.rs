//! How numbers and strings are written: escaping for HTML and for JSON inside a `<script>`, and
//! the number formats the page and the terminal share.

/// Escapes text for HTML content and for attribute values in double or single quotes.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A JSON string literal that is also safe inside an HTML `<script>` element: besides JSON's own
/// escapes, `<`, `>` and `&` become `\u` escapes, so no text can close the element.
pub(crate) fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 || matches!(c, '<' | '>' | '&' | '\u{2028}' | '\u{2029}') => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A whole number with thousands separators: 1234567 → "1,234,567" (the host's CLI prints
/// its figures with it too, so the page and the terminal write numbers alike).
pub fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A share (0 to 1) as a percentage with one decimal: 0.9987 → "99.9%".
pub(crate) fn percent(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

/// A duration given in microseconds, in the unit that keeps it readable.
pub(crate) fn duration(micros: f64) -> String {
    let ms = micros / 1000.0;
    if ms < 10.0 {
        format!("{ms:.2} ms")
    } else if ms < 1000.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{:.2} s", ms / 1000.0)
    }
}

/// An axis tick: short, with k and M for thousands and millions ("32k", "1.5M", "0.25").
pub(crate) fn tick(value: f64) -> String {
    let (scaled, suffix) = match value.abs() {
        v if v >= 1e6 => (value / 1e6, "M"),
        v if v >= 1e3 => (value / 1e3, "k"),
        _ => (value, ""),
    };
    let mut text = format!("{scaled:.2}");
    // Trailing zeros say nothing on an axis.
    while text.ends_with('0') {
        text.pop();
    }
    if text.ends_with('.') {
        text.pop();
    }
    if text == "-0" {
        text = "0".into();
    }
    text + suffix
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_covers_markup_and_both_quotes() {
        assert_eq!(
            escape(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(escape("plain ünïcode"), "plain ünïcode");
    }

    #[test]
    fn json_strings_cannot_close_a_script() {
        assert_eq!(
            json_string("a\"b\\c\n</script>&"),
            r#""a\"b\\c\n\u003c/script\u003e\u0026""#
        );
        assert_eq!(json_string("\u{1}"), r#""\u0001""#);
    }

    #[test]
    fn numbers() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(percent(0.9987), "99.9%");
        assert_eq!(duration(420.0), "0.42 ms");
        assert_eq!(duration(42_000.0), "42.0 ms");
        assert_eq!(duration(4_200_000.0), "4.20 s");
        assert_eq!(tick(0.0), "0");
        assert_eq!(tick(0.25), "0.25");
        assert_eq!(tick(32_000.0), "32k");
        assert_eq!(tick(12_500.0), "12.5k");
        assert_eq!(tick(1_500_000.0), "1.5M");
    }
}
