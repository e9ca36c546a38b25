//! The clock as the host writes it: RFC 3339 UTC for transcript entries, bundles, the system
//! prompt and the names of files set aside. The formats are the transcript crate's
//! (`transcript::time`), so what the host writes is what every reader reads back.

use std::time::{SystemTime, UNIX_EPOCH};

use ctxhost_transcript::time::{format_iso_ms, format_iso_seconds};

/// Now with milliseconds (`2025-01-01T00:00:00.000Z`), as transcripts write it.
pub fn now_iso() -> String {
    format_iso_ms(now_unix_ms())
}

/// Now to the second (`2025-01-01T00:00:00Z`), for text a model reads.
pub fn now_iso_seconds() -> String {
    format_iso_seconds(now_unix_ms())
}

/// Now as [`now_iso`] with `-` for `:`, which Windows and some sync tools refuse in file names.
pub fn now_for_file_name() -> String {
    file_name_form(&now_iso())
}

/// Milliseconds since the Unix epoch (0 on a clock set before it).
pub fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn file_name_form(iso: &str) -> String {
    iso.replace(':', "-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_parse_back_and_agree_with_the_transcript_crate() {
        let before = now_unix_ms();
        let millis = now_iso();
        let seconds = now_iso_seconds();
        let after = now_unix_ms();
        assert!(millis.ends_with('Z') && millis.len() == "2025-01-01T00:00:00.000Z".len());
        assert!(seconds.ends_with('Z') && seconds.len() == "2025-01-01T00:00:00Z".len());
        let ms = ctxhost_transcript::time::parse_iso_ms(&millis).unwrap();
        let whole_second = ctxhost_transcript::time::parse_iso_ms(&seconds).unwrap();
        assert!((before / 1000 * 1000..=after).contains(&whole_second));
        assert!(
            (before..=after).contains(&ms),
            "{before} <= {ms} <= {after}"
        );
        assert_eq!(ctxhost_transcript::time::format_iso_ms(ms), millis);
    }

    #[test]
    fn file_names_have_no_colons() {
        assert_eq!(
            file_name_form("2025-01-02T03:04:05.678Z"),
            "2025-01-02T03-04-05.678Z"
        );
        assert!(!now_for_file_name().contains(':'));
    }
}
