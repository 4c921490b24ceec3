//! File changes through kqueue `EVFILT_VNODE` events on open descriptors (`O_EVTONLY`: they do
//! not keep a volume from unmounting). Closing a descriptor removes its event.

use std::fs::OpenOptions;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use nix::errno::Errno;
use nix::sys::event::{EvFlags, EventFilter, FilterFlag, KEvent, Kqueue};

pub type FileWatch = OwnedFd;

pub struct Watcher {
    kq: Kqueue,
    /// The watched directory, open while it is watched.
    _dir: OwnedFd,
}

/// Opens `path` only to watch it.
fn open_event_only(path: &Path) -> std::io::Result<OwnedFd> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EVTONLY)
        .open(path)?;
    Ok(f.into())
}

impl Watcher {
    pub fn new(dir: &Path) -> Result<Watcher> {
        let kq = Kqueue::new().context("cannot start kqueue")?;
        let fd = open_event_only(dir).with_context(|| format!("cannot open {}", dir.display()))?;
        // A directory is written when an entry is created in it or renamed into or out of it.
        add(&kq, &fd, FilterFlag::NOTE_WRITE)
            .with_context(|| format!("cannot watch {}", dir.display()))?;
        Ok(Watcher { kq, _dir: fd })
    }

    pub fn add_file(&self, path: &Path) -> Option<FileWatch> {
        let fd = open_event_only(path).ok()?;
        let flags = FilterFlag::NOTE_WRITE
            | FilterFlag::NOTE_EXTEND
            | FilterFlag::NOTE_RENAME
            | FilterFlag::NOTE_DELETE;
        add(&self.kq, &fd, flags).ok()?;
        Some(fd)
    }

    pub fn remove(&self, w: FileWatch) {
        // Closing the descriptor removes its event from the queue.
        drop(w);
    }

    pub fn wait(&self, limit: Duration) -> Result<()> {
        let timeout = libc::timespec {
            tv_sec: libc::time_t::try_from(limit.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: libc::c_long::from(limit.subsec_nanos()),
        };
        let none = KEvent::new(
            0,
            EventFilter::EVFILT_VNODE,
            EvFlags::empty(),
            FilterFlag::empty(),
            0,
            0,
        );
        // The events only say "look again": what they are does not matter, and `EV_CLEAR`
        // re-arms them once returned. More than fit here stay queued for the next wait.
        let mut events = [none; 8];
        match self.kq.kevent(&[], &mut events, Some(timeout)) {
            Ok(_) | Err(Errno::EINTR) => Ok(()),
            Err(e) => Err(e).context("kevent on the watch queue failed"),
        }
    }
}

/// Adds a vnode event for `fd` with `flags`, re-armed after each delivery (`EV_CLEAR`).
fn add(kq: &Kqueue, fd: &OwnedFd, flags: FilterFlag) -> nix::Result<()> {
    let Ok(ident) = usize::try_from(fd.as_raw_fd()) else {
        return Err(Errno::EBADF);
    };
    let ev = KEvent::new(
        ident,
        EventFilter::EVFILT_VNODE,
        EvFlags::EV_ADD | EvFlags::EV_CLEAR,
        flags,
        0,
        0,
    );
    kq.kevent(&[ev], &mut [], None).map(drop)
}
