//! ISO-8601 <-> Unix milliseconds (`jiff`): transcripts use the UTC `Z` form or a numeric
//! offset, some writers leave the offset out (read as UTC), and synthesised messages need their
//! entry's time in milliseconds.

use jiff::Timestamp;
use jiff::civil::DateTime;
use jiff::tz::Offset;

/// Parse `YYYY-MM-DDTHH:MM:SS[.fff][Z|±HH:MM]` to Unix milliseconds; None when malformed or
/// before 1970. A time without an offset is taken as UTC.
pub fn parse_iso_ms(s: &str) -> Option<u64> {
    let s = s.trim();
    let at = s.parse::<Timestamp>().ok().or_else(|| {
        let civil = s.parse::<DateTime>().ok()?;
        Offset::UTC.to_timestamp(civil).ok()
    })?;
    u64::try_from(at.as_millisecond()).ok()
}

/// Format Unix milliseconds as `YYYY-MM-DDTHH:MM:SS.fffZ` (the form pi writes).
pub fn format_iso_ms(ms: u64) -> String {
    timestamp(ms).strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// Format Unix milliseconds as `YYYY-MM-DDTHH:MM:SSZ`, for text a person or model reads.
pub fn format_iso_seconds(ms: u64) -> String {
    timestamp(ms).strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Milliseconds past what a timestamp can hold (the end of year 9999) read as its last instant.
fn timestamp(ms: u64) -> Timestamp {
    i64::try_from(ms)
        .ok()
        .and_then(|ms| Timestamp::from_millisecond(ms).ok())
        .unwrap_or(Timestamp::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pi_timestamps() {
        // 1763681630791 is the message timestamp pi wrote next to this ISO time (± a few ms).
        assert_eq!(
            parse_iso_ms("2025-11-20T23:33:50.791Z"),
            Some(1_763_681_630_791)
        );
        assert_eq!(parse_iso_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_iso_ms("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(parse_iso_ms("1970-01-01T00:00:00.5Z"), Some(500));
        assert_eq!(parse_iso_ms("yesterday"), None);
        assert_eq!(parse_iso_ms("2025-13-01T00:00:00Z"), None);
        assert_eq!(
            parse_iso_ms("2025-11-20 23:33:50.791"),
            Some(1_763_681_630_791)
        );
        assert_eq!(parse_iso_ms("1970-01-01T01:00:00+0100"), Some(0));
        assert_eq!(parse_iso_ms("1969-12-31T23:59:59Z"), None);
    }

    #[test]
    fn format_round_trips() {
        for ms in [
            0u64,
            1_763_681_630_791,
            951_782_400_000, /* 2000-02-29 */
        ] {
            assert_eq!(parse_iso_ms(&format_iso_ms(ms)), Some(ms));
        }
        assert_eq!(format_iso_ms(1_763_681_630_791), "2025-11-20T23:33:50.791Z");
        assert_eq!(
            format_iso_seconds(1_763_681_630_791),
            "2025-11-20T23:33:50Z"
        );
        assert_eq!(format_iso_ms(0), "1970-01-01T00:00:00.000Z");
        assert!(format_iso_ms(u64::MAX).starts_with("9999-12-"));
    }
}
