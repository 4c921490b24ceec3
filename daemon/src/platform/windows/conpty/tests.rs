//! Under Wine (`scripts/windows-test`) and on Windows.

use std::io::{Read, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use windows_sys::Win32::Foundation::WAIT_OBJECT_0;
use windows_sys::Win32::System::Threading::WaitForSingleObject;

use super::super::job::tests::HELPER;
use super::super::job::{Job, Limits};
use super::*;
use crate::platform::win_shell::{command_line, Args};

/// What the console shows, read on a thread of its own (the pipe's reads block).
struct Screen {
    rx: mpsc::Receiver<Vec<u8>>,
    seen: String,
    ended: bool,
}

impl Screen {
    fn of(pty: &Pty) -> Screen {
        let mut out = pty.output.try_clone().expect("output");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = out.read(&mut buf) {
                if tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        Screen {
            rx,
            seen: String::new(),
            ended: false,
        }
    }

    /// Waits up to 20 s for `text` on the screen (escape sequences and all).
    fn wait_for(&mut self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.seen.contains(text) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(bytes) => self.seen.push_str(&String::from_utf8_lossy(&bytes)),
                Err(_) => panic!("no {text:?} within 20 s; the screen: {:?}", self.seen),
            }
        }
    }

    /// Waits up to 20 s for the end of the output.
    fn wait_end(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.ended {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(bytes) => self.seen.push_str(&String::from_utf8_lossy(&bytes)),
                Err(mpsc::RecvTimeoutError::Disconnected) => self.ended = true,
                Err(mpsc::RecvTimeoutError::Timeout) => panic!("the output did not end"),
            }
        }
    }
}

fn exited(child: &PtyChild) -> bool {
    // SAFETY: the process handle lives in `child`.
    unsafe { WaitForSingleObject(child.process.as_raw_handle(), 20_000) == WAIT_OBJECT_0 }
}

fn helper_line(role: &str) -> (String, Vec<(String, String)>) {
    let exe = std::env::current_exe().expect("test binary");
    let args = Args::Quoted(
        ["--exact", HELPER, "--nocapture", "--test-threads=1", "-q"]
            .map(String::from)
            .to_vec(),
    );
    let mut env: Vec<(String, String)> = std::env::vars().collect();
    env.push(("CUBA_JOB_HELPER".into(), role.into()));
    (command_line(&exe.to_string_lossy(), &args), env)
}

#[test]
fn a_console_is_made_and_closed_and_its_output_ends() {
    // (Resizing is in the test of a program on the console: Wine 8 answers E_NOTIMPL.)
    let mut pty = Pty::open(80, 25).expect("console");
    let mut screen = Screen::of(&pty);
    pty.close();
    assert!(
        pty.resize(80, 25).is_err(),
        "a closed console cannot be resized"
    );
    screen.wait_end();
}

#[test]
#[ignore = "Wine 8 makes a pseudo console but does not attach a child to it; run on Windows"]
fn a_shell_on_a_console_answers_its_input_and_its_output_ends_after_it() {
    let job = Job::new(Limits::default()).expect("job");
    let mut pty = Pty::open(80, 25).expect("console");
    let mut screen = Screen::of(&pty);
    let line = command_line("cmd.exe", &Args::Raw("/d /q".into()));
    let child = pty.spawn(&line, None, None, &job).expect("spawn");
    // Enter is CR, as the keys map it.
    pty.input.write_all(b"echo hi there\r").expect("type");
    screen.wait_for("hi there");
    pty.input.write_all(b"exit 7\r").expect("type");
    assert!(exited(&child), "cmd did not exit");
    pty.close();
    screen.wait_end();
}

#[test]
#[ignore = "Wine 8 makes a pseudo console but does not attach a child to it; run on Windows"]
fn a_program_sees_its_console_resized() {
    let job = Job::new(Limits::default()).expect("job");
    let mut pty = Pty::open(100, 30).expect("console");
    let mut screen = Screen::of(&pty);
    let (line, env) = helper_line("size");
    let child = pty.spawn(&line, None, Some(&env), &job).expect("spawn");
    screen.wait_for("size 100x30");
    pty.resize(120, 40).expect("resize");
    pty.input.write_all(b"\r").expect("type");
    screen.wait_for("size 120x40");
    job.kill(1).expect("kill");
    assert!(exited(&child));
}

#[test]
#[ignore = "Wine 8 makes a pseudo console but does not attach a child to it; run on Windows"]
fn ctrl_c_typed_on_the_console_interrupts_its_program() {
    let job = Job::new(Limits::default()).expect("job");
    let mut pty = Pty::open(80, 25).expect("console");
    let _screen = Screen::of(&pty);
    let (line, env) = helper_line("sleep");
    let child = pty.spawn(&line, None, Some(&env), &job).expect("spawn");
    pty.input.write_all(b"\x03").expect("type");
    let interrupted = exited(&child);
    let _ = job.kill(1);
    assert!(interrupted, "Ctrl-C did not end the program");
}
