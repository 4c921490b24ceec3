//! Sizes (`64K`, `1M`) and durations (`500ms`, `1h`) as settings write them.

use std::time::Duration;

use anyhow::{Context, Result};

/// `65536`, `64k`, `64KiB`, `1M`, `1G` (binary multiples).
pub fn parse_size(text: &str) -> Result<u64> {
    cuba_protocol::parse_size(text).map_err(anyhow::Error::msg)
}

/// `30` (seconds), `30s`, `500ms`, `10m`, `1h`.
pub fn parse_duration(text: &str) -> Result<Duration> {
    let t = text.trim().to_ascii_lowercase();
    let (digits, unit_ms) = if let Some(d) = t.strip_suffix("ms") {
        (d, 1)
    } else if let Some(d) = t.strip_suffix('s') {
        (d, 1000)
    } else if let Some(d) = t.strip_suffix('m') {
        (d, 60_000)
    } else if let Some(d) = t.strip_suffix('h') {
        (d, 3_600_000)
    } else {
        (t.as_str(), 1000)
    };
    let n: u64 = digits.trim().parse().with_context(|| {
        format!("expected a duration such as 30, 30s, 500ms or 1h, got {text:?}")
    })?;
    Ok(Duration::from_millis(n.saturating_mul(unit_ms)))
}

/// `200ms`, `10s`, `10m`, `2h`: the units a setting is written in.
pub fn shown(d: Duration) -> String {
    let ms = d.as_millis();
    let unit = [(3_600_000, "h"), (60_000, "m"), (1000, "s")]
        .into_iter()
        .find(|(per, _)| ms > 0 && ms.is_multiple_of(*per));
    match unit {
        Some((per, name)) => format!("{}{name}", ms / per),
        None => format!("{ms}ms"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn durations_are_shown_as_settings_are_written() {
        assert_eq!(shown(Duration::from_millis(200)), "200ms");
        assert_eq!(shown(Duration::from_secs(90)), "90s");
        assert_eq!(shown(Duration::from_secs(600)), "10m");
        assert_eq!(shown(Duration::from_secs(7200)), "2h");
    }

    #[test]
    fn sizes_and_durations_parse() {
        assert_eq!(parse_size("65536").unwrap(), 65536);
        assert_eq!(parse_size("64k").unwrap(), 65536);
        assert_eq!(parse_size("64KiB").unwrap(), 65536);
        assert_eq!(parse_size("1M").unwrap(), 1 << 20);
        assert!(parse_size("lots").is_err());
        assert_eq!(parse_duration("30").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert!(parse_duration("soon").is_err());
    }
}
