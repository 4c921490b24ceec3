//! Under Wine (`scripts/windows-test`) and on Windows. The helper processes are this test
//! binary run again with `CUBA_JOB_HELPER` set (small programs of our own, not shell tools).

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use windows_sys::Win32::Foundation::{CloseHandle, WAIT_OBJECT_0};
use windows_sys::Win32::System::Threading::{
    OpenProcess, WaitForSingleObject, PROCESS_SYNCHRONIZE,
};

use super::*;

/// The test that, run with `CUBA_JOB_HELPER`, is a helper process.
pub(crate) const HELPER: &str = "platform::windows::job::tests::helper";

/// This test binary as helper `role`.
fn helper_cmd(role: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().expect("test binary"));
    cmd.args(["--exact", HELPER, "--nocapture", "--test-threads=1", "-q"])
        .env("CUBA_JOB_HELPER", role)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    cmd
}

/// The helper roles; a no-op when run as a test.
#[test]
fn helper() {
    let Ok(role) = std::env::var("CUBA_JOB_HELPER") else {
        return;
    };
    match role.as_str() {
        "sleep" => std::thread::sleep(Duration::from_secs(60)),
        "exit259" => std::process::exit(259),
        // Its console's size, again after each line it reads.
        "size" => {
            let mut line = String::new();
            loop {
                println!("size {}", console_size());
                line.clear();
                if std::io::stdin().read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
            }
        }
        // Starts a grandchild, says its pid (or that it could not), then waits.
        "tree" => {
            match helper_cmd("sleep").stdout(Stdio::null()).spawn() {
                Ok(c) => println!("grandchild {}", c.id()),
                Err(e) => println!("refused {e}"),
            }
            std::thread::sleep(Duration::from_secs(60));
        }
        other => panic!("unknown helper role {other}"),
    }
    std::process::exit(0);
}

/// `COLSxROWS` of this process's console window.
fn console_size() -> String {
    use windows_sys::Win32::System::Console::{
        GetConsoleScreenBufferInfo, GetStdHandle, CONSOLE_SCREEN_BUFFER_INFO, STD_OUTPUT_HANDLE,
    };
    // SAFETY: a plain-data struct the call fills in; the standard handle is this process's.
    let mut info: CONSOLE_SCREEN_BUFFER_INFO = unsafe { std::mem::zeroed() };
    let ok = unsafe { GetConsoleScreenBufferInfo(GetStdHandle(STD_OUTPUT_HANDLE), &mut info) };
    if ok == 0 {
        return "unknown".into();
    }
    let w = info.srWindow;
    format!("{}x{}", w.Right - w.Left + 1, w.Bottom - w.Top + 1)
}

/// The first line the helper prints after the test harness's own lines.
fn said(child: &mut Child) -> String {
    let out = child.stdout.take().expect("piped");
    for line in BufReader::new(out).lines() {
        let line = line.expect("helper output");
        if line.starts_with("grandchild ") || line.starts_with("refused ") {
            return line;
        }
    }
    panic!("the helper said nothing");
}

/// Waits up to 10 s for process `pid` to be gone; true when it is.
fn gone(pid: u32) -> bool {
    // SAFETY: plain values; a null handle means the process is already gone.
    let h = unsafe { OpenProcess(PROCESS_SYNCHRONIZE, 0, pid) };
    if h.is_null() {
        return true;
    }
    // SAFETY: a valid handle, closed right after.
    let waited = unsafe { WaitForSingleObject(h, 10_000) };
    unsafe { CloseHandle(h) };
    waited == WAIT_OBJECT_0
}

#[test]
fn output_and_exit_codes_are_the_childs_and_259_is_one_of_them() {
    let job = Job::new(Limits::default()).expect("job");
    let mut cmd = Command::new("cmd.exe");
    cmd.raw_arg(r#"/d /s /c "echo hi& exit 3""#)
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    let mut child = job.spawn(&mut cmd, 0).expect("spawn");
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("piped")
        .read_to_string(&mut out)
        .expect("read");
    assert_eq!(out.trim_end(), "hi");
    assert_eq!(child.wait().expect("wait").code(), Some(3));

    let job = Job::new(Limits::default()).expect("job");
    let mut child = job.spawn(&mut helper_cmd("exit259"), 0).expect("spawn");
    assert_eq!(child.wait().expect("wait").code(), Some(259));
}

#[test]
fn a_killed_job_takes_the_whole_tree() {
    let job = Job::new(Limits::default()).expect("job");
    let mut child = job.spawn(&mut helper_cmd("tree"), 0).expect("spawn");
    let line = said(&mut child);
    let grandchild: u32 = line
        .strip_prefix("grandchild ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    let before = job.usage().expect("usage");
    assert_eq!(before.active, 2, "{before:?}");
    job.kill(1).expect("kill");
    assert_eq!(child.wait().expect("wait").code(), Some(1));
    assert!(gone(grandchild), "the grandchild outlived its job");
    let deadline = Instant::now() + Duration::from_secs(10);
    while job.usage().expect("usage").active > 0 {
        assert!(Instant::now() < deadline, "the job still has processes");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn closing_the_job_kills_its_tree() {
    let job = Job::new(Limits::default()).expect("job");
    let mut child = job.spawn(&mut helper_cmd("tree"), 0).expect("spawn");
    let line = said(&mut child);
    let grandchild: u32 = line
        .strip_prefix("grandchild ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    drop(job);
    assert!(gone(child.id()), "the child outlived its closed job");
    assert!(gone(grandchild), "the grandchild outlived its closed job");
    let _ = child.wait();
}

#[test]
#[ignore = "Wine 8 accepts a job's process limit but does not enforce it; run on Windows"]
fn the_process_limit_refuses_a_start_beyond_it() {
    let job = Job::new(Limits {
        processes: Some(1),
        memory: None,
    })
    .expect("job");
    let mut child = job.spawn(&mut helper_cmd("tree"), 0).expect("spawn");
    let line = said(&mut child);
    job.kill(1).expect("kill");
    let _ = child.wait();
    assert!(line.starts_with("refused "), "{line}");
}
