//! The new program's half of an upgrade: read the hand-over file, then (in `server.rs`) rebuild
//! each record and give it a supervisor and stdin writer on the descriptors that stayed open.

use std::fs::File;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use cuba_protocol::wire;

use super::{get, Header, SavedProc, VERSION};
use crate::parts::output::Output;
use crate::parts::tree::TreeRoot;
use crate::parts::unix_sockets::Sockets;
use crate::platform::set_cloexec;
use crate::processes::launch::Adopted;

/// What the previous program handed over.
pub struct Handed {
    pub header: Header,
    pub procs: Vec<SavedProc>,
}

/// Reads the hand-over from descriptor `fd` (and closes it).
pub fn read(fd: RawFd) -> io::Result<Handed> {
    // SAFETY: the previous program passed this descriptor for this file and nothing else
    // owns it in this one.
    let mut file = unsafe { File::from_raw_fd(fd) };
    let header: Header = get(&mut file)?;
    if header.version != VERSION {
        return Err(io::Error::other(format!(
            "hand-over version {} (this program reads {VERSION})",
            header.version
        )));
    }
    for fd in [header.listener, header.lock] {
        set_cloexec(fd, true)?;
    }
    let mut procs = Vec::with_capacity(header.procs as usize);
    for _ in 0..header.procs {
        procs.push(get::<SavedProc>(&mut file)?);
    }
    Ok(Handed { header, procs })
}

/// Takes the descriptor `fd` kept open for this program.
fn own(fd: RawFd) -> io::Result<OwnedFd> {
    set_cloexec(fd, true)?;
    // SAFETY: kept open across the exec for exactly this use; nothing else in this program
    // owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl SavedProc {
    /// The record's output and what its supervisor and stdin writer need.
    pub fn take(self) -> io::Result<(Output, Adopted)> {
        let mut output: Output = wire::decode(&self.output).map_err(io::Error::other)?;
        output.reopen();
        let ms = |m: Option<u64>| m.map(Duration::from_millis);
        let adopted = Adopted {
            root: TreeRoot {
                pid: self.info.pid as i32,
                start_time: self.start_time,
                marker: self.marker,
            },
            info: self.info,
            stop: self.stop,
            stdout: self.stdout.map(own).transpose()?,
            stderr: self.stderr.map(own).transpose()?,
            terminal: match self.terminal {
                Some(t) => Some((own(t.master)?, t.path, t.screen)),
                None => None,
            },
            stdin: match self.stdin {
                Some(s) => Some((s.fd.map(own).transpose()?, s.pending, s.eof)),
                None => None,
            },
            timeout: ms(self.timeout_left_ms),
            kill_in: ms(self.kill_left_ms),
            session: match self.session {
                Some(s) => Some((s.name, s.nonce, own(s.commands)?, s.confinement)),
                None => None,
            },
            policy: self.policy.map(Arc::new),
            cgroup: self.cgroup,
            exec_listener: self.exec_listener.map(own).transpose()?,
            sockets: self.sockets.map(|s| Arc::new(Sockets::restore(s))),
            budget: self.budget,
        };
        Ok((output, adopted))
    }
}
