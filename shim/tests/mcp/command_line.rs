//! `cuba-exec` run by a person: `--help` and `--version` answer, an unknown argument is a usage
//! error, on a terminal it says what it is instead of waiting in silence, and input that ends
//! before a client said hello ends it quietly (no error, no backtrace).

use crate::common;

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::time::Duration;

fn shim() -> Command {
    let mut c = Command::new(common::shim_bin());
    c.env("RUST_BACKTRACE", "1");
    c
}

#[test]
fn help_and_version_answer_and_a_bad_argument_is_a_usage_error() {
    let help = shim().arg("--help").output().expect("run cuba-exec");
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(
        text.contains("MCP server") && text.contains("cubactl setup"),
        "{text}"
    );
    let version = shim().arg("--version").output().expect("run cuba-exec");
    let text = String::from_utf8_lossy(&version.stdout);
    assert!(
        version.status.success() && text.starts_with("cuba-exec "),
        "{text}"
    );
    assert!(text.contains(&format!("protocol {}", cuba_protocol::PROTOCOL_VERSION)));
    let bad = shim().arg("--bogus").output().expect("run cuba-exec");
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("unknown argument \"--bogus\"") && err.contains("Usage:"),
        "{err}"
    );
}

#[test]
fn input_that_ends_before_hello_ends_it_quietly() {
    let out = shim().stdin(Stdio::null()).output().expect("run cuba-exec");
    assert!(out.status.success(), "{:?}", out.status);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.is_empty(), "said: {err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn on_a_terminal_it_says_what_it_is() {
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty writes two descriptors; no name, termios or size is asked for.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, 0, "openpty");
    // SAFETY: the descriptors openpty just made, owned by nothing else.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let mut child = shim()
        .stdin(Stdio::from(slave))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start cuba-exec");
    let mut stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 512];
        while let Ok(n) = stderr.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
            if seen.contains(&b'\n') {
                break;
            }
        }
        let _ = tx.send(String::from_utf8_lossy(&seen).into_owned());
    });
    let said = rx.recv_timeout(Duration::from_secs(30));
    let _ = child.kill();
    let _ = child.wait();
    drop(master);
    let said = said.expect("no notice within 30 s");
    assert!(
        said.contains("is an MCP server") && said.contains("cubactl setup"),
        "{said}"
    );
}
