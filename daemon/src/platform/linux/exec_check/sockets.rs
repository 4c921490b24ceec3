//! A sandboxed tree's `connect` and `bind` (handed over only where the tree has a Unix socket
//! rule, `crate::parts::unix_sockets`), made by the daemon for the caller: a decision is never
//! followed by `SECCOMP_USER_NOTIF_FLAG_CONTINUE`, since the kernel would then read again what
//! the caller's other threads can change in between (the address, and which socket the
//! number names).
//!
//! The daemon takes a copy of the caller's socket (`pidfd_getfd`: the same open file, whose
//! family cannot change) and reads the address once, at most a `sockaddr_storage`. Then:
//! - a Unix pathname is found as the kernel finds it for the caller (`resolve.rs`: its root,
//!   its working directory); a connect is judged on the file opened (its path with links
//!   resolved, its device, inode and birth) and goes to that very file (`/proc/self/fd/N`);
//!   a connect to the daemon's own socket is told to be the caller's (`peers.rs`); a bind is
//!   judged on the directory opened, and makes its file there on a worker thread with the
//!   caller's umask; the file made is remembered, and may always be connected to;
//! - a Unix abstract name: a connect only to a name the tree bound itself, which is what the
//!   Landlock scope the daemon's own connect is outside of allows; the bind is the daemon's
//!   too, and its name remembered;
//! - any other Unix address (unnamed, `AF_UNSPEC`): the call is made with the daemon's copy,
//!   and the kernel answers it;
//! - another family's socket: a connect is made by the daemon with its copy too (let go on,
//!   another thread could put a Unix socket under the same number first); a bind goes on
//!   (CONTINUE): made by the kernel in the caller's own context and under its Landlock rules,
//!   whatever socket the number then names, it gains the caller nothing.
//!
//! A connect that can wait (a stream socket: a full backlog, a TCP handshake) is made on a
//! worker thread (`workers.rs`), which answers the caller when it returns: the checker
//! thread, which answers every tree, never waits for one. Whether the socket is blocking is not
//! asked: `O_NONBLOCK` is the caller's open file's, which its other threads can change at any
//! moment (and setting it on the copy would set it for the caller). That connect waits as long
//! as the caller's own would have (its `SO_SNDTIMEO`, the socket's, bounds it); a hand-over
//! waits for it.

mod os;

use std::ffi::{CString, OsStr};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use cuba_protocol::ExecBlocked;

use super::calls::SocketCall;
use super::notif::{self, Notification};
use super::peers;
use super::resolve::{self, Base, Miss};
use super::shared::Shared;
use super::types::{Made, SocketAsk, SocketFile};
use super::Judge;
use os::{Addr, MAX_ADDR, PATH_AT, UNIX_ADDR};

/// Calls under way on threads apart from the checker's, at most: past it a call fails with
/// EAGAIN (for a Unix socket, "try again"), rather than the daemon making threads without
/// bound.
const MAX_THREADS: usize = 256;

/// One notification's call and where its answer goes.
struct Call<'a> {
    listener: &'a Arc<OwnedFd>,
    judge: &'a Arc<dyn Judge>,
    shared: &'a Arc<Shared>,
    n: &'a Notification,
}

/// What a Unix address is, in the daemon's copy.
#[derive(Debug, PartialEq, Eq)]
enum Unix<'a> {
    /// A file's path (up to its first NUL, as the kernel reads it).
    Path(&'a [u8]),
    /// An abstract name, without its leading NUL.
    Abstract(&'a [u8]),
    /// Unnamed (a bind's autobind), another family, or too long: the kernel's to answer.
    Other,
}

fn unix(addr: &[u8]) -> Unix<'_> {
    let family = (libc::AF_UNIX as libc::sa_family_t).to_ne_bytes();
    if addr.len() <= PATH_AT || addr.len() > UNIX_ADDR || addr[..PATH_AT] != family {
        return Unix::Other;
    }
    let path = &addr[PATH_AT..];
    match path[0] {
        0 => Unix::Abstract(&path[1..]),
        _ => Unix::Path(path.split(|b| *b == 0).next().unwrap_or(path)),
    }
}

/// Makes socket call `kind` of notification `n` for its caller, and answers it. `root`: the
/// callers' root where the daemon knows it (its own).
pub(super) fn handle(
    shared: &Arc<Shared>,
    root: Option<&OwnedFd>,
    (listener, judge): (&Arc<OwnedFd>, &Arc<dyn Judge>),
    n: &Notification,
    kind: SocketCall,
) {
    let call = Call {
        listener,
        judge,
        shared,
        n,
    };
    let (num, at, len) = n.socket_args();
    let socket = match os::take(n.pid, notif::tgid_of(n.pid), num) {
        Ok(s) => s,
        // Not open: what the kernel answers.
        Err(libc::EBADF) => return call.reply(Err(libc::EBADF)),
        Err(e) => {
            let why = std::io::Error::from_raw_os_error(e);
            let message = format!("the daemon could not take the socket to look at it ({why})");
            return call.refuse(libc::EACCES, message);
        }
    };
    let unix_socket = match os::option(&socket, libc::SO_DOMAIN) {
        Ok(domain) => domain == libc::AF_UNIX,
        Err(e) => return call.reply(Err(e)),
    };
    if !unix_socket && kind == SocketCall::Bind {
        let _ = notif::answer(listener.as_raw_fd(), n.id, None);
        return;
    }
    let addr = match read_address(n, at, len as usize) {
        Ok(addr) => addr,
        Err(e) => return call.reply(Err(e)),
    };
    // What was read is the caller's: it is still waiting, its number was not reused.
    if !notif::still_valid(listener.as_raw_fd(), n.id) {
        return;
    }
    if !unix_socket {
        return call.connect(socket, addr, None);
    }
    match (kind, unix(&addr.bytes[..addr.len])) {
        (SocketCall::Connect, Unix::Path(path)) => call.connect_path(root, socket, path),
        (SocketCall::Bind, Unix::Path(path)) => call.bind_path(root, socket, path),
        (SocketCall::Connect, Unix::Abstract(name)) => {
            match judge.socket(SocketAsk::ConnectAbstract(name)) {
                Ok(()) => call.connect(socket, addr, None),
                // What the Landlock scope answers.
                Err(message) => call.refuse(libc::EPERM, message),
            }
        }
        (SocketCall::Connect, Unix::Other) => call.connect(socket, addr, None),
        (SocketCall::Bind, _) => {
            let bound = os::bind(&socket, &addr);
            if let (Ok(()), Some(name)) = (bound, os::abstract_name(&socket)) {
                judge.made(Made::Name(&name));
            }
            call.reply(bound)
        }
    }
}

/// The `len` bytes of address at `at` in the caller's memory, read once (the error the
/// kernel gives where they cannot be).
fn read_address(n: &Notification, at: u64, len: usize) -> Result<Addr, i32> {
    if len > MAX_ADDR {
        return Err(libc::EINVAL);
    }
    let mut addr = Addr {
        bytes: [0u8; MAX_ADDR],
        len,
    };
    match n.read(at, &mut addr.bytes[..len]) < len {
        true => Err(libc::EFAULT),
        false => Ok(addr),
    }
}

impl Call<'_> {
    fn fd(&self) -> RawFd {
        self.listener.as_raw_fd()
    }

    fn reply(&self, result: Result<(), i32>) {
        let _ = notif::reply(self.fd(), self.n.id, result);
    }

    /// Refuses the call with `errno`, reported (the record's refusals, the audit) with
    /// `message`: only while the caller still waits, so what was read was its.
    fn refuse(&self, errno: i32, message: String) {
        if !notif::still_valid(self.fd(), self.n.id) {
            return;
        }
        let argv = notif::cmdline(self.n.pid);
        let program = std::fs::read_link(format!("/proc/{}/exe", self.n.pid))
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| argv.first().cloned().unwrap_or_default());
        self.judge.refused(ExecBlocked {
            program,
            argv,
            rule: "unix_sockets".to_string(),
            message,
            pid: self.n.pid as u32,
            killed: false,
        });
        self.reply(Err(errno));
    }

    /// A connect to the file `path` names for the caller.
    fn connect_path(&self, root: Option<&OwnedFd>, socket: OwnedFd, path: &[u8]) {
        let caller = self.n.caller(root);
        let file = match resolve::find(&caller, Base::Cwd, path, true) {
            Ok(found) => found.fd,
            // No such file, no search permission, a loop: what the kernel answers.
            Err(Miss::Errno(e)) => return self.reply(Err(e)),
            Err(Miss::NoView) => return self.cannot_see(path),
        };
        let (mode, id) = match os::kind(&file) {
            Ok(k) => k,
            Err(e) => return self.reply(Err(e)),
        };
        // Not a socket: what the kernel answers a connect to it.
        if mode & libc::S_IFMT != libc::S_IFSOCK {
            return self.reply(Err(libc::ECONNREFUSED));
        }
        let real = os::real_path(&file);
        if let Err(message) = self.judge.socket(SocketAsk::Connect { path: &real, id }) {
            return self.refuse(libc::EACCES, message);
        }
        // What was found was in the caller's view: it still waits.
        if !notif::still_valid(self.fd(), self.n.id) {
            return;
        }
        if self.is_own(id) {
            self.name_for_own(&socket);
        }
        // The file judged, whatever its path names by now.
        let via = format!("/proc/self/fd/{}", file.as_raw_fd());
        match Addr::unix(via.as_bytes()) {
            Some(addr) => self.connect(socket, addr, Some(file)),
            None => self.reply(Err(libc::ENAMETOOLONG)),
        }
    }

    /// Whether the socket file `id` is the daemon's own.
    fn is_own(&self, (dev, ino, _): SocketFile) -> bool {
        std::fs::metadata(&self.shared.own_socket).is_ok_and(|m| (m.dev(), m.ino()) == (dev, ino))
    }

    /// Binds `socket` to a name its connection to the daemon is told by (`peers.rs`); a
    /// socket bound already keeps its name, and its connection is the daemon's own.
    fn name_for_own(&self, socket: &OwnedFd) {
        let name = peers::name_for(notif::tgid_of(self.n.pid));
        let abstract_name = [&[0u8][..], &name].concat();
        let bound = Addr::unix(&abstract_name).map(|a| os::bind(socket, &a));
        if !matches!(bound, Some(Ok(()))) {
            peers::forget(&name);
        }
    }

    fn cannot_see(&self, path: &[u8]) {
        let path = String::from_utf8_lossy(path);
        let message = format!(
            "the socket {path} could not be looked up as its caller sees it (its directories \
             are closed to the daemon), so it was refused"
        );
        self.refuse(libc::EACCES, message);
    }

    /// Connects `socket` to `addr` (`file`: what it names, open until then) and answers: here
    /// where the connect cannot wait, else on a worker thread.
    fn connect(&self, socket: OwnedFd, addr: Addr, file: Option<OwnedFd>) {
        if !os::may_wait(&socket) {
            return self.reply(os::connect(&socket, &addr));
        }
        let (listener, id) = (self.listener.clone(), self.n.id);
        let ran = on_thread(self.shared, move || {
            let result = os::connect(&socket, &addr);
            drop(file);
            let _ = notif::reply(listener.as_raw_fd(), id, result);
        });
        if let Err(e) = ran {
            self.reply(Err(e));
        }
    }

    /// A bind that makes the socket file `path` names for the caller.
    fn bind_path(&self, root: Option<&OwnedFd>, socket: OwnedFd, path: &[u8]) {
        let Some((dir, name)) = split(path) else {
            // `/`, `x/`, `.`: a name no socket file can be made as.
            return self.reply(Err(libc::EINVAL));
        };
        let caller = self.n.caller(root);
        let dir = match resolve::find(&caller, Base::Cwd, dir, true) {
            Ok(found) => found.fd,
            Err(Miss::Errno(e)) => return self.reply(Err(e)),
            Err(Miss::NoView) => return self.cannot_see(path),
        };
        match os::kind(&dir) {
            Ok((mode, _)) if mode & libc::S_IFMT == libc::S_IFDIR => {}
            Ok(_) => return self.reply(Err(libc::ENOTDIR)),
            Err(e) => return self.reply(Err(e)),
        }
        let real = os::real_path(&dir);
        let ask = SocketAsk::Bind {
            dir: &real,
            name: OsStr::from_bytes(name),
        };
        if let Err(message) = self.judge.socket(ask) {
            return self.refuse(libc::EACCES, message);
        }
        if !notif::still_valid(self.fd(), self.n.id) {
            return;
        }
        let Ok(name) = CString::new(name) else {
            return self.reply(Err(libc::EINVAL));
        };
        let mask = os::umask_of(self.n.pid);
        let (listener, id, judge) = (self.listener.clone(), self.n.id, self.judge.clone());
        // A thread apart: its working directory and umask become the caller's. The file
        // is looked at after the bind made it; a caller that swaps another socket file in
        // between could have that one remembered, which its write access to the directory
        // (where it could as well rename that file) already gives it.
        let ran = on_thread(self.shared, move || {
            let result = os::bind_in(&socket, (&dir, &name, mask));
            if let Ok(Some(file)) = result {
                judge.made(Made::File(file));
            }
            let _ = notif::reply(listener.as_raw_fd(), id, result.map(drop));
        });
        if let Err(e) = ran {
            self.reply(Err(e));
        }
    }
}

/// `path` as the directory to find and the name to make in it (`.` for a bare name); `None`
/// where the last component is no name a file can be made as.
fn split(path: &[u8]) -> Option<(&[u8], &[u8])> {
    let (dir, name) = match path.iter().rposition(|b| *b == b'/') {
        Some(0) => (&path[..1], &path[1..]),
        Some(i) => (&path[..i], &path[i + 1..]),
        None => (&b"."[..], path),
    };
    let named = !name.is_empty() && name != b"." && name != b"..";
    named.then_some((dir, name))
}

/// Runs `work` on a thread apart from the checker's (`workers.rs`), counted (a hand-over
/// waits for it). `Err(EAGAIN)` when as many calls as the daemon allows are under way, or no
/// thread can be made.
fn on_thread(shared: &Arc<Shared>, work: impl FnOnce() + Send + 'static) -> Result<(), i32> {
    if !shared.calls_begin(MAX_THREADS) {
        return Err(libc::EAGAIN);
    }
    let done = shared.clone();
    let job = Box::new(move || {
        work();
        done.calls_end();
    });
    match shared.workers.run(job, MAX_THREADS) {
        true => Ok(()),
        false => {
            shared.calls_end();
            Err(libc::EAGAIN)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sun(path: &[u8]) -> Vec<u8> {
        let mut a = (libc::AF_UNIX as libc::sa_family_t).to_ne_bytes().to_vec();
        a.extend_from_slice(path);
        a
    }

    #[test]
    fn an_address_is_a_path_a_name_or_the_kernels_to_answer() {
        assert_eq!(unix(&sun(b"/tmp/s\0junk")), Unix::Path(b"/tmp/s"));
        assert_eq!(unix(&sun(b"rel")), Unix::Path(b"rel"));
        assert_eq!(unix(&sun(b"\0name\0x")), Unix::Abstract(b"name\0x"));
        // Unnamed (autobind), too long, or not AF_UNIX.
        assert_eq!(unix(&sun(b"")), Unix::Other);
        assert_eq!(unix(&sun(&[b'a'; 109])), Unix::Other);
        let mut inet = sun(b"/tmp/s");
        inet[..2].copy_from_slice(&(libc::AF_INET as libc::sa_family_t).to_ne_bytes());
        assert_eq!(unix(&inet), Unix::Other);
    }

    #[test]
    fn a_bind_makes_the_last_name_in_the_directory_before_it() {
        assert_eq!(split(b"/tmp/s"), Some((&b"/tmp"[..], &b"s"[..])));
        assert_eq!(split(b"/s"), Some((&b"/"[..], &b"s"[..])));
        assert_eq!(split(b"s"), Some((&b"."[..], &b"s"[..])));
        assert_eq!(split(b"a/b/s"), Some((&b"a/b"[..], &b"s"[..])));
        assert_eq!(split(b"/tmp/"), None);
        assert_eq!(split(b".."), None);
    }
}
