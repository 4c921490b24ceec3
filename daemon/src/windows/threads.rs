//! The threads of a command: one per output pipe (or the console's output), one writing its
//! input, one waiting for its exit. Threads, not the runtime: an anonymous pipe on Windows
//! cannot be waited on asynchronously, and a blocking read per pipe is what the system offers.
//! Each only appends to the record and publishes the change; requests read it on the runtime.

use std::io::{Read, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cuba_protocol::{now_ms, ProcState, Stream};

use super::table::{set_usage, Rec, Stop};

/// After the exit, how long the pipes may take to say end of file before the exit is published
/// anyway (a process it left behind holds them).
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(250);
/// Stack of each thread: they hold one read buffer, on the heap.
const THREAD_STACK: usize = 64 * 1024;
const READ_BUF: usize = 64 * 1024;

pub fn thread(name: &str, f: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(name.to_string())
        .stack_size(THREAD_STACK)
        .spawn(f)
        .map(drop)
}

/// Reads one pipe to its end into the record (and its screen, on a terminal).
pub fn drain(rec: &Rec, mut pipe: Box<dyn Read + Send>, stream: Stream, done: &mpsc::Sender<()>) {
    let mut buf = vec![0u8; READ_BUF];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                {
                    let mut data = rec.lock();
                    data.output.append(stream, &buf[..n]);
                    if let Some(screen) = data.screen.as_mut() {
                        screen.feed(&buf[..n]);
                    }
                    data.last_output = Instant::now();
                    data.moved_on();
                }
                rec.notify();
            }
        }
    }
    let _ = done.send(());
}

/// Writes what the requests queue to the stdin pipe; closes it on `None` or when the record
/// goes.
pub fn feed(stdin: &std::fs::File, rx: &mpsc::Receiver<Option<Vec<u8>>>) {
    let mut stdin = stdin;
    while let Ok(Some(data)) = rx.recv() {
        if stdin.write_all(&data).is_err() {
            break;
        }
    }
}

/// After the exit (`status`: its code), lets the output end (within [`DRAIN_AFTER_EXIT`]),
/// then publishes the end; then waits for the rest of the output, if a process left behind
/// still writes.
pub fn ended(
    rec: &Rec,
    status: std::io::Result<Option<i32>>,
    readers: usize,
    drained: &mpsc::Receiver<()>,
) {
    let deadline = Instant::now() + DRAIN_AFTER_EXIT;
    let mut ended = 0;
    while ended < readers {
        let left = deadline.saturating_duration_since(Instant::now());
        match drained.recv_timeout(left) {
            Ok(()) => ended += 1,
            Err(_) => break,
        }
    }
    {
        let mut data = rec.lock();
        data.stdin = None;
        let stop = data.stop;
        let info = &mut data.info;
        info.ended_at_ms = Some(now_ms());
        match status {
            Ok(code) => {
                info.exit_code = code;
                info.state = match stop {
                    Some(Stop::Timeout) => ProcState::TimedOut,
                    Some(Stop::Request | Stop::Shutdown) => ProcState::Killed,
                    None => ProcState::Exited,
                };
            }
            Err(e) => {
                info.state = ProcState::Lost;
                info.error = Some(format!("cannot wait for it: {e}"));
            }
        }
        if let Some(job) = data.job.clone() {
            set_usage(&mut data.info, &job);
        }
        if ended == readers {
            data.set_drained();
        }
    }
    rec.notify();
    if ended < readers {
        while ended < readers && drained.recv().is_ok() {
            ended += 1;
        }
        rec.lock().set_drained();
        rec.notify();
    }
}
