//! Wall-clock time as the table keeps it: Unix milliseconds.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// How long a client's `start` watches a new process for an exit that means it failed at once
/// (`CUBA_EXEC_START_GRACE_MS`, default 100; 0 for none): `cubactl start` and MCP `start` alike.
pub fn start_grace_ms() -> u64 {
    std::env::var("CUBA_EXEC_START_GRACE_MS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(100)
}

/// `2026-12-05T10:00:00Z` of Unix milliseconds (ISO 8601, UTC, whole seconds).
pub fn format_utc(ms: u64) -> String {
    let secs = (ms / 1000) as i64;
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    let (h, min, s) = (rest / 3600, rest % 3600 / 60, rest % 60);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{s:02}Z")
}

/// `2026-12-05T10:00:00.123Z` of Unix milliseconds (ISO 8601, UTC).
pub fn format_utc_ms(ms: u64) -> String {
    let whole = format_utc(ms);
    let seconds = whole.trim_end_matches('Z');
    format!("{seconds}.{:03}Z", ms % 1000)
}

/// The civil date (year, month, day) of a day count since 1970-01-01 (Howard Hinnant's
/// algorithm).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_of_known_instants() {
        assert_eq!(format_utc_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_utc_ms(1_796_558_400_123), "2026-12-06T12:00:00.123Z");
        assert_eq!(format_utc_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
