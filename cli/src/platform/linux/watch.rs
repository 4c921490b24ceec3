//! File changes through inotify, slept on with `poll(2)`.

use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

pub type FileWatch = WatchDescriptor;

pub struct Watcher {
    inotify: Inotify,
}

impl Watcher {
    pub fn new(dir: &Path) -> Result<Watcher> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .context("cannot start inotify")?;
        inotify
            .add_watch(
                dir,
                AddWatchFlags::IN_CREATE
                    | AddWatchFlags::IN_MOVED_TO
                    | AddWatchFlags::IN_MOVED_FROM,
            )
            .with_context(|| format!("cannot watch {}", dir.display()))?;
        Ok(Watcher { inotify })
    }

    pub fn add_file(&self, path: &Path) -> Option<FileWatch> {
        let flags =
            AddWatchFlags::IN_MODIFY | AddWatchFlags::IN_MOVE_SELF | AddWatchFlags::IN_DELETE_SELF;
        self.inotify.add_watch(path, flags).ok()
    }

    pub fn remove(&self, w: FileWatch) {
        // A file that is gone has lost its watch already.
        let _ = self.inotify.rm_watch(w);
    }

    pub fn wait(&self, limit: Duration) -> Result<()> {
        let mut pfd = libc::pollfd {
            fd: self.inotify.as_fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = i32::try_from(limit.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: poll(2) on one valid pollfd we own.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e).context("poll on inotify failed");
            }
        }
        if r > 0 {
            // Non-blocking: drain what is queued; the events only say "look again".
            while let Ok(events) = self.inotify.read_events() {
                if events.is_empty() {
                    break;
                }
            }
        }
        Ok(())
    }
}
