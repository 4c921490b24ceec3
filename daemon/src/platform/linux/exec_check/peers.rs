//! Connections the daemon makes to its own socket for a sandboxed caller (`cubactl`, the
//! askpass helper): the kernel gives the server the connecting process as the peer
//! (`SO_PEERCRED`), which is then the daemon itself, placed in no tree. So the caller's socket
//! is first bound to an abstract name of the daemon's choosing, remembered with the caller's
//! process, and the server, seeing itself as a peer, asks for that name's process
//! (`platform::transport`): the connection is the caller's, as its own connect's would be.
//! Only the daemon's own connects are looked up so; a peer that is another process is that
//! process, whatever its name.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Names not asked for within this long are forgotten (the connect failed, or the caller
/// went away before the server took the connection).
const KEPT_FOR: Duration = Duration::from_secs(60);
/// Names kept at most.
const MAX_KEPT: usize = 1024;

struct Named {
    name: Vec<u8>,
    pid: i32,
    at: Instant,
}

static NAMED: Mutex<Vec<Named>> = Mutex::new(Vec::new());
static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn named() -> std::sync::MutexGuard<'static, Vec<Named>> {
    NAMED.lock().unwrap_or_else(|e| e.into_inner())
}

/// A new abstract name (without its leading NUL) for a connection of process `pid`,
/// remembered until it is asked for.
pub fn name_for(pid: i32) -> Vec<u8> {
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("cubad-peer-{}-{n}", std::process::id()).into_bytes();
    let now = Instant::now();
    let mut all = named();
    all.retain(|e| now.duration_since(e.at) < KEPT_FOR);
    if all.len() >= MAX_KEPT {
        all.remove(0);
    }
    all.push(Named {
        name: name.clone(),
        pid,
        at: now,
    });
    name
}

/// The process a connection whose peer is bound to the abstract name `name` was made for
/// (forgotten then: one connection per name).
pub fn caller_of(name: &[u8]) -> Option<i32> {
    let mut all = named();
    let i = all.iter().position(|e| e.name == name)?;
    Some(all.remove(i).pid)
}

/// The process a connection the daemon made to itself (its peer, `fd`, bound to a name of
/// [`name_for`]) was made for.
pub fn caller_of_peer(fd: std::os::fd::RawFd) -> Option<i32> {
    let mut addr: libc::sockaddr_un = {
        // SAFETY: plain integers and bytes; zero is an empty address.
        unsafe { std::mem::zeroed() }
    };
    let mut len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `addr`.
    let r =
        unsafe { libc::getpeername(fd, (&mut addr as *mut libc::sockaddr_un).cast(), &mut len) };
    let path = addr.sun_path.map(|c| c as u8);
    let name = path.get(..(len as usize).checked_sub(2)?)?;
    match (r, name.split_first()) {
        (0, Some((0, name))) => caller_of(name),
        _ => None,
    }
}

/// Forgets `name`: the connection it was for was not made.
pub fn forget(name: &[u8]) {
    named().retain(|e| e.name != name);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_finds_its_process_once() {
        let (a, b) = (name_for(11), name_for(12));
        assert_ne!(a, b);
        assert_eq!(caller_of(&b), Some(12));
        assert_eq!(caller_of(&b), None);
        forget(&a);
        assert_eq!(caller_of(&a), None);
    }
}
