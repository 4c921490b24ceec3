//! In-place upgrade: the running daemon re-executes itself (same pid, so it stays the parent
//! and subreaper of every child) and hands the new program its processes.
//!
//! What crosses `execve` is descriptors and one file. The descriptors — the listening socket,
//! the lock file, every child's output pipes, terminal master and stdin pipe — are kept open by
//! clearing close-on-exec. The file (unlinked, passed by descriptor number after `--handover`)
//! holds a [`Header`] and one [`SavedProc`] per running process: its row, its output as it
//! was (memory and spool), its screen, the stdin bytes not yet written and what is left of its
//! timers. The supervisors and stdin writers are paused between two events while it is
//! written, and the reaper collects no exit, so nothing is read, written or reaped twice or
//! not at all: an exit during the hand-over is a zombie the new program reaps.
//!
//! `save.rs` is the old program's half, `load.rs` the new one's; which program may take over
//! is `crate::serving::new_program`'s to judge.

mod load;
mod save;

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::RawFd;

use cuba_protocol::{wire, ProcessInfo};
use serde::{Deserialize, Serialize};

use crate::processes::launch::Confinement;
use crate::state::record::StopCause;
use crate::state::tokens::{Exported, Stamp};

pub use load::{read, Handed};
pub use save::{hand_over, Inherited};

/// The hand-over format this program writes and reads: beside the check that asks a new
/// program which one it reads.
pub use crate::serving::new_program::HANDOVER_VERSION as VERSION;

#[derive(Serialize, Deserialize, Debug)]
pub struct Header {
    pub version: u32,
    /// When the first program of this pid started, and how many upgrades it went through.
    pub started_at_ms: u64,
    pub upgrades: u32,
    pub listener: RawFd,
    pub lock: RawFd,
    pub next_id: u64,
    pub procs: u32,
    /// The request tokens the daemon remembers: a retry after the upgrade is still answered
    /// with its first attempt's result.
    pub tokens: Vec<Exported>,
    /// The seq the event log's next event gets (version 9): the new program loads the events
    /// from the journal, but one the journal did not take (a full disk) has had its seq.
    pub events_next: u64,
}

/// One running process as the new program takes it over.
#[derive(Serialize, Deserialize, Debug)]
pub struct SavedProc {
    /// Its row, with the port leased to it (version 11): the lease carries over.
    pub info: ProcessInfo,
    pub start_time: crate::platform::StartTime,
    pub marker: String,
    pub token: Option<Stamp>,
    /// The record's `Output`, encoded on its own (it is the large part); with the error lines
    /// found in it so far, and the line its scan carries (version 11).
    pub output: Vec<u8>,
    pub stop: Option<StopCause>,
    pub stdout: Option<RawFd>,
    pub stderr: Option<RawFd>,
    pub terminal: Option<SavedTerminal>,
    pub stdin: Option<SavedStdin>,
    pub timeout_left_ms: Option<u64>,
    pub kill_left_ms: Option<u64>,
    /// The shell of an idle session: what the session registry knew of it.
    pub session: Option<SavedSession>,
    /// The policy of the client that started it, which connections from inside its tree are
    /// held to (version 2).
    pub policy: Option<crate::base::policy::Effective>,
    /// Its pooled v2 cgroup (version 3: cgroups are no longer named by process id).
    pub cgroup: Option<crate::platform::cgroup::CgroupSlot>,
    /// The listener of its tree's exec checks (version 6): the new program answers them.
    pub exec_listener: Option<RawFd>,
    /// The confined caller it was started for (version 8).
    pub tenant: Option<String>,
    /// Its tree's Unix socket rule and the sockets the tree made (version 10).
    pub sockets: Option<crate::parts::unix_sockets::SavedSockets>,
    /// The agent whose budget holds its tree, and that budget (version 12).
    pub budget: Option<(String, cuba_protocol::Budget)>,
}

#[derive(Serialize, Deserialize, Debug)]
pub struct SavedSession {
    pub name: String,
    pub nonce: String,
    /// The write end of the pipe the shell reads its commands from.
    pub commands: RawFd,
    pub confinement: Confinement,
}

#[derive(Serialize, Deserialize, Debug)]
pub struct SavedTerminal {
    pub master: RawFd,
    pub path: String,
    /// Escape codes that rebuild the screen.
    pub screen: Vec<u8>,
}

#[derive(Serialize, Deserialize, Debug)]
pub struct SavedStdin {
    /// The pipe; `None` on a terminal (writes go to the master).
    pub fd: Option<RawFd>,
    pub pending: Vec<u8>,
    pub eof: bool,
}

fn put<T: Serialize>(out: &mut impl Write, value: &T) -> io::Result<()> {
    let body = wire::encode(value).map_err(io::Error::other)?;
    out.write_all(&(body.len() as u32).to_be_bytes())?;
    out.write_all(&body)
}

fn get<T: serde::de::DeserializeOwned>(file: &mut File) -> io::Result<T> {
    let mut len = [0u8; 4];
    file.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > wire::MAX_FRAME {
        return Err(io::Error::other(format!("hand-over frame of {len} bytes")));
    }
    let mut body = vec![0u8; len];
    file.read_exact(&mut body)?;
    wire::decode(&body).map_err(io::Error::other)
}
