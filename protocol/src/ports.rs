//! Listening sockets from `/proc/<pid>/fd` (socket inodes) and `/proc/<pid>/net/tcp{,6}`
//! (Linux): what `cubactl ps` shows of a tree and what the daemon's port watcher reports.

use std::collections::HashSet;
use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The LISTEN sockets among `pids`' open files, from the network namespace of the first.
pub fn listening(pids: &[i32]) -> Vec<SocketAddr> {
    let inodes: HashSet<u64> = pids.iter().flat_map(|&pid| socket_inodes(pid)).collect();
    if inodes.is_empty() {
        return Vec::new();
    }
    let netns_pid = pids.first().copied().unwrap_or(0);
    ["tcp", "tcp6"]
        .iter()
        .filter_map(|t| fs::read_to_string(format!("/proc/{netns_pid}/net/{t}")).ok())
        .flat_map(|text| parse_listeners(&text))
        .filter(|(_, inode)| inodes.contains(inode))
        .map(|(addr, _)| addr)
        .collect()
}

/// Who listens on TCP `port` in this process's network namespace: each LISTEN socket's
/// address and the pid holding it (`None` where the holder's files cannot be read: another
/// user's process). Empty where nothing listens, or the system has no `/proc`.
pub fn holders(port: u16) -> Vec<(SocketAddr, Option<i32>)> {
    let rows: Vec<(SocketAddr, u64)> = ["tcp", "tcp6"]
        .iter()
        .filter_map(|t| fs::read_to_string(format!("/proc/self/net/{t}")).ok())
        .flat_map(|text| parse_listeners(&text))
        .filter(|(addr, _)| addr.port() == port)
        .collect();
    if rows.is_empty() {
        return Vec::new();
    }
    let pids: Vec<i32> = fs::read_dir("/proc")
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let mut owner: Vec<Option<i32>> = vec![None; rows.len()];
    for pid in pids {
        if owner.iter().all(Option::is_some) {
            break;
        }
        let inodes = socket_inodes(pid);
        for (i, (_, inode)) in rows.iter().enumerate() {
            if owner[i].is_none() && inodes.contains(inode) {
                owner[i] = Some(pid);
            }
        }
    }
    rows.into_iter()
        .zip(owner)
        .map(|((addr, _), pid)| (addr, pid))
        .collect()
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
fn parse_listeners(text: &str) -> Vec<(SocketAddr, u64)> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
    #[cfg(target_os = "linux")]
    fn the_holder_of_a_port_is_found() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let me = std::process::id() as i32;
        assert!(holders(port).iter().any(|(_, pid)| *pid == Some(me)));
        drop(listener);
        assert!(holders(port).is_empty());
    }
}
