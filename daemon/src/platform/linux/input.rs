//! Whether a process is blocked reading a given pipe or terminal, from the kernel's state: it
//! has the pipe (or terminal) open (`/proc/PID/fd/N` links to it) and one of its threads sleeps
//! in `read`/`readv` on that descriptor (`/proc/PID/task/TID/syscall`), or waits in
//! `select`/`poll` with no timeout while it is its stdin. Where `syscall` is unreadable, a thread
//! sleeping (state `S`) in the pipe's or terminal's read (its `wchan`) counts.

use std::fs;

/// What a process waiting for input would be blocked reading.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A pipe, by inode (both ends share it): the stdin pipe the daemon holds.
    Pipe(u64),
    /// A terminal device, e.g. `/dev/pts/3`.
    Tty(String),
}

impl Source {
    /// What a `/proc/PID/fd/N` link to it reads.
    fn link(&self) -> String {
        match self {
            Source::Pipe(ino) => format!("pipe:[{ino}]"),
            Source::Tty(path) => path.clone(),
        }
    }
}

/// A thread of `pid` sleeps reading one of its descriptors open on `source`, or waits in
/// `select`/`poll` with no timeout while its stdin (fd 0) is `source`: what it waits for is
/// then most likely the answer (a REPL's line editor, a `select` on stdin).
/// The system call first, the descriptor only then: a process sleeping in anything else (most
/// are) costs a read of its threads' `syscall`, not a look at every descriptor it has.
pub fn blocked_on(pid: i32, source: &Source) -> bool {
    let link = source.link();
    let is_source = |fd: u64| {
        fs::read_link(format!("/proc/{pid}/fd/{fd}")).is_ok_and(|t| t.as_os_str() == link.as_str())
    };
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let tty = matches!(source, Source::Tty(_));
    let mut open_on: Option<Vec<u64>> = None;
    tasks.filter_map(|t| t.ok()).any(|t| {
        let task = t.path();
        match fs::read_to_string(task.join("syscall")) {
            Ok(text) => {
                syscall_read_fd(&text).is_some_and(is_source)
                    || (syscall_waits_forever(&text)
                        && waits_reading(pid, &text, 0)
                        && is_source(0))
            }
            Err(_) => {
                let fds = open_on.get_or_insert_with(|| fds_on(pid, &link));
                !fds.is_empty() && sleeping_in_read(&task, tty)
            }
        }
    })
}

/// Without `syscall` (a restricted kernel): the thread sleeps and its wait channel is the
/// pipe's or the terminal's read.
fn sleeping_in_read(task: &std::path::Path, tty: bool) -> bool {
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
#[cfg(test)]
fn syscall_reads(text: &str, fds: &[u64]) -> bool {
    syscall_read_fd(text).is_some_and(|fd| fds.contains(&fd))
}

/// The descriptor a `/proc/PID/task/TID/syscall` line says the thread sleeps reading.
fn syscall_read_fd(text: &str) -> Option<u64> {
    let mut fields = text.split_whitespace();
    // "running", or "-1 ..." (not in a syscall), parse as no read.
    let nr = fields.next()?.parse::<i64>().ok()?;
    let fd = fields.next()?;
    (nr == libc::SYS_read || nr == libc::SYS_readv)
        .then(|| hex(fd))
        .flatten()
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

/// Whether the `select`/`poll` a `/proc/PID/task/TID/syscall` line shows waits to read `fd`:
/// its descriptor set (or `pollfd` array) is read from the caller's memory. A `make -j`
/// waiting for its jobs in `pselect` on its jobserver, with the stdin pipe as its fd 0, waits
/// for no input.
fn waits_reading(pid: i32, text: &str, fd: u64) -> bool {
    let fields: Vec<&str> = text.split_whitespace().collect();
    let Some(nr) = fields.first().and_then(|nr| nr.parse::<i64>().ok()) else {
        return false;
    };
    let arg = |i: usize| fields.get(i + 1).and_then(|a| hex(a)).unwrap_or(0);
    let select = nr == libc::SYS_pselect6;
    #[cfg(target_arch = "x86_64")]
    let select = select || nr == libc::SYS_select;
    if select {
        let (nfds, readfds) = (arg(0), arg(1));
        if readfds == 0 || fd >= nfds {
            return false;
        }
        let mut word = [0u8; 8];
        let at = readfds + (fd / 64) * 8;
        return read_whole(pid, at, &mut word) && u64::from_ne_bytes(word) & (1 << (fd % 64)) != 0;
    }
    // poll and ppoll: an array of `struct pollfd { int fd; short events; short revents; }`.
    let (fds, nfds) = (arg(0), arg(1).min(256) as usize);
    let mut buf = vec![0u8; nfds * 8];
    read_whole(pid, fds, &mut buf)
        && buf.chunks_exact(8).any(|p| {
            let pfd = i32::from_ne_bytes([p[0], p[1], p[2], p[3]]);
            let events = i16::from_ne_bytes([p[4], p[5]]);
            pfd as i64 == fd as i64 && events & libc::POLLIN != 0
        })
}

/// All of `buf` read at `addr` of process `pid`'s memory.
fn read_whole(pid: i32, addr: u64, buf: &mut [u8]) -> bool {
    !buf.is_empty() && super::proc::read_memory(pid, addr, buf) == buf.len()
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_wait_counts_only_when_its_set_holds_the_descriptor() {
        let me = std::process::id() as i32;
        // select: fds 0 and 3 in the read set, or only 3.
        let with0: [u64; 1] = [0b1001];
        let without0: [u64; 1] = [0b1000];
        let line = |set: &[u64; 1]| {
            let p = set.as_ptr() as u64;
            format!(
                "{} 0x4 {p:#x} 0x0 0x0 0x0 0x0 0x7ffe 0x7f",
                libc::SYS_pselect6
            )
        };
        assert!(waits_reading(me, &line(&with0), 0));
        assert!(!waits_reading(me, &line(&without0), 0));
        assert!(waits_reading(me, &line(&without0), 3));
        // Beyond nfds: not in the set, whatever the memory says.
        assert!(!waits_reading(me, &line(&with0), 7));
        // ppoll: a make's jobserver and a child's pipe, then a REPL's stdin.
        let pollfds = |fds: &[(i32, i16)]| -> Vec<u8> {
            fds.iter()
                .flat_map(|(fd, ev)| {
                    let mut b = fd.to_ne_bytes().to_vec();
                    b.extend(ev.to_ne_bytes());
                    b.extend(0i16.to_ne_bytes());
                    b
                })
                .collect()
        };
        let poll_line = |arr: &[u8]| {
            let p = arr.as_ptr() as u64;
            format!(
                "{} {p:#x} {:#x} 0x0 0x0 0x8 0x0 0x7ffe 0x7f",
                libc::SYS_ppoll,
                arr.len() / 8
            )
        };
        let make = pollfds(&[(3, libc::POLLIN), (5, libc::POLLIN)]);
        assert!(!waits_reading(me, &poll_line(&make), 0));
        let repl = pollfds(&[(3, libc::POLLIN), (0, libc::POLLIN)]);
        assert!(waits_reading(me, &poll_line(&repl), 0));
        let out_only = pollfds(&[(0, libc::POLLOUT)]);
        assert!(!waits_reading(me, &poll_line(&out_only), 0));
        // Unreadable memory reads as no wait on it.
        let bad = format!("{} 0x1 0x8 0x0 0x0 0x0 0x0 0x7ffe 0x7f", libc::SYS_pselect6);
        assert!(!waits_reading(me, &bad, 0));
    }
}
