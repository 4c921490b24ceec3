//! What the end-to-end tests run as a command where no POSIX tools exist (Windows, Wine):
//!
//! - `out BYTES`: writes BYTES bytes to stdout, in lines of 64.
//! - `exit CODE`: says so on stderr, then exits with CODE.
//! - `tree FILE`: starts itself as `sleep` (a grandchild of the daemon), writes both pids to
//!   FILE (written whole, then renamed), then sleeps.
//! - `sleep [SECONDS]`: sleeps (for ever when no number is given).
//! - `echo`: answers each line read from stdin with `got: LINE` until end of file, then says
//!   `eof`.
//! - `alive PID…`: exits 0 when one of the processes still runs, 1 when none does.
//! - `time N PROGRAM ARG…`: runs PROGRAM N times, its output captured, and prints the median
//!   and the fastest wall time in milliseconds (what a direct start costs, for the benchmark).

use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    match arg(0) {
        "out" => out(arg(1).parse().unwrap_or(0)),
        "exit" => {
            eprintln!("exiting with {}", arg(1));
            // Any code the system has (259 on Windows too), not only a byte.
            std::process::exit(arg(1).parse::<i32>().unwrap_or(1))
        }
        "tree" => tree(arg(1)),
        "sleep" => {
            let secs = arg(1).parse().unwrap_or(u64::MAX / 4);
            std::thread::sleep(Duration::from_secs(secs));
            ExitCode::SUCCESS
        }
        "echo" => echo(),
        "alive" => alive(&args[1..]),
        "time" => time(arg(1).parse().unwrap_or(10), &args[2..]),
        other => {
            eprintln!(
                "cuba-test-helper: unknown command {other:?}: out, exit, tree, sleep, echo, alive"
            );
            ExitCode::from(2)
        }
    }
}

fn out(bytes: u64) -> ExitCode {
    let line = [b'x'; 63];
    let mut stdout = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let mut left = bytes;
    while left > 0 {
        let n = left.min(64) as usize;
        let written = match n {
            64 => stdout
                .write_all(&line)
                .and_then(|()| stdout.write_all(b"\n")),
            _ => stdout.write_all(&line[..n]),
        };
        if written.is_err() {
            return ExitCode::FAILURE;
        }
        left -= n as u64;
    }
    match stdout.flush() {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}

fn time(n: usize, command: &[String]) -> ExitCode {
    let Some((program, args)) = command.split_first() else {
        return ExitCode::from(2);
    };
    let mut ms = Vec::with_capacity(n);
    for _ in 0..n.max(1) {
        let at = std::time::Instant::now();
        if std::process::Command::new(program)
            .args(args)
            .output()
            .is_err()
        {
            return ExitCode::FAILURE;
        }
        ms.push(at.elapsed().as_secs_f64() * 1000.0);
    }
    ms.sort_by(f64::total_cmp);
    println!("median {:.2} ms, fastest {:.2} ms", ms[ms.len() / 2], ms[0]);
    ExitCode::SUCCESS
}

fn tree(file: &str) -> ExitCode {
    let Ok(me) = std::env::current_exe() else {
        return ExitCode::FAILURE;
    };
    let child = match std::process::Command::new(me).arg("sleep").spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("cannot start the grandchild: {e}");
            return ExitCode::FAILURE;
        }
    };
    let pids = format!("{} {}\n", std::process::id(), child.id());
    let part = format!("{file}.part");
    if std::fs::write(&part, &pids)
        .and_then(|()| std::fs::rename(&part, file))
        .is_err()
    {
        return ExitCode::FAILURE;
    }
    println!("tree {}", pids.trim());
    std::thread::sleep(Duration::from_secs(u64::MAX / 4));
    ExitCode::SUCCESS
}

fn echo() -> ExitCode {
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        println!("got: {}", line.trim_end());
    }
    println!("eof");
    ExitCode::SUCCESS
}

/// Whether any of `pids` runs: on Windows by opening it and reading its exit code; elsewhere
/// by signal 0 through `kill -0`.
fn alive(pids: &[String]) -> ExitCode {
    let any = pids
        .iter()
        .filter_map(|p| p.parse::<u32>().ok())
        .any(running);
    match any {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    }
}

#[cfg(windows)]
fn running(pid: u32) -> bool {
    // Opened and asked for its exit code: STILL_ACTIVE while it runs.
    extern "system" {
        fn OpenProcess(access: u32, inherit: i32, pid: u32) -> *mut std::ffi::c_void;
        fn GetExitCodeProcess(process: *mut std::ffi::c_void, code: *mut u32) -> i32;
        fn CloseHandle(handle: *mut std::ffi::c_void) -> i32;
    }
    const PROCESS_QUERY_LIMITED_INFORMATION: u32 = 0x1000;
    const STILL_ACTIVE: u32 = 259;
    // SAFETY: plain calls with a handle closed before returning.
    unsafe {
        let h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid);
        if h.is_null() {
            return false;
        }
        let mut code = 0u32;
        let ok = GetExitCodeProcess(h, &mut code);
        CloseHandle(h);
        ok != 0 && code == STILL_ACTIVE
    }
}

#[cfg(not(windows))]
fn running(pid: u32) -> bool {
    std::process::Command::new("kill")
        .args(["-0", &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success())
}
