//! Finding and signalling a process's whole tree, from `/proc`.
//!
//! A tree is: the tracked process, every process in its process group, every process carrying
//! its marker in the environment (a `setsid` + double-fork escapee that reparented to the daemon,
//! or to init after a daemon crash), and all of their descendants. Every signal goes through a
//! pidfd opened after checking the process's start time, so a reused pid is never hit.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io;

/// One line of `/proc/PID/stat`, the fields we need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: i32,
    pub ppid: i32,
    pub pgrp: i32,
    /// Start time in clock ticks since boot: with the pid, identifies a process.
    pub start_time: u64,
}

/// What identifies a tracked tree.
#[derive(Clone, Debug)]
pub struct TreeRoot {
    pub pid: i32,
    pub start_time: u64,
    /// `NAME=VALUE` planted in the root's environment.
    pub marker: String,
}

pub fn parse_stat(pid: i32, text: &str) -> Option<ProcStat> {
    // The command name is in parentheses and may contain anything: split after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(ProcStat {
        pid,
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

/// `/proc/PID/stat` in one read into a stack buffer: a stat line is a few hundred bytes, and a
/// scan reads one for every process on the machine.
fn with_stat<T>(pid: i32, f: impl FnOnce(&str) -> Option<T>) -> Option<T> {
    use std::io::Read;
    let mut buf = [0u8; 1024];
    let mut file = fs::File::open(format!("/proc/{pid}/stat")).ok()?;
    let n = file.read(&mut buf).ok()?;
    f(std::str::from_utf8(&buf[..n]).ok()?)
}

pub fn stat(pid: i32) -> Option<ProcStat> {
    with_stat(pid, |text| parse_stat(pid, text))
}

/// Whether a `/proc/PID/stat` line is a zombie's (state `Z`).
fn is_zombie(text: &str) -> bool {
    text.rfind(')')
        .and_then(|i| text[i + 1..].split_whitespace().next())
        == Some("Z")
}

/// Every live process visible in `/proc`. Zombies are left out: they are dead already, have no
/// children, and `kill` "succeeds" on them, so counting them would keep `kill_tree` looping.
pub fn scan() -> Vec<ProcStat> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            with_stat(pid, |text| {
                (!is_zombie(text)).then(|| parse_stat(pid, text))?
            })
        })
        .collect()
}

/// Whether `pid`'s environment contains `marker` (`NAME=VALUE`) exactly.
pub fn has_marker(pid: i32, marker: &str) -> bool {
    match fs::read(format!("/proc/{pid}/environ")) {
        Ok(env) => env.split(|b| *b == 0).any(|kv| kv == marker.as_bytes()),
        Err(_) => false,
    }
}

/// The members of `root`'s tree now alive, as `(pid, start_time)`. `marker_candidates` limits
/// the (costly) environment check to processes whose parent is one of those pids (the daemon,
/// or init after a restart); `None` checks every process.
/// Where escapees of a tree can be: children of `parents` (the daemon, a subreaper), other than
/// the `known` tracked processes (whose environments carry their own markers, not worth reading).
#[derive(Debug, Default)]
pub struct Scope {
    pub parents: HashSet<i32>,
    pub known: HashSet<i32>,
}

/// The daemon's children now (every thread's), from `/proc/self/task/*/children`.
pub fn own_children() -> Vec<i32> {
    children_of("self")
}

/// A process's children (every thread's), from `/proc/PID/task/*/children`.
fn children_of(pid: impl std::fmt::Display) -> Vec<i32> {
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

/// Whether anything of `root`'s tree may be left, without a scan: its process group still has
/// members, or the daemon has a child it does not track (an escapee reparented to it).
pub fn may_have_leftovers(root: &TreeRoot, scope: &Scope) -> bool {
    // SAFETY: kill with signal 0 only checks that the group exists and may be signalled.
    let group_alive = unsafe { libc::kill(-root.pid, 0) } == 0
        || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    group_alive || own_children().iter().any(|c| !scope.known.contains(c))
}

pub fn members(root: &TreeRoot, procs: &[ProcStat], scope: Option<&Scope>) -> Vec<(i32, u64)> {
    let mut children: HashMap<i32, Vec<usize>> = HashMap::new();
    for (i, p) in procs.iter().enumerate() {
        children.entry(p.ppid).or_default().push(i);
    }
    // Linux does not reuse a pid while a group of that id exists, so the group is ours unless
    // the pid now belongs to another process.
    let group_ours = !procs
        .iter()
        .any(|p| p.pid == root.pid && p.start_time != root.start_time);
    let mut seeds: Vec<usize> = Vec::new();
    for (i, p) in procs.iter().enumerate() {
        let in_root = p.pid == root.pid && p.start_time == root.start_time;
        // The group id is the root's pid: the root leads its own session.
        let in_group = group_ours && p.pgrp == root.pid && p.start_time >= root.start_time;
        let marked = p.pid != root.pid
            && scope.is_none_or(|s| s.parents.contains(&p.ppid) && !s.known.contains(&p.pid))
            && has_marker(p.pid, &root.marker);
        if in_root || in_group || marked {
            seeds.push(i);
        }
    }
    let mut seen: HashSet<usize> = HashSet::new();
    while let Some(i) = seeds.pop() {
        if !seen.insert(i) {
            continue;
        }
        if let Some(kids) = children.get(&procs[i].pid) {
            seeds.extend(kids.iter().copied());
        }
    }
    let mut out: Vec<(i32, u64)> = seen
        .into_iter()
        .map(|i| (procs[i].pid, procs[i].start_time))
        .collect();
    out.sort_unstable();
    out
}

/// The tree of `root` found by following parent → child links, from the root and from the
/// daemon's untracked children that carry the root's marker (escapees reparented to the
/// subreaper). Its cost is the size of the tree, not of the machine: what the daemon uses while
/// it runs. (After a daemon restart orphans belong to init, and only [`members`] finds them.)
fn members_linked(root: &TreeRoot, scope: &Scope) -> Vec<(i32, u64)> {
    let mut todo: Vec<i32> = Vec::new();
    if stat(root.pid).is_some_and(|s| s.start_time == root.start_time) {
        todo.push(root.pid);
    }
    for parent in &scope.parents {
        todo.extend(children_of(parent).into_iter().filter(|c| {
            *c != root.pid && !scope.known.contains(c) && has_marker(*c, &root.marker)
        }));
    }
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    while let Some(pid) = todo.pop() {
        if !seen.insert(pid) {
            continue;
        }
        let live = with_stat(pid, |text| {
            (!is_zombie(text)).then(|| parse_stat(pid, text))?
        });
        if let Some(s) = live {
            out.push((pid, s.start_time));
        }
        todo.extend(children_of(pid));
    }
    out.sort_unstable();
    out
}

/// Whether a live member of `root`'s tree is blocked reading the pipe whose inode is `ino` (the
/// stdin pipe the daemon holds). Kernel state only: the member has the pipe open (a
/// `/proc/PID/fd/N` link `pipe:[INO]`) and one of its threads sleeps in `read`/`readv` on that
/// fd (`/proc/PID/task/TID/syscall`), or waits in `select`/`poll` with no timeout while the pipe
/// is its stdin; where that file is unreadable, a thread sleeping (state `S`) in `pipe_read` (its
/// `wchan`) counts. Returns the pid found.
pub fn reading_pipe(root: &TreeRoot, scope: &Scope, ino: u64) -> Option<i32> {
    let link = format!("pipe:[{ino}]");
    members_linked(root, scope)
        .into_iter()
        .map(|(pid, _)| pid)
        .find(|pid| blocked_reading(*pid, &link))
}

/// Whether a live member of `root`'s tree in the terminal's foreground process group `fg` is
/// blocked reading the terminal `path` (e.g. `/dev/pts/3`): a thread sleeps in `read` on a fd of
/// that terminal, or in `select`/`poll` without a timeout while the terminal is its stdin (line
/// editors such as readline wait in `pselect` before they read). Where `syscall` is
/// unreadable, a thread sleeping in the terminal's read (`n_tty_read`, `wait_woken`) counts.
pub fn reading_tty(root: &TreeRoot, scope: &Scope, path: &str, fg: i32) -> Option<i32> {
    members_linked(root, scope)
        .into_iter()
        .map(|(pid, _)| pid)
        .filter(|pid| stat(*pid).is_some_and(|s| s.pgrp == fg))
        .find(|pid| blocked_on(*pid, path, true))
}

/// The fds of `pid` that are `link` (e.g. `pipe:[123]`).
fn fds_on(pid: i32, link: &str) -> Vec<u64> {
    let Ok(dir) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let target = fs::read_link(e.path()).ok()?;
        (target.as_os_str() == link)
            .then(|| e.file_name().to_str()?.parse().ok())
            .flatten()
    })
    .collect()
}

/// A `/proc/PID/task/TID/syscall` line says the thread sleeps in a read of one of `fds`.
pub fn syscall_reads(text: &str, fds: &[u64]) -> bool {
    let mut fields = text.split_whitespace();
    let (Some(nr), Some(fd)) = (fields.next(), fields.next()) else {
        return false;
    };
    let Ok(nr) = nr.parse::<i64>() else {
        // "running", or "-1 ..." (not in a syscall).
        return false;
    };
    let reads = nr == libc::SYS_read || nr == libc::SYS_readv;
    let fd = hex(fd);
    reads && fd.is_some_and(|fd| fds.contains(&fd))
}

fn hex(field: &str) -> Option<u64> {
    u64::from_str_radix(field.trim_start_matches("0x"), 16).ok()
}

/// A `/proc/PID/task/TID/syscall` line says the thread waits in `select`/`poll` (or their `p`
/// variants) with no timeout: it waits for input on something and nothing else.
pub fn syscall_waits_forever(text: &str) -> bool {
    let fields: Vec<&str> = text.split_whitespace().collect();
    let Some(nr) = fields.first().and_then(|nr| nr.parse::<i64>().ok()) else {
        return false;
    };
    let arg = |i: usize| fields.get(i + 1).and_then(|a| hex(a));
    // A NULL timeout pointer, or a timeout of -1 ms for `poll`.
    match nr {
        libc::SYS_pselect6 => arg(4) == Some(0),
        libc::SYS_ppoll => arg(2) == Some(0),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_select => arg(4) == Some(0),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_poll => arg(2).is_some_and(|t| t as u32 == u32::MAX),
        _ => false,
    }
}

fn blocked_reading(pid: i32, link: &str) -> bool {
    blocked_on(pid, link, false)
}

/// A thread of `pid` sleeps reading one of its fds linked to `link` (a pipe, or with `tty` a
/// terminal), or waits in `select`/`poll` with no timeout while its stdin (fd 0) is `link`: what
/// it waits for is then most likely the answer (a REPL's line editor, a `select` on stdin).
fn blocked_on(pid: i32, link: &str, tty: bool) -> bool {
    let fds = fds_on(pid, link);
    if fds.is_empty() {
        return false;
    }
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.filter_map(|t| t.ok()).any(|t| {
        let task = t.path();
        match fs::read_to_string(task.join("syscall")) {
            Ok(text) => {
                syscall_reads(&text, &fds) || (fds.contains(&0) && syscall_waits_forever(&text))
            }
            Err(_) => {
                let wchan = fs::read_to_string(task.join("wchan")).unwrap_or_default();
                let sleeping = fs::read_to_string(task.join("stat")).is_ok_and(|st| {
                    st.rfind(')')
                        .and_then(|i| st[i + 1..].split_whitespace().next())
                        == Some("S")
                });
                let wchan = wchan.trim();
                sleeping
                    && match tty {
                        false => matches!(wchan, "pipe_read" | "anon_pipe_read"),
                        true => matches!(wchan, "n_tty_read" | "wait_woken"),
                    }
            }
        }
    })
}

/// Sends `signal` to `pid` if it is still the process that started at `start_time`.
pub fn signal_exact(pid: i32, start_time: u64, signal: i32) -> io::Result<bool> {
    // SAFETY: pidfd_open takes a pid and flags; it returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        let err = io::Error::last_os_error();
        return match err.raw_os_error() {
            Some(libc::ESRCH) => Ok(false),
            _ => Err(err),
        };
    }
    let fd = fd as i32;
    // The pidfd pins this process: if the start time still matches now, it is the one we mean.
    let same = stat(pid).is_some_and(|s| s.start_time == start_time);
    let result = if same {
        // SAFETY: fd is a pidfd we own; a null siginfo means "as kill(2) would".
        let rc = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                fd,
                signal,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        if rc == 0 {
            Ok(true)
        } else {
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::ESRCH) => Ok(false),
                _ => Err(err),
            }
        }
    } else {
        Ok(false)
    };
    // SAFETY: fd was returned by pidfd_open above and is closed once.
    unsafe { libc::close(fd) };
    result
}

/// Signals every member of the tree once. Returns how many were signalled.
pub fn signal_tree(root: &TreeRoot, signal: i32, scope: Option<&Scope>) -> usize {
    let targets = match scope {
        Some(scope) => members_linked(root, scope),
        None => members(root, &scan(), None),
    };
    let mut n = 0;
    for (pid, start) in targets {
        match signal_exact(pid, start, signal) {
            Ok(true) => n += 1,
            Ok(false) => {}
            Err(e) => tracing::warn!(pid, "cannot signal: {e}"),
        }
    }
    n
}

/// Signals every member of the tree but its root (a session's shell keeps running while the
/// command below it is stopped). Returns how many were signalled.
pub fn signal_descendants(root: &TreeRoot, signal: i32, scope: &Scope) -> usize {
    members_linked(root, scope)
        .into_iter()
        .filter(|(pid, _)| *pid != root.pid)
        .filter(|(pid, start)| signal_exact(*pid, *start, signal).unwrap_or(false))
        .count()
}

/// SIGKILLs the tree until no member is left (a member forking while it is killed is caught on
/// the next round). Returns the number of processes killed.
pub fn kill_tree(root: &TreeRoot, scope: Option<&Scope>) -> usize {
    let mut total = 0;
    for _ in 0..50 {
        let n = signal_tree(root, libc::SIGKILL, scope);
        if n == 0 {
            break;
        }
        total += n;
    }
    total
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
        assert_eq!((s.ppid, s.pgrp, s.start_time), (1, 1234, 98765));
        assert!(!is_zombie(line));
        assert!(is_zombie("7 (x) Z) Z 1 7 7 0"));
    }

    #[test]
    fn syscall_lines_of_a_blocked_read() {
        let read = format!(
            "{} 0x0 0x7ffd 0x1 0x0 0x0 0x0 0x7ffd 0x7f00",
            libc::SYS_read
        );
        assert!(syscall_reads(&read, &[0]));
        assert!(!syscall_reads(&read, &[3]));
        let read3 = format!(
            "{} 0xa 0x7ffd 0x1 0x0 0x0 0x0 0x7ffd 0x7f00",
            libc::SYS_read
        );
        assert!(syscall_reads(&read3, &[10]));
        assert!(!syscall_reads("running", &[0]));
        assert!(!syscall_reads("-1 0x7ffd 0x7f00", &[0]));
        let wait = format!("{} 0x0 0x0 0x0 0x0 0x0 0x0 0x7ffd 0x7f00", libc::SYS_wait4);
        assert!(!syscall_reads(&wait, &[0]));
    }

    #[test]
    fn syscall_lines_of_a_wait_without_timeout() {
        // python's REPL in readline: pselect6 with a NULL timeout (5th argument).
        let pselect = format!(
            "{} 0x1 0x7ffe14707460 0x0 0x0 0x0 0x0 0x7ffe 0x7fa4",
            libc::SYS_pselect6
        );
        assert!(syscall_waits_forever(&pselect));
        let timed = format!(
            "{} 0x1 0x7ffe14707460 0x0 0x0 0x7ffe1470 0x0 0x7ffe 0x7fa4",
            libc::SYS_pselect6
        );
        assert!(!syscall_waits_forever(&timed));
        let ppoll = format!("{} 0x7ffe 0x1 0x0 0x0 0x8 0x0 0x7ffe 0x7f", libc::SYS_ppoll);
        assert!(syscall_waits_forever(&ppoll));
        #[cfg(target_arch = "x86_64")]
        {
            let poll =
                |t: &str| format!("{} 0x7ffe 0x1 {t} 0x0 0x0 0x0 0x7ffe 0x7f", libc::SYS_poll);
            assert!(syscall_waits_forever(&poll("0xffffffffffffffff")));
            assert!(syscall_waits_forever(&poll("0xffffffff")));
            assert!(!syscall_waits_forever(&poll("0x1f4")));
        }
        let read = format!(
            "{} 0x0 0x7ffd 0x1 0x0 0x0 0x0 0x7ffd 0x7f00",
            libc::SYS_read
        );
        assert!(!syscall_waits_forever(&read));
        assert!(!syscall_waits_forever("running"));
    }

    #[test]
    fn members_follow_group_marker_and_descendants() {
        let p = |pid, ppid, pgrp, start_time| ProcStat {
            pid,
            ppid,
            pgrp,
            start_time,
        };
        let root = TreeRoot {
            pid: 10,
            start_time: 100,
            marker: "X=never-present".into(),
        };
        let procs = vec![
            p(1, 0, 1, 1),
            p(10, 5, 10, 100),  // root
            p(11, 10, 10, 101), // child
            p(12, 1, 10, 102),  // group member reparented to init
            p(13, 12, 13, 103), // its child in a new group
            p(20, 1, 20, 50),   // unrelated
        ];
        let m: Vec<i32> = members(&root, &procs, None).iter().map(|m| m.0).collect();
        assert_eq!(m, vec![10, 11, 12, 13]);
    }
}
