//! ISO-8601 UTC timestamps (`jiff`, as the host and the transcript crate write them): the
//! engine formats a Unix time and reads back what it wrote.

use std::time::{SystemTime, UNIX_EPOCH};

use jiff::Timestamp;

/// Milliseconds since the Unix epoch, now. In the component this is WASI's wall clock.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// `2025-03-01T09:30:00Z`: seconds precision is what a reader of a checkpoint needs.
pub fn iso_utc(ms: u64) -> String {
    let at = i64::try_from(ms)
        .ok()
        .and_then(|ms| Timestamp::from_millisecond(ms).ok())
        .unwrap_or(Timestamp::MAX);
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Reads back a timestamp [`iso_utc`] wrote (RFC 3339, to the millisecond). `None` for
/// anything else: callers treat an unreadable time as "unknown", never as an error.
pub fn parse_iso_utc(text: &str) -> Option<u64> {
    let at: Timestamp = text.trim().parse().ok()?;
    u64::try_from(at.as_millisecond()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_parses_utc() {
        assert_eq!(iso_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso_utc(1_700_000_000_123), "2023-11-14T22:13:20Z");
        assert_eq!(iso_utc(951_782_400_000), "2000-02-29T00:00:00Z");
        for ms in [0, 951_782_400_000, 1_700_000_000_000, 4_102_444_800_000] {
            assert_eq!(parse_iso_utc(&iso_utc(ms)), Some(ms));
        }
        assert_eq!(
            parse_iso_utc("2023-11-14T22:13:20.123Z"),
            Some(1_700_000_000_123)
        );
        for bad in [
            "",
            "yesterday",
            "2023-13-01T00:00:00Z",
            "2023-11-14 22:13:20",
            "２０２３",
        ] {
            assert_eq!(parse_iso_utc(bad), None, "{bad}");
        }
    }
}
