//! Readers for /proc: process trees (by parent links and by the daemon's environment marker),
//! CPU time, resident memory, and the TCP ports a set of processes listens on.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Instant;

/// What one /proc/<pid>/stat line says that we use.
#[derive(Clone, Copy, Debug)]
pub struct Stat {
    pub ppid: i32,
    pub zombie: bool,
    /// User + system time, in clock ticks.
    pub cpu_ticks: u64,
    pub rss_pages: u64,
}

/// Parses a stat line. The command name sits in parentheses and may hold spaces and `)`, so
/// the fields are counted from the last `)`.
pub fn parse_stat(line: &str) -> Option<Stat> {
    let rest = &line[line.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(3) ppid(4) … utime(14) stime(15) … rss(24), numbered from 1.
    let field = |n: usize| f.get(n - 3).copied();
    Some(Stat {
        ppid: field(4)?.parse().ok()?,
        zombie: field(3)? == "Z",
        cpu_ticks: field(14)?.parse::<u64>().ok()? + field(15)?.parse::<u64>().ok()?,
        rss_pages: field(24)?.parse().ok()?,
    })
}

/// Every visible process at one moment.
pub struct Snapshot {
    pub stats: HashMap<i32, Stat>,
    children: HashMap<i32, Vec<i32>>,
    pub taken: Instant,
}

impl Snapshot {
    pub fn take() -> Snapshot {
        let mut stats = HashMap::new();
        for pid in pids() {
            // A process may end between listing and reading: skip it.
            if let Some(stat) = fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|l| parse_stat(&l))
            {
                stats.insert(pid, stat);
            }
        }
        let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
        for (&pid, s) in &stats {
            children.entry(s.ppid).or_default().push(pid);
        }
        Snapshot {
            stats,
            children,
            taken: Instant::now(),
        }
    }

    /// `root` and its living descendants (empty when `root` is gone).
    pub fn tree(&self, root: i32) -> Vec<i32> {
        let mut out = Vec::new();
        if self.stats.get(&root).is_none_or(|s| s.zombie) {
            return out;
        }
        let mut todo = vec![root];
        let mut seen = HashSet::new();
        while let Some(pid) = todo.pop() {
            if !seen.insert(pid) {
                continue;
            }
            if self.stats.get(&pid).is_some_and(|s| !s.zombie) {
                out.push(pid);
            }
            todo.extend(self.children.get(&pid).into_iter().flatten().copied());
        }
        out.sort_unstable();
        out
    }

    /// Living children of `pid`.
    pub fn live_children(&self, pid: i32) -> usize {
        self.children.get(&pid).map_or(0, |c| {
            c.iter()
                .filter(|p| self.stats.get(p).is_some_and(|s| !s.zombie))
                .count()
        })
    }
}

fn pids() -> impl Iterator<Item = i32> {
    fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
}

/// Processes that carry `CUBA_EXEC_PROCESS=<instance>.<id>` in their environment, by id: they
/// belong to that process even after leaving its tree (`setsid`, double fork). Only our own
/// processes' environments are readable, which is all the daemon runs.
pub fn marked(instance: &str) -> HashMap<u64, Vec<i32>> {
    let needle = format!("CUBA_EXEC_PROCESS={instance}.");
    let mut out: HashMap<u64, Vec<i32>> = HashMap::new();
    for pid in pids() {
        let Ok(env) = fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let id = env
            .split(|b| *b == 0)
            .filter_map(|var| std::str::from_utf8(var).ok()?.strip_prefix(needle.as_str()))
            .find_map(|id| id.parse().ok());
        if let Some(id) = id {
            out.entry(id).or_default().push(pid);
        }
    }
    out
}

/// The TCP sockets in LISTEN state among `pids`' open files. `netns_pid` names the network
/// namespace whose tables are read.
pub fn listening(pids: &[i32], netns_pid: i32) -> Vec<SocketAddr> {
    let inodes: HashSet<u64> = pids.iter().flat_map(|&pid| socket_inodes(pid)).collect();
    if inodes.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<SocketAddr> = ["tcp", "tcp6"]
        .iter()
        .filter_map(|t| fs::read_to_string(format!("/proc/{netns_pid}/net/{t}")).ok())
        .flat_map(|text| parse_listeners(&text))
        .filter(|(_, inode)| inodes.contains(inode))
        .map(|(addr, _)| addr)
        .collect();
    out.sort_unstable_by_key(|a| (a.port(), a.ip()));
    out.dedup();
    out
}

fn socket_inodes(pid: i32) -> Vec<u64> {
    let Ok(dir) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let target = fs::read_link(e.ok()?.path()).ok()?;
        let t = target.to_str()?;
        t.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
    })
    .collect()
}

/// `(local address, inode)` of every LISTEN row (state `0A`) of /proc/net/tcp or tcp6.
pub fn parse_listeners(text: &str) -> Vec<(SocketAddr, u64)> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.get(3) != Some(&"0A") {
                return None;
            }
            let addr = parse_hex_addr(f.get(1)?)?;
            let inode = f.get(9)?.parse().ok()?;
            Some((addr, inode))
        })
        .collect()
}

/// `0100007F:1F40` → 127.0.0.1:8000. The kernel prints the address as 32-bit words in host
/// byte order.
fn parse_hex_addr(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words: Vec<u32> = (0..ip.len() / 8)
        .map(|i| u32::from_str_radix(ip.get(i * 8..i * 8 + 8)?, 16).ok())
        .collect::<Option<_>>()?;
    let ip = match words.as_slice() {
        [w] => IpAddr::V4(Ipv4Addr::from(w.to_ne_bytes())),
        [a, b, c, d] => {
            let mut bytes = [0u8; 16];
            for (i, w) in [a, b, c, d].iter().enumerate() {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&w.to_ne_bytes());
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Clock ticks per second (for CPU time) and the page size (for RSS).
pub fn clock_ticks() -> u64 {
    // SAFETY: sysconf only reads a system constant.
    let n = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if n > 0 {
        n as u64
    } else {
        100
    }
}

pub fn page_size() -> u64 {
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
        let s = parse_stat(line).expect("parses");
        assert_eq!(
            (s.ppid, s.cpu_ticks, s.rss_pages, s.zombie),
            (7, 42, 250, false)
        );
    }

    #[test]
    fn listeners_parse_v4_and_v6() {
        let v4 = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 12345 1\n   1: 0100007F:1F41 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1000        0 12346 1\n";
        assert_eq!(
            parse_listeners(v4),
            vec![("127.0.0.1:8000".parse().expect("addr"), 12345)]
        );
        let v6 = "header\n   0: 00000000000000000000000001000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 777 1\n";
        assert_eq!(
            parse_listeners(v6),
            vec![("[::1]:80".parse().expect("addr"), 777)]
        );
    }

    #[test]
    fn own_tree_is_found() {
        let snap = Snapshot::take();
        let me = std::process::id() as i32;
        assert_eq!(snap.tree(me).first(), Some(&me));
    }
}
