//! What checking every exec costs: two private `cubad`s, one with `exec_checks = "off"` and one
//! with them on, given the same work in turns (so a machine that slows down slows both):
//! - `exec`: a program under each daemon that starts `/bin/true` 2 000 times (a shell's way:
//!   `fork` then `execve`; and a build tool's way: `posix_spawn`), timing each start to its end;
//!   the medians, and the difference: the added cost of one exec;
//! - `echo`: `run "echo hi"` from a client, 200 times: what a model's call pays;
//! - `build`: `make -s -j2` of a generated tree of 1 700 targets (5 100 programs).
//!
//! `cargo bench -p cuba-daemon --bench exec_checks` (`-- exec` for one section; `-- --rounds 5`).

#![allow(clippy::unwrap_used)]

#[cfg(target_os = "linux")]
#[allow(dead_code)]
mod common;

fn main() {
    #[cfg(target_os = "linux")]
    linux::main();
    #[cfg(not(target_os = "linux"))]
    println!("exec checks are Linux-only: nothing to measure here");
}

/// Everything measured: seccomp user notification is Linux's.
#[cfg(target_os = "linux")]
mod linux {

    use std::path::Path;
    use std::time::{Duration, Instant};

    use cuba_protocol::client::Client;
    use cuba_protocol::{RunRequest, WaitReason, WaitSpec};

    use super::common::{ms, spawn_req, stats, via_run, Daemon};

    /// Starts timed per round of `exec`.
    const EXECS: usize = 2000;
    /// `run "echo hi"` per round.
    const ECHOES: usize = 200;
    /// Targets of the generated build; each runs three programs.
    const TARGETS: usize = 1700;

    pub fn main() {
        let args: Vec<String> = std::env::args().skip(1).collect();
        // Under a daemon: the timed loop itself.
        if let Some(i) = args.iter().position(|a| a == "--exec-loop") {
            let how = args.get(i + 1).map(String::as_str).unwrap_or("fork");
            exec_loop(how, EXECS);
            return;
        }
        if args.iter().any(|a| a == "--floor-loop") {
            floor_loop();
            return;
        }
        let rounds = args
            .iter()
            .position(|a| a == "--rounds")
            .and_then(|i| args.get(i + 1)?.parse().ok())
            .unwrap_or(5usize);
        let picked: Vec<&String> = args
            .iter()
            .filter(|a| !a.starts_with('-') && a.parse::<usize>().is_err())
            .collect();
        let run = |name: &str| picked.is_empty() || picked.iter().any(|p| *p == name);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut off = Daemon::start(&[("CUBA_EXEC_EXEC_CHECKS", "off")]);
            let mut on = Daemon::start(&[("CUBA_EXEC_EXEC_CHECKS", "on")]);
            let (c_off, c_on) = (off.connect().await, on.connect().await);
            let status = c_on.status().await.unwrap();
            let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
            println!(
                "exec checks bench: cubad {}, {} CPUs, loadavg {}; checks: {}",
                c_on.welcome().daemon_version,
                std::thread::available_parallelism().map_or(0, |n| n.get()),
                load.split(' ').take(3).collect::<Vec<_>>().join(" "),
                status.exec_checks,
            );
            if run("exec") {
                for how in ["fork", "spawn"] {
                    exec(&c_off, &c_on, how, rounds).await;
                }
            }
            if run("echo") {
                echo(&c_off, &c_on, rounds).await;
            }
            if run("build") {
                build(&c_off, &c_on, rounds).await;
            }
        });
    }

    /// In the child: starts `/bin/true` `n` times the way `how` says, and prints the median and
    /// mean of a start-to-end, in microseconds.
    fn exec_loop(how: &str, n: usize) {
        let mut times = Vec::with_capacity(n);
        let path = c"/bin/true";
        let argv = [path.as_ptr(), std::ptr::null()];
        for _ in 0..n {
            let t = Instant::now();
            match how {
                "spawn" => {
                    let s = std::process::Command::new("/bin/true").status().unwrap();
                    assert!(s.success());
                }
                _ => {
                    // SAFETY: the child only calls execv and _exit.
                    let pid = unsafe { libc::fork() };
                    if pid == 0 {
                        // SAFETY: a NUL-terminated path and a NULL-terminated argv.
                        unsafe {
                            libc::execv(path.as_ptr(), argv.as_ptr());
                            libc::_exit(127);
                        }
                    }
                    let mut st = 0;
                    // SAFETY: waits for the child forked above.
                    unsafe { libc::waitpid(pid, &mut st, 0) };
                    assert_eq!(st, 0, "true failed");
                }
            }
            times.push(t.elapsed());
        }
        let [median, _, mean] = stats(times);
        println!("{:.1} {:.1}", micros(median), micros(mean));
    }

    fn micros(d: Duration) -> f64 {
        d.as_secs_f64() * 1e6
    }

    /// Runs `command` and returns its whole output.
    async fn output(c: &Client, command: &str) -> String {
        let running = c
            .run(RunRequest {
                spawn: spawn_req(command),
                wait: WaitSpec::exit(600_000, 64 * 1024),
            })
            .await
            .unwrap();
        let w = running.result().await.unwrap();
        assert_eq!(w.reason, WaitReason::Exited, "{w:?}");
        let exit = w.process.exit_code;
        let bytes: Vec<u8> = w
            .output
            .chunks
            .iter()
            .flat_map(|c| c.data.clone())
            .collect();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        assert_eq!(exit, Some(0), "{command}: {text}");
        text
    }

    fn median(mut v: Vec<f64>) -> f64 {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }

    /// The last number of each line a command printed: the median of its loop.
    async fn loop_median(c: &Client, cmd: &str) -> f64 {
        let line = output(c, cmd).await;
        line.split_whitespace().next().unwrap().parse().unwrap()
    }

    async fn exec(off: &Client, on: &Client, how: &str, rounds: usize) {
        let me = std::env::current_exe().unwrap();
        let cmd = format!("'{}' --exec-loop {how}", me.display());
        let floor = format!("'{}' --floor-loop", me.display());
        let (mut a, mut b, mut f) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            // In turns, each first every other round: a machine that warms up or slows down
            // over a round favours neither.
            let order: [(&Client, &str, &mut Vec<f64>); 2] =
                [(off, &cmd, &mut a), (on, &cmd, &mut b)];
            let mut order = order;
            if round % 2 == 1 {
                order.reverse();
            }
            for (c, cmd, into) in order {
                into.push(loop_median(c, cmd).await);
            }
            if how == "fork" {
                f.push(loop_median(off, &floor).await);
            }
        }
        let (a, b) = (median(a), median(b));
        println!(
        "exec ({how}, {EXECS} × /bin/true, median of {rounds} rounds' medians): off {a:.1} µs, \
         on {b:.1} µs, added {:.1} µs per exec",
        b - a
    );
        if !f.is_empty() {
            let f = median(f);
            println!(
            "  the kernel's notification alone (a bare supervisor that lets every exec go on at \
             once, under the daemon without checks): {f:.1} µs, added {:.1} µs",
            f - a
        );
        }
    }

    /// Under a daemon without checks: the `fork` loop in a child under a filter of its own whose
    /// every exec a thread here lets go on at once, unread. What the kernel's round trip costs on
    /// this machine, whatever the checks do.
    fn floor_loop() {
        let mut fds = [0; 2];
        // SAFETY: socketpair fills both descriptors.
        assert_eq!(
            unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_DGRAM, 0, fds.as_mut_ptr()) },
            0
        );
        // SAFETY: the child installs a filter, sends a descriptor and runs the loop.
        let child = unsafe { libc::fork() };
        if child == 0 {
            let listener = install_filter();
            send_fd(fds[1], listener);
            // SAFETY: its own copy; the parent has one.
            unsafe { libc::close(listener) };
            exec_loop("fork", EXECS);
            // SAFETY: ends the child without running the parent's exit handlers.
            unsafe { libc::_exit(0) };
        }
        let listener = recv_fd(fds[0]);
        loop {
            let mut p = libc::pollfd {
                fd: listener,
                events: libc::POLLIN,
                revents: 0,
            };
            // A poll with no timeout would read to the daemon as a wait for input.
            // SAFETY: one pollfd.
            if unsafe { libc::poll(&mut p, 1, 1000) } == 0 {
                continue;
            }
            if p.revents & libc::POLLIN == 0 {
                break;
            }
            // SAFETY: a zeroed seccomp_notif for the kernel to fill.
            let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
            // SAFETY: as the ioctl requires.
            if unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_RECV as _, &mut n) } != 0 {
                continue;
            }
            let resp = libc::seccomp_notif_resp {
                id: n.id,
                val: 0,
                error: 0,
                flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
            };
            // SAFETY: as the ioctl requires.
            unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND as _, &resp) };
        }
        let mut st = 0;
        // SAFETY: waits for the child forked above.
        unsafe { libc::waitpid(child, &mut st, 0) };
    }

    /// A filter that turns `execve` into a notification: its listener.
    fn install_filter() -> i32 {
        let f = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter {
            code: code as u16,
            jt,
            jf,
            k,
        };
        let mut prog = [
            f(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 0),
            f(
                libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
                0,
                1,
                libc::SYS_execve as u32,
            ),
            f(
                libc::BPF_RET | libc::BPF_K,
                0,
                0,
                libc::SECCOMP_RET_USER_NOTIF,
            ),
            f(libc::BPF_RET | libc::BPF_K, 0, 0, libc::SECCOMP_RET_ALLOW),
        ];
        let fprog = libc::sock_fprog {
            len: prog.len() as u16,
            filter: prog.as_mut_ptr(),
        };
        // SAFETY: prctl and seccomp with a filter that lives across the call.
        unsafe {
            libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
            let fd = libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
                &fprog as *const libc::sock_fprog,
            );
            assert!(fd >= 0, "seccomp: {}", std::io::Error::last_os_error());
            fd as i32
        }
    }

    fn send_fd(sock: i32, fd: i32) {
        use std::os::unix::net::UnixDatagram;
        // SAFETY: the socketpair's end, owned here from now on.
        let s = unsafe { <UnixDatagram as std::os::fd::FromRawFd>::from_raw_fd(sock) };
        let mut buf = [0u64; 4];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut cmsg = [0u64; 4];
        // SAFETY: a message with one SCM_RIGHTS descriptor in an aligned buffer.
        unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = cmsg.as_mut_ptr().cast();
            msg.msg_controllen = libc::CMSG_SPACE(4) as _;
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(4) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<i32>(), fd);
            assert!(libc::sendmsg(std::os::fd::AsRawFd::as_raw_fd(&s), &msg, 0) >= 0);
        }
    }

    fn recv_fd(sock: i32) -> i32 {
        let mut buf = [0u8; 8];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: 8,
        };
        let mut cmsg = [0u64; 4];
        // SAFETY: receives one SCM_RIGHTS descriptor into an aligned buffer.
        unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = cmsg.as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of_val(&cmsg) as _;
            assert!(libc::recvmsg(sock, &mut msg, 0) >= 0);
            let c = libc::CMSG_FIRSTHDR(&msg);
            assert!(!c.is_null(), "no descriptor received");
            std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<i32>())
        }
    }

    async fn echo(off: &Client, on: &Client, rounds: usize) {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            for (c, into) in [(off, &mut a), (on, &mut b)] {
                for _ in 0..ECHOES / rounds {
                    into.push(via_run(c, "echo hi").await);
                }
            }
        }
        let ([a50, a90, _], [b50, b90, _]) = (stats(a), stats(b));
        println!(
            "run \"echo hi\" ({ECHOES}): off median {} p90 {}, on median {} p90 {}",
            ms(a50),
            ms(a90),
            ms(b50),
            ms(b90)
        );
    }

    /// A tree of `TARGETS` targets, each of three recipe lines that make runs without a shell.
    fn write_tree(dir: &Path) {
        use std::fmt::Write as _;
        let mut mk = String::from("all:");
        for i in 0..TARGETS {
            let _ = write!(mk, " t{i}");
        }
        mk.push_str("\n\n");
        for i in 0..TARGETS {
            let _ = write!(
                mk,
                "t{i}:\n\t@touch out/{i}\n\t@cp out/{i} out/{i}.o\n\t@true {i}\n"
            );
        }
        mk.push_str(".PHONY: all");
        for i in 0..TARGETS {
            let _ = write!(mk, " t{i}");
        }
        mk.push('\n');
        std::fs::write(dir.join("Makefile"), mk).unwrap();
        std::fs::create_dir_all(dir.join("out")).unwrap();
    }

    async fn build(off: &Client, on: &Client, rounds: usize) {
        let dir = tempfile::tempdir().unwrap();
        write_tree(dir.path());
        let cmd = format!("make -s -j2 -C '{}'", dir.path().display());
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            for (c, into) in [(off, &mut a), (on, &mut b)] {
                let t = Instant::now();
                output(c, &cmd).await;
                into.push(t.elapsed().as_secs_f64());
            }
        }
        let show = |v: &[f64]| {
            v.iter()
                .map(|s| format!("{s:.2}"))
                .collect::<Vec<_>>()
                .join(" / ")
        };
        let (ma, mb) = (median(a.clone()), median(b.clone()));
        println!(
        "build (make -s -j2, {TARGETS} targets, {} programs): off {} s, on {} s; median {:+.1} %",
        TARGETS * 3,
        show(&a),
        show(&b),
        (mb / ma - 1.0) * 100.0
    );
    }
}
