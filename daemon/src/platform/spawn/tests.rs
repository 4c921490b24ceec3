#![allow(clippy::unwrap_used)]

use std::fs::File;
use std::io::Read;
use std::os::fd::OwnedFd;

use super::*;

/// Starts `cmd` with stdin from /dev/null and stdout+stderr into a pipe; its exit status and
/// output.
pub(crate) fn capture(cmd: Spawn) -> (i32, String) {
    capture_by(cmd, Spawn::start)
}

/// As [`capture`], started by `start` (e.g. the fallback, [`Spawn::start_std`]).
pub(crate) fn capture_by(
    mut cmd: Spawn,
    start: impl FnOnce(Spawn) -> std::io::Result<i32>,
) -> (i32, String) {
    let (r, w) = crate::platform::pipe::pipe().unwrap();
    let null = OwnedFd::from(File::open("/dev/null").unwrap());
    cmd.stdio(null, w.try_clone().unwrap(), w);
    let pid = start(cmd).unwrap();
    let mut text = String::new();
    File::from(r).read_to_string(&mut text).unwrap();
    let mut status = 0;
    // SAFETY: waitpid on the child just started.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    (libc::WEXITSTATUS(status), text)
}

fn sh(script: &str) -> Spawn {
    let mut cmd = Spawn::new("sh");
    cmd.arg("-c").arg(script);
    cmd.env(vec![
        ("PATH".into(), "/usr/bin:/bin".into()),
        ("X".into(), "1".into()),
    ]);
    cmd
}

#[test]
fn a_child_gets_its_arguments_environment_directory_and_group() {
    let mut cmd = sh("echo \"$0 $X\"; pwd; env | wc -l; ps -o pgid= -p $$; echo $$");
    cmd.current_dir(Path::new("/tmp")).group(Group::Own);
    let (status, text) = capture(cmd);
    assert_eq!(status, 0, "{text}");
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    assert_eq!(lines[0], "sh 1");
    assert_eq!(lines[1], "/tmp");
    // PATH, X, and what sh itself sets (PWD, maybe SHLVL and _).
    assert!(lines[2].parse::<u32>().unwrap() <= 5, "{text}");
    assert_eq!(lines[3], lines[4], "it leads a group of its own: {text}");
}

#[test]
fn a_child_starts_with_default_signals_and_an_empty_mask() {
    // The test harness, like the daemon, ignores SIGPIPE; the child must not.
    let (status, text) = capture(sh("grep -E '^(SigIgn|SigBlk):' /proc/self/status"));
    assert_eq!(status, 0, "{text}");
    for line in text.lines() {
        let mask = line.split_whitespace().nth(1).unwrap();
        assert!(mask.chars().all(|c| c == '0'), "{text}");
    }
}

/// A hook that writes `text` to the child's stdout (set before hooks run): async-signal-safe.
fn say(text: &'static [u8]) -> Hook {
    Box::new(move || {
        // SAFETY: write(2) of a static buffer to the child's own descriptor 1.
        let n = unsafe { libc::write(1, text.as_ptr().cast(), text.len()) };
        if n == text.len() as isize {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    })
}

#[test]
fn hooks_run_in_order_and_a_failing_one_fails_the_start() {
    let mut cmd = sh("echo exec");
    cmd.hook(say(b"first ")).hook(say(b"second "));
    assert_eq!(capture(cmd), (0, "first second exec\n".into()));

    // A failing hook: its error is the start's, and neither later hooks nor the exec run.
    let (r, w) = crate::platform::pipe::pipe().unwrap();
    let null = OwnedFd::from(File::open("/dev/null").unwrap());
    let mut cmd = sh("echo exec");
    cmd.stdio(null, w.try_clone().unwrap(), w);
    cmd.hook(say(b"first "))
        .hook(Box::new(|| {
            Err(std::io::Error::from_raw_os_error(libc::EACCES))
        }))
        .hook(say(b"third "));
    let err = cmd.start().unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EACCES));
    let mut text = String::new();
    File::from(r).read_to_string(&mut text).unwrap();
    assert_eq!(text, "first ");
}

#[test]
fn a_missing_program_or_directory_is_an_error_and_leaves_no_child() {
    let err = Spawn::new("/nonexistent/program").start().unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
    let mut cmd = sh("exit 0");
    cmd.current_dir(Path::new("/nonexistent"));
    assert_eq!(cmd.start().unwrap_err().raw_os_error(), Some(libc::ENOENT));
    let mut cmd = sh("exit 0");
    cmd.arg("a\0b");
    assert_eq!(
        cmd.start().unwrap_err().kind(),
        std::io::ErrorKind::InvalidInput
    );
}

#[test]
fn the_fallback_start_gives_the_same_child() {
    // What runs where the kernel has no clone3.
    let (r, w) = crate::platform::pipe::pipe().unwrap();
    let null = OwnedFd::from(File::open("/dev/null").unwrap());
    let mut cmd = sh("echo \"$0 $X\"; pwd; ps -o pgid= -p $$; echo $$");
    cmd.current_dir(Path::new("/tmp"))
        .group(Group::Own)
        .stdio(null, w.try_clone().unwrap(), w);
    let pid = cmd.start_std().unwrap();
    let mut text = String::new();
    File::from(r).read_to_string(&mut text).unwrap();
    // SAFETY: waitpid on the child just started.
    assert_eq!(unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) }, pid);
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    assert_eq!(&lines[..2], ["sh 1", "/tmp"], "{text}");
    assert_eq!(lines[2], lines[3], "it leads a group of its own: {text}");
    let mut cmd = sh("exit 0");
    cmd.hook(Box::new(|| {
        Err(std::io::Error::from_raw_os_error(libc::EACCES))
    }));
    assert_eq!(
        cmd.start_std().unwrap_err().raw_os_error(),
        Some(libc::EACCES)
    );
}
