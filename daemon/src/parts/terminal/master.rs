//! The daemon's end of a POSIX pseudo-terminal.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use cuba_protocol::TtySize;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// The daemon's end of a PTY. Shared by the supervisor (reads), the stdin writer (writes) and
/// the request handlers (resize, foreground group).
pub struct Master {
    fd: AsyncFd<OwnedFd>,
    /// The terminal device the child has, e.g. `/dev/pts/7` (what its fds link to).
    pub path: String,
}

/// A new PTY of `size`: the master, and the terminal end for the child.
pub fn open(size: TtySize) -> io::Result<(Master, OwnedFd)> {
    let (pty, pts) = pty_process::blocking::open().map_err(io::Error::other)?;
    let master = OwnedFd::from(pty);
    let slave = std::os::fd::AsFd::as_fd(&pts).try_clone_to_owned()?;
    drop(pts);
    let path = crate::platform::terminal::device_path(&slave)?;
    set_size(&master, size)?;
    crate::base::fd::set_nonblocking(&master)?;
    // SAFETY: `master` is an OwnedFd moved into the AsyncFd, which keeps it open and
    // unchanged for its whole life.
    let fd = unsafe {
        AsyncFd::register_with_interest(master, Interest::READABLE | Interest::WRITABLE)
    }?;
    Ok((Master { fd, path }, slave))
}

impl Master {
    /// The master end of a terminal a previous program of this daemon opened (an in-place
    /// upgrade keeps it open across `execve`).
    pub fn adopt(master: OwnedFd, path: String) -> io::Result<Master> {
        crate::base::fd::set_nonblocking(&master)?;
        // SAFETY: as in `open`: the AsyncFd owns the fd for its whole life.
        let fd = unsafe {
            AsyncFd::register_with_interest(master, Interest::READABLE | Interest::WRITABLE)
        }?;
        Ok(Master { fd, path })
    }
}

fn set_size(fd: &OwnedFd, size: TtySize) -> io::Result<()> {
    let ws = libc::winsize {
        ws_row: size.rows,
        ws_col: size.cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ with a pointer to a winsize that lives across the call.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCSWINSZ, &ws) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl Master {
    pub fn raw(&self) -> i32 {
        self.fd.get_ref().as_raw_fd()
    }

    /// Reads what the terminal has; `Ok(0)` once every holder of the terminal end closed it
    /// (Linux reports that as EIO on the master).
    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut guard = self.fd.readable().await?;
            match guard.try_io(|fd| crate::base::fd::read(fd.get_ref(), buf)) {
                Ok(r) => return eio_is_eof(r),
                Err(_would_block) => continue,
            }
        }
    }

    /// A read now, without waiting for readiness (what the exited process left).
    pub fn read_now(&self, buf: &mut [u8]) -> io::Result<usize> {
        eio_is_eof(crate::base::fd::read(self.fd.get_ref(), buf))
    }

    pub async fn write_all(&self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let n = self.write(data).await?;
            data = &data[n..];
        }
        Ok(())
    }

    /// One write of what the terminal takes now: cancel-safe (dropped before it completes, it
    /// wrote nothing), so the stdin writer can pause between any two writes.
    pub async fn write(&self, data: &[u8]) -> io::Result<usize> {
        loop {
            let mut guard = self.fd.writable().await?;
            match guard.try_io(|fd| {
                // SAFETY: write(2) from `data`, whose length bounds it, on an fd we own.
                let n = unsafe {
                    libc::write(fd.get_ref().as_raw_fd(), data.as_ptr().cast(), data.len())
                };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            }) {
                Ok(Ok(n)) => return Ok(n),
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => {}
            }
        }
    }

    /// Sets the terminal size; the kernel sends SIGWINCH to the foreground group.
    pub fn resize(&self, size: TtySize) -> io::Result<()> {
        set_size(self.fd.get_ref(), size)
    }

    /// The terminal's foreground process group.
    pub fn foreground(&self) -> Option<i32> {
        // SAFETY: tcgetpgrp on an fd we own; on a master it reports the terminal's group.
        let pgrp = unsafe { libc::tcgetpgrp(self.raw()) };
        (pgrp > 0).then_some(pgrp)
    }
}

fn eio_is_eof(r: io::Result<usize>) -> io::Result<usize> {
    match r {
        Err(e) if e.raw_os_error() == Some(libc::EIO) => Ok(0),
        r => r,
    }
}
