//! A process's exit through kqueue: an `EVFILT_PROC`/`NOTE_EXIT` event makes the queue readable.

use std::io;
use std::os::fd::OwnedFd;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::event::{EvFlags, EventFilter, FilterFlag, KEvent, Kqueue};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// `Some(true)`: `pid` exited (or is gone), `Some(false)`: still there after `limit`. Never
/// `None`: every macOS has the event.
pub async fn wait(pid: i32, limit: Duration) -> io::Result<Option<bool>> {
    let kq = Kqueue::new().map_err(io::Error::from)?;
    let Ok(ident) = usize::try_from(pid) else {
        return Ok(Some(true));
    };
    let ev = KEvent::new(
        ident,
        EventFilter::EVFILT_PROC,
        EvFlags::EV_ADD | EvFlags::EV_ONESHOT,
        FilterFlag::NOTE_EXIT,
        0,
        0,
    );
    match kq.kevent(&[ev], &mut [], None) {
        Ok(_) => {}
        Err(Errno::ESRCH) => return Ok(Some(true)),
        Err(e) => return Err(e.into()),
    }
    let owned = OwnedFd::from(kq);
    // SAFETY: the AsyncFd owns the OwnedFd, so the fd stays open and unchanged for its life.
    let afd = unsafe { AsyncFd::register_with_interest(owned, Interest::READABLE) }
        .map_err(io::Error::from)?;
    Ok(Some(
        tokio::time::timeout(limit, afd.readable()).await.is_ok(),
    ))
}
