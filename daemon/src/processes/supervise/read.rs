//! Reading a process's output: a pipe or a terminal, awaited or taken now, and the buffers
//! grown for a fast writer; on Windows, the rest that the reading threads still hold at the
//! exit.

use std::io;

#[cfg(windows)]
use cuba_protocol::Stream;
#[cfg(unix)]
use tokio::io::AsyncReadExt;
#[cfg(windows)]
use tokio::time::Instant;

#[cfg(unix)]
use super::PIPE_SIZE;
#[cfg(windows)]
use super::SETTLE_WITHIN;
use super::{Source, Supervisor, READ_BUF_MAX, READ_BUF_MIN};

pub(super) async fn read_some(source: &mut Option<Source>, buf: &mut [u8]) -> io::Result<usize> {
    match source {
        Some(Source::Pipe(p)) => p.read(buf).await,
        Some(Source::Pty(m)) => m.read(buf).await,
        None => std::future::pending().await,
    }
}

/// A read on the source's fd, now. Not `try_read`: that returns `WouldBlock` without reading
/// until the runtime has seen the pipe become readable, which for a process that lived a
/// millisecond may not have happened yet when its exit arrives.
pub(super) fn read_now(source: &Source, buf: &mut [u8]) -> io::Result<usize> {
    match source {
        #[cfg(unix)]
        Source::Pipe(p) => crate::base::fd::read(p, buf),
        #[cfg(windows)]
        Source::Pipe(p) => p.read_now(buf),
        Source::Pty(m) => m.read_now(buf),
    }
}

/// A read that filled the buffer suggests a fast writer: a bigger buffer halves the wake-ups.
/// At the first, its pipe is given a bigger buffer too (most commands write a few lines: the
/// pipe keeps the kernel's default, and the spawn two `fcntl`s fewer).
pub(super) fn grow(buf: &mut Vec<u8>, r: &io::Result<usize>, source: &Option<Source>) {
    if matches!(r, Ok(n) if *n == buf.len()) && buf.len() < READ_BUF_MAX {
        #[cfg(unix)]
        if buf.len() == READ_BUF_MIN {
            if let Some(Source::Pipe(p)) = source {
                crate::platform::pipe::grow(p, PIPE_SIZE);
            }
        }
        #[cfg(windows)]
        let _ = source;
        buf.resize(buf.len() * 4, 0);
    }
}

impl Supervisor<'_> {
    /// At the exit, before the output left in the pipes is taken: on Windows the threads that
    /// read them may not have handed over the last bytes yet, so they get until they end (a
    /// terminal's console is closed first: its output ends only then), at most
    /// [`SETTLE_WITHIN`]. On Unix what the process wrote is in the pipes already.
    pub(super) async fn settle(&mut self, buf: &mut [u8]) {
        #[cfg(windows)]
        {
            if let Some(Source::Pty(m)) = &self.stdout {
                m.close();
            }
            let until = Instant::now() + SETTLE_WITHIN;
            let mut err_buf = vec![0u8; READ_BUF_MIN];
            while self.stdout.is_some() || self.stderr.is_some() {
                tokio::select! {
                    r = read_some(&mut self.stdout, buf) => self.took(Stream::Stdout, &r, buf),
                    r = read_some(&mut self.stderr, &mut err_buf) => {
                        self.took(Stream::Stderr, &r, &err_buf)
                    }
                    () = tokio::time::sleep_until(until) => break,
                }
            }
        }
        #[cfg(unix)]
        let _ = buf;
    }
}
