//! Process facts from `/proc`: parent, group and start time (`stat`), the live processes, a
//! process's children (every thread's), its environment and its working directory; and what
//! the askpass check asks of a process (`exe`, `status`, `environ`, `cmdline`).

use std::fs;
use std::io::Read;
use std::path::PathBuf;

use crate::platform::StartTime;

/// Reads up to `buf.len()` bytes at `addr` of process `pid`'s memory (a process of the
/// daemon's user, or any under a root daemon); the count read, 0 where none could be.
pub fn read_memory(pid: i32, addr: u64, buf: &mut [u8]) -> usize {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: one local iovec over `buf`, which lives across the call; the remote one is only
    // read by the kernel, which checks it.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    n.max(0) as usize
}

/// What `/proc/PID/stat` says about a process that we use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: i32,
    pub ppid: i32,
    pub pgrp: i32,
    /// Start time in clock ticks since boot: with the pid, identifies a process.
    pub start_time: StartTime,
}

pub fn parse_stat(pid: i32, text: &str) -> Option<ProcStat> {
    // The command name is in parentheses and may contain anything: split after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(ProcStat {
        pid,
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start_time: StartTime(fields.get(19)?.parse().ok()?),
    })
}

/// Whether a `/proc/PID/stat` line is a zombie's (state `Z`).
fn is_zombie(text: &str) -> bool {
    text.rfind(')')
        .and_then(|i| text[i + 1..].split_whitespace().next())
        == Some("Z")
}

/// `/proc/PID/stat` in one read into a stack buffer: a stat line is a few hundred bytes, and a
/// scan reads one for every process on the machine.
fn with_stat<T>(pid: impl std::fmt::Display, f: impl FnOnce(&str) -> Option<T>) -> Option<T> {
    let mut buf = [0u8; 1024];
    let mut file = fs::File::open(format!("/proc/{pid}/stat")).ok()?;
    let n = file.read(&mut buf).ok()?;
    f(std::str::from_utf8(&buf[..n]).ok()?)
}

/// The process `pid`, zombie or not.
pub fn stat(pid: i32) -> Option<ProcStat> {
    with_stat(pid, |text| parse_stat(pid, text))
}

/// A reading of the clock the kernel stamps a new process's start with.
#[derive(Clone, Copy)]
pub struct Clock(Option<u64>);

pub fn clock() -> Clock {
    Clock(boot_ns())
}

fn boot_ns() -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime fills the timespec it is given.
    if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) } != 0 {
        return None;
    }
    Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// The start time (`stat`'s, in clock ticks) of `pid`, a child made after `before`. The
/// kernel takes it from the boot-time clock at the fork and rounds it down to a tick: when
/// `before` and now fall in one tick, that tick is it, with no read of `/proc` (which, just
/// after a spawn, waits for the child's exec to finish loading). Else it is read.
pub fn start_time_of(pid: i32, before: Clock) -> StartTime {
    static TICK_NS: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    let tick = *TICK_NS.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        // The kernel's conversion is an exact division only for such a rate.
        (hz > 0 && 1_000_000_000 % hz as u64 == 0).then(|| 1_000_000_000 / hz as u64)
    });
    if let (Some(tick), Some(before), Some(now)) = (tick, before.0, boot_ns()) {
        if before / tick == now / tick {
            return StartTime(now / tick);
        }
    }
    stat(pid).map_or(StartTime::UNKNOWN, |s| s.start_time)
}

/// The process `pid` if it is alive (not a zombie: dead already, with no children, and `kill`
/// "succeeds" on it).
pub fn live(pid: i32) -> Option<ProcStat> {
    with_stat(pid, |text| {
        (!is_zombie(text)).then(|| parse_stat(pid, text))?
    })
}

/// Every live process on the machine.
pub fn scan() -> Vec<ProcStat> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(live)
        .collect()
}

/// The children of `pid` (every thread's).
pub fn children(pid: i32) -> Vec<i32> {
    children_at(pid)
}

/// The daemon's own children (every thread's).
pub fn own_children() -> Vec<i32> {
    children_at("self")
}

fn children_at(pid: impl std::fmt::Display) -> Vec<i32> {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(|t| fs::read_to_string(t.ok()?.path().join("children")).ok())
        .flat_map(|text| {
            text.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

/// Whether `pid`'s environment has the entry `NAME=VALUE` exactly.
pub fn has_env_entry(pid: i32, entry: &str) -> bool {
    match fs::read(format!("/proc/{pid}/environ")) {
        Ok(env) => env.split(|b| *b == 0).any(|kv| kv == entry.as_bytes()),
        Err(_) => false,
    }
}

/// The rest of the first entry of `pid`'s environment that starts with `prefix`.
pub fn env_entry_after(pid: i32, prefix: &[u8]) -> Option<Vec<u8>> {
    let env = fs::read(format!("/proc/{pid}/environ")).ok()?;
    env.split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(prefix))
        .map(<[u8]>::to_vec)
}

/// The working directory of `pid` now.
/// Resident memory of `pid` in bytes (`/proc/PID/statm`), if it still exists.
pub fn rss_bytes(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let pages: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf takes an integer name.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    Some(pages * page)
}

pub fn cwd(pid: u32) -> Option<PathBuf> {
    fs::read_link(format!("/proc/{pid}/cwd")).ok()
}

/// The name `pid` runs as (`comm`: its program's name, at most 15 bytes).
pub fn name(pid: i32) -> Option<String> {
    let text = fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(text.trim_end_matches('\n').to_string()).filter(|n| !n.is_empty())
}

/// The program `pid` runs: its path, and the file itself (`/proc/PID/exe` is followed to the
/// file the process was started from, even where that path now names another file or none).
/// EACCES or EPERM: the kernel does not let this daemon look (a setuid program running as
/// another user, a process that made itself undumpable).
pub fn exe(pid: i32) -> std::io::Result<(PathBuf, fs::Metadata)> {
    let link = format!("/proc/{pid}/exe");
    let file = fs::metadata(&link)?;
    Ok((fs::read_link(&link)?, file))
}

/// A process's user ids and whether something traces it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Creds {
    pub ruid: u32,
    pub euid: u32,
    pub traced: bool,
}

/// The variables that make the dynamic loader put other code into a program that is not
/// setuid (the loader ignores them in a setuid one); each holds paths separated by `:` (and by
/// spaces or `;` in some).
pub const LOADER_VARS: &[&str] = &["LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH"];

/// `pid`'s user ids and tracer (`/proc/PID/status`, readable even for a setuid program).
pub fn creds(pid: i32) -> Option<Creds> {
    parse_status(&fs::read_to_string(format!("/proc/{pid}/status")).ok()?)
}

/// The `Uid:` (real, effective, saved, filesystem) and `TracerPid:` lines of a status file.
fn parse_status(text: &str) -> Option<Creds> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(str::split_whitespace)
    };
    let mut uids = field("Uid")?.map(str::parse::<u32>);
    let (ruid, euid) = (uids.next()?.ok()?, uids.next()?.ok()?);
    let tracer: u32 = field("TracerPid")?.next()?.parse().ok()?;
    Some(Creds {
        ruid,
        euid,
        traced: tracer != 0,
    })
}

/// The variables `pid` was started with (`/proc/PID/environ`); `None` where they cannot be
/// read.
pub fn env_vars(pid: i32) -> Option<Vec<(String, String)>> {
    Some(vars_of(&fs::read(format!("/proc/{pid}/environ")).ok()?))
}

/// The `NAME=VALUE` entries of a block of NUL-terminated ones (an entry with no `=` is all
/// name).
fn vars_of(block: &[u8]) -> Vec<(String, String)> {
    block
        .split(|b| *b == 0)
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let text = String::from_utf8_lossy(kv);
            match text.split_once('=') {
                Some((name, value)) => (name.to_string(), value.to_string()),
                None => (text.into_owned(), String::new()),
            }
        })
        .collect()
}

/// `pid`'s arguments (`/proc/PID/cmdline`, readable for any process); `None` where it cannot be
/// read or is empty.
pub fn cmdline(pid: i32) -> Option<Vec<String>> {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args: Vec<String> = raw
        .strip_suffix(&[0])
        .unwrap_or(&raw)
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    (!raw.is_empty()).then_some(args)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_stat_with_odd_command_names() {
        let line = "1234 (a) b (c)) S 1 1234 1234 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 98765 \
                    1000 100 18446744073709551615";
        let s = parse_stat(1234, line).unwrap();
        assert_eq!((s.ppid, s.pgrp, s.start_time), (1, 1234, StartTime(98765)));
        assert!(!is_zombie(line));
        assert!(is_zombie("7 (x) Z) Z 1 7 7 0"));
    }

    #[test]
    fn a_childs_start_time_from_the_clock_is_the_one_proc_gives() {
        assert!(boot_ns().is_some());
        // Most of these come from the clock (a spawn is far shorter than a tick).
        for _ in 0..50 {
            let before = clock();
            let mut child = std::process::Command::new("/bin/sleep")
                .arg("5")
                .spawn()
                .unwrap();
            let pid = child.id() as i32;
            let got = start_time_of(pid, before);
            let read = stat(pid).unwrap().start_time;
            child.kill().unwrap();
            child.wait().unwrap();
            assert_eq!(got, read);
        }
    }

    #[test]
    fn this_process_is_seen() {
        let me = std::process::id() as i32;
        let s = live(me).unwrap();
        assert_eq!(s.pid, me);
        assert!(scan().iter().any(|p| p.pid == me));
        assert!(cwd(me as u32).is_some());
    }

    #[test]
    fn reads_uids_and_the_tracer_from_a_status_file() {
        let text = "Name:\tsudo\nUmask:\t0022\nState:\tS (sleeping)\nTracerPid:\t0\n\
                    Uid:\t1000\t0\t0\t0\nGid:\t1000\t1000\t1000\t1000\n";
        let c = parse_status(text).unwrap();
        assert_eq!(
            c,
            Creds {
                ruid: 1000,
                euid: 0,
                traced: false
            }
        );
        let traced = text.replace("TracerPid:\t0", "TracerPid:\t4321");
        assert!(parse_status(&traced).unwrap().traced);
        assert_eq!(parse_status("Name:\tx\nUid:\t1\n"), None);
        assert_eq!(parse_status("Uid:\t1\t2\t2\t2\n"), None);
    }

    #[test]
    fn the_variables_of_an_environment_block() {
        let block = b"A=1\0LD_PRELOAD=/tmp/x.so\0ODD\0B==2\0\0";
        let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            vars_of(block),
            pairs(&[
                ("A", "1"),
                ("LD_PRELOAD", "/tmp/x.so"),
                ("ODD", ""),
                ("B", "=2")
            ])
        );
        assert!(vars_of(b"").is_empty());
    }

    #[test]
    fn this_processs_identity_is_read() {
        let me = std::process::id() as i32;
        let (path, file) = exe(me).unwrap();
        let here = std::env::current_exe().unwrap();
        assert_eq!(path, here);
        use std::os::unix::fs::MetadataExt;
        let want = fs::metadata(&here).unwrap();
        assert_eq!((file.dev(), file.ino()), (want.dev(), want.ino()));
        // SAFETY: getuid and geteuid have no preconditions.
        let (ruid, euid) = unsafe { (libc::getuid(), libc::geteuid()) };
        let c = creds(me).unwrap();
        assert_eq!((c.ruid, c.euid), (ruid, euid));
        if let Ok(path) = std::env::var("PATH") {
            assert!(env_vars(me).unwrap().contains(&("PATH".to_string(), path)));
        }
        let args = cmdline(me).unwrap();
        assert_eq!(args.len(), std::env::args().count());
    }
}
