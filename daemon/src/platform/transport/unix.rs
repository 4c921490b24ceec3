//! The Unix socket: accept, the peer's uid (`SO_PEERCRED`), and one descriptor held in reserve
//! so that a connection can be refused with a reason even when every other one is taken.

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use tokio::net::{UnixListener, UnixStream};

use super::{Check, Peer};
use crate::base::admission::Burst;
use crate::platform::descriptors;

/// A connection as accepted.
pub type Raw = UnixStream;
/// A connection as the framing reads it: watched for reading only (`cuba_protocol::quiet`).
pub type Stream = cuba_protocol::quiet::QuietStream;
/// The socket's lock file, kept across an upgrade.
pub type Lock = RawFd;

pub fn stream(raw: Raw) -> std::io::Result<Stream> {
    Stream::from_tokio(raw)
}

pub struct Listener {
    inner: UnixListener,
    reserve: Reserve,
    failures: Burst,
    /// This daemon's pid and uid, for refusals.
    pid: u32,
    uid: u32,
}

impl Listener {
    pub fn new(inner: UnixListener) -> Listener {
        Listener {
            inner,
            reserve: Reserve::default(),
            failures: Burst::new(Duration::from_secs(1)),
            pid: std::process::id(),
            // SAFETY: geteuid has no preconditions.
            uid: unsafe { libc::geteuid() },
        }
    }

    /// The socket's descriptor, handed to the next program at an upgrade.
    pub fn raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }

    /// The next connection and the kernel's word on its peer. Accept failures are dealt with
    /// here: out of descriptors, the waiting client is refused with the reason; anything else
    /// is logged (once a second at most) and accept is tried again a little later.
    pub async fn accept(&mut self) -> (Raw, Check) {
        loop {
            match self.inner.accept().await {
                Ok((stream, _)) => {
                    self.reserve.refill();
                    let check = self.check(&stream);
                    return (stream, check);
                }
                Err(e) if out_of_fds(&e) => self.reserve.refuse_one(&self.inner, self.pid).await,
                Err(e) => {
                    // Keep serving the connections we have.
                    if let Some(n) = self.failures.note(Instant::now()) {
                        tracing::warn!("accept failed: {e} ({n} times since the last report)");
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    fn check(&self, stream: &UnixStream) -> Check {
        match stream.peer_cred() {
            Ok(cred) => {
                let peer = Peer {
                    uid: cred.uid(),
                    pid: match cred.pid() {
                        // A connect the daemon made for a sandboxed caller: the caller's.
                        #[cfg(target_os = "linux")]
                        Some(pid) if pid == self.pid as i32 => {
                            let made = crate::platform::exec_check::peers::caller_of_peer;
                            made(stream.as_raw_fd()).or(Some(pid))
                        }
                        pid => pid,
                    },
                };
                match cred.uid() == self.uid {
                    true => Check::Ours(peer),
                    false => Check::Foreign {
                        peer,
                        why: format!(
                            "permission denied: this cubad serves uid {} only, the peer is uid {}",
                            self.uid,
                            cred.uid()
                        ),
                    },
                }
            }
            Err(e) => Check::Unreadable(e),
        }
    }
}

/// The soft `RLIMIT_NOFILE`: descriptors this process may have open at once (POSIX).
pub fn fd_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into a valid local struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    Some(lim.rlim_cur)
}

/// The process (EMFILE) or the whole system (ENFILE) has no descriptor left.
fn out_of_fds(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// One descriptor held back (`/dev/null`) so that, when every other one is taken, a connection
/// can still be accepted, told why it is refused and closed: otherwise it waits in the backlog
/// until the client's handshake times out, and accept fails in a loop.
struct Reserve {
    file: Option<File>,
    failures: Burst,
}

impl Default for Reserve {
    fn default() -> Reserve {
        Reserve {
            file: File::open("/dev/null").ok(),
            failures: Burst::new(Duration::from_secs(1)),
        }
    }
}

impl Reserve {
    /// Takes the descriptor back if it was given up and one is free again.
    fn refill(&mut self) {
        if self.file.is_none() {
            self.file = File::open("/dev/null").ok();
        }
    }

    /// Accept failed for want of descriptors: spends the reserve on the waiting connection to
    /// refuse it, then takes the reserve back. Without a reserve (not refilled yet), waits a
    /// little instead, so accept does not fail in a busy loop.
    async fn refuse_one(&mut self, listener: &UnixListener, pid: u32) {
        self.refill();
        let Some(file) = self.file.take() else {
            self.log(None);
            tokio::time::sleep(Duration::from_millis(50)).await;
            return;
        };
        drop(file);
        // Counted with the freed descriptor (which stands in for the reserve itself).
        let open = descriptors::open_count().map(|n| n + 1);
        // Only a connection already waiting: the kernel fails accept for want of a descriptor
        // even when none is, and one that comes later may find descriptors free again.
        match listener.accept().now_or_never() {
            Some(Ok((stream, _))) => {
                let reason = exhausted(open, fd_limit());
                self.log(Some(&reason));
                // Awaited here, not in a task: the reserve is this connection's descriptor
                // until it closes. A client reads the reason and closes at once; the wait is
                // bounded.
                let frame = cuba_protocol::handshake::encode_refusal(pid, &reason);
                super::refuse(stream, frame).await;
            }
            Some(Err(_)) => {
                // Another task took the freed descriptor first.
                self.log(None);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            None => {}
        }
        self.refill();
    }

    fn log(&mut self, reason: Option<&str>) {
        if let Some(n) = self.failures.note(Instant::now()) {
            let what = reason.unwrap_or("out of file descriptors, none left to refuse with");
            tracing::warn!("accept failed: {what} ({n} times since the last report)");
        }
    }
}

/// The refusal when descriptors have run out: `open` of `limit`, and what to do.
fn exhausted(open: Option<usize>, limit: Option<u64>) -> String {
    let counts = match (open, limit) {
        (Some(n), Some(m)) => format!(" ({n} open, limit {m})"),
        (None, Some(m)) => format!(" (limit {m})"),
        (Some(n), None) => format!(" ({n} open)"),
        (None, None) => String::new(),
    };
    format!(
        "cubad is out of file descriptors{counts}; close connections or stop processes it \
         runs, or start it with a higher limit (`ulimit -n`)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_descriptor_refusal_says_how_many_and_what_to_do() {
        let why = exhausted(Some(64), Some(64));
        assert!(
            why.contains("out of file descriptors (64 open, limit 64)"),
            "{why}"
        );
        assert!(why.contains("ulimit -n"), "{why}");
        assert!(exhausted(None, None).starts_with("cubad is out of file descriptors;"));
    }
}
