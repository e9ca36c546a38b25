//! ISO-8601 <-> Unix milliseconds without a date crate: transcripts only use the UTC `Z` form
//! or a numeric offset, and synthesised messages need their entry's time in milliseconds.

/// Days since 1970-01-01 for a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn num(s: &str) -> Option<i64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parse `YYYY-MM-DDTHH:MM:SS[.fff][Z|±HH:MM]` to Unix milliseconds; None when malformed or
/// before 1970.
pub fn parse_iso_ms(s: &str) -> Option<u64> {
    let s = s.trim();
    if s.len() < 19 || !s.is_char_boundary(10) || !s.is_char_boundary(19) {
        return None;
    }
    let (date, rest) = s.split_at(10);
    let mut dp = date.split('-');
    let (y, mo, d) = (num(dp.next()?)?, num(dp.next()?)?, num(dp.next()?)?);
    let rest = rest.strip_prefix(['T', 't', ' '])?;
    let (hh, mm, ss) = (
        num(rest.get(0..2)?)?,
        num(rest.get(3..5)?)?,
        num(rest.get(6..8)?)?,
    );
    if rest.get(2..3)? != ":" || rest.get(5..6)? != ":" {
        return None;
    }
    let mut tail = rest.get(8..)?;
    let mut millis = 0i64;
    if let Some(frac) = tail.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        let f = frac.get(..digits)?;
        let padded: String = f.chars().chain("000".chars()).take(3).collect();
        millis = num(&padded)?;
        tail = frac.get(digits..)?;
    }
    let offset_min = match tail {
        "" | "Z" | "z" => 0,
        _ => {
            let sign = match tail.get(0..1)? {
                "+" => 1,
                "-" => -1,
                _ => return None,
            };
            let body = tail.get(1..)?.replace(':', "");
            if body.len() != 4 {
                return None;
            }
            sign * (num(body.get(0..2)?)? * 60 + num(body.get(2..4)?)?)
        }
    };
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    let secs = days_from_civil(y, mo, d) * 86_400 + hh * 3600 + mm * 60 + ss - offset_min * 60;
    u64::try_from(secs * 1000 + millis).ok()
}

/// Format Unix milliseconds as `YYYY-MM-DDTHH:MM:SS.fffZ` (the form pi writes).
pub fn format_iso_ms(ms: u64) -> String {
    let ms = i64::try_from(ms).unwrap_or(i64::MAX / 2);
    let (secs, millis) = (ms.div_euclid(1000), ms.rem_euclid(1000));
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
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
    }
}
