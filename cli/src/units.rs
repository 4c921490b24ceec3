//! Durations and sizes as people write and read them: `30s`, `500ms`, `4m12s`, `23.4M`.

use std::time::Duration;

/// Parses `30` (seconds), `1.5s`, `500ms`, `10m`, `1h`, `2d`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (try 30s, 500ms, 10m, 1h)"))?;
    let scale = match unit.trim() {
        "" | "s" | "sec" | "secs" => 1.0,
        "ms" => 0.001,
        "m" | "min" | "mins" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?} (use ms, s, m, h, d)"
            ))
        }
    };
    let secs = value * scale;
    if !secs.is_finite() || !(0.0..=1e9).contains(&secs) {
        return Err(format!("{text:?} is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses `65536`, `64K`, `512M`, `4G` (binary multiples) as bytes: more than none.
pub fn parse_size(text: &str) -> Result<u64, String> {
    match cuba_protocol::parse_size(text)? {
        0 => Err(format!("{text:?} is no size: give more than 0")),
        n => Ok(n),
    }
}

/// Milliseconds as a short age: `850ms`, `45s`, `4m12s`, `3h05m`, `2d04h`.
pub fn age(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0 => format!("{ms}ms"),
        1..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        3600..=86399 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86400, s % 86400 / 3600),
    }
}

/// Bytes with a binary suffix: `512`, `12.3K`, `23.4M`, `1.2G`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["K", "M", "G", "T"];
    if n < 1024 {
        return n.to_string();
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value >= 100.0 {
        format!("{value:.0}{}", UNITS[unit])
    } else {
        format!("{value:.1}{}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5y").is_err());
    }

    #[test]
    fn ages_and_sizes_read_well() {
        assert_eq!(age(850), "850ms");
        assert_eq!(age(45_000), "45s");
        assert_eq!(age(252_000), "4m12s");
        assert_eq!(age(11_100_000), "3h05m");
        assert_eq!(bytes(512), "512");
        assert_eq!(bytes(12_595), "12.3K");
        assert_eq!(bytes(300 * 1024 * 1024), "300M");
    }
}
