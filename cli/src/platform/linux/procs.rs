//! Processes from `/proc/<pid>/stat` and `/proc/<pid>/environ`.

use std::collections::HashMap;
use std::fs;

use crate::platform::ProcStat;

/// Every process `/proc` lists that could be read (one may end between listing and reading).
pub fn all() -> HashMap<i32, ProcStat> {
    let (hz, page) = (clock_ticks(), page_size());
    pids()
        .filter_map(|pid| Some((pid, read(pid, hz, page)?)))
        .collect()
}

pub fn stat(pid: i32) -> Option<ProcStat> {
    read(pid, clock_ticks(), page_size())
}

fn read(pid: i32, hz: u64, page: u64) -> Option<ProcStat> {
    let line = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&line, hz, page)
}

/// Processes whose environment has an entry starting with `needle` followed by an id, by id.
pub fn marked(needle: &str) -> HashMap<u64, Vec<i32>> {
    let mut out: HashMap<u64, Vec<i32>> = HashMap::new();
    for pid in pids() {
        let Ok(env) = fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let id = env
            .split(|b| *b == 0)
            .filter_map(|var| std::str::from_utf8(var).ok()?.strip_prefix(needle))
            .find_map(|id| id.parse().ok());
        if let Some(id) = id {
            out.entry(id).or_default().push(pid);
        }
    }
    out
}

fn pids() -> impl Iterator<Item = i32> {
    fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
}

/// Parses a stat line (`hz` clock ticks a second, `page` bytes a page). The command name sits
/// in parentheses and may hold spaces and `)`, so the fields are counted from the last `)`.
fn parse_stat(line: &str, hz: u64, page: u64) -> Option<ProcStat> {
    let rest = &line[line.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(3) ppid(4) … utime(14) stime(15) … rss(24), numbered from 1.
    let field = |n: usize| f.get(n - 3).copied();
    let ticks = field(14)?.parse::<u64>().ok()? + field(15)?.parse::<u64>().ok()?;
    Some(ProcStat {
        ppid: field(4)?.parse().ok()?,
        zombie: field(3)? == "Z",
        cpu_ns: ticks.saturating_mul(1_000_000_000) / hz,
        rss_bytes: field(24)?.parse::<u64>().ok()?.saturating_mul(page),
    })
}

/// Clock ticks per second, the unit of CPU times in `/proc`.
fn clock_ticks() -> u64 {
    // SAFETY: sysconf only reads a system constant.
    let n = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if n > 0 {
        n as u64
    } else {
        100
    }
}

/// Bytes per page, the unit of resident memory in `/proc`.
fn page_size() -> u64 {
    // SAFETY: as above.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as u64
    } else {
        4096
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_survives_odd_names() {
        let line = "42 (a) b (c)) S 7 42 42 0 -1 4194560 1 0 0 0 30 12 0 0 20 0 1 0 99 1000 250";
        let s = parse_stat(line, 100, 4096).expect("parses");
        assert_eq!(
            s,
            ProcStat {
                ppid: 7,
                zombie: false,
                cpu_ns: 420_000_000,
                rss_bytes: 250 * 4096,
            }
        );
    }
}
