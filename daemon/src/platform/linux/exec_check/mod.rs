//! Exec checks: every `execve`/`execveat` in a command's tree is decided by the daemon before
//! it happens (seccomp user notification, Linux 5.5+). The child installs the filter in a hook
//! before its own exec and sends the listener back on a socket made for it (`filter.rs`); one
//! thread of the daemon answers every listener (`serve.rs`), reading each call's path and
//! arguments from the caller's memory (`notif.rs`) and finding what the kernel will run for
//! the caller (`inspect.rs`: the file in the caller's view, `resolve.rs`; its interpreters and
//! images, `image.rs`).
//! What is allowed is the policy's (`crate::parts::exec_rules`), behind [`Judge`].
//! A tree with a Unix socket rule has its `connect` and `bind` calls made by the daemon too
//! (`sockets.rs`), the rule (`crate::parts::unix_sockets`) behind the same [`Judge`].

mod after;
mod calls;
mod filter;
mod first;
mod held;
mod image;
mod inspect;
mod notif;
mod pace;
pub mod peers;
mod resolve;
mod serve;
mod shared;
mod sockets;
mod types;
mod workers;

pub use inspect::target;
pub use types::{
    unreadable, AskStart, Exec, Made, Refusal, Run, SocketAsk, SocketFile, Target, Verdict,
};

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::Arc;

use cuba_protocol::ExecBlocked;

use crate::platform::spawn::Spawn;

/// The answer to an exec put to the person: go on, or refuse with the reason given.
pub type Reply = Box<dyn FnOnce(Result<(), String>) + Send>;

/// What decides a tree's execs and hears of the refusals.
pub trait Judge: Send + Sync + 'static {
    fn decide(&self, exec: &Exec) -> Verdict;
    fn refused(&self, blocked: ExecBlocked);
    /// The tree's listener, once it has arrived (kept by its record for a hand-over).
    fn listening(&self, listener: Arc<OwnedFd>);
    /// Whether the rules need the call's arguments for the file `t` (an `ask` pattern names
    /// it, or it is a multi-call program): they are read from the caller's memory only then.
    fn wants_argv(&self, t: &Target) -> bool;
    /// Puts an exec the rules ask about (`rule`) to the person; `reply` is called once with
    /// the answer when it is [`AskStart::Held`].
    fn ask(&self, exec: &Exec, rule: String, reply: Reply) -> AskStart;
    /// What the tree's Unix socket rule says of a call (`Err`: refused, with the sentence that
    /// says why). Only a tree with a rule is asked: its filter alone hands the calls over.
    fn socket(&self, ask: SocketAsk<'_>) -> Result<(), String>;
    /// The tree made a socket: connecting to it is allowed from then on.
    fn made(&self, made: Made<'_>);
}

pub enum Source {
    /// The daemon's end of the socket the child sends its listener on, and the directory the
    /// child execs in.
    Socket(OwnedFd, PathBuf),
    /// A listener already received (by the program before an upgrade).
    Listener(OwnedFd),
    /// A listener just received from a child that has not exec'd yet, which execs in the
    /// directory given.
    First(OwnedFd, PathBuf),
}

pub struct Watch {
    pub source: Source,
    pub judge: Arc<dyn Judge>,
}

/// Whether this kernel and this process can check execs: `Ok` with how, or why not.
pub fn probe() -> Result<String, String> {
    let notify = libc::SECCOMP_RET_USER_NOTIF;
    // SAFETY: SECCOMP_GET_ACTION_AVAIL reads the u32.
    let avail = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_ACTION_AVAIL,
            0,
            &notify as *const u32,
        )
    };
    if avail != 0 {
        let e = io::Error::last_os_error();
        return Err(format!(
            "seccomp user notification is not available here ({e}): Linux 5.5 or newer outside a \
             filter that forbids it is needed"
        ));
    }
    let (major, minor) = kernel_version();
    if (major, minor) < (5, 5) {
        return Err(format!(
            "Linux {major}.{minor} cannot let a checked exec go on (5.5 or newer is needed)"
        ));
    }
    let how = match privileged() {
        true => "seccomp user notification",
        false => "seccomp user notification; no_new_privs: setuid programs cannot gain privileges",
    };
    Ok(how.to_string())
}

fn kernel_version() -> (u32, u32) {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// Whether the daemon may install a filter without `no_new_privs` (CAP_SYS_ADMIN in its
/// effective set): then setuid programs in the tree keep working.
pub fn privileged() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 21) != 0)
}

/// A spawn's part: the socket its listener comes back on and the child's hook.
pub struct Pending {
    daemon_end: OwnedFd,
    child_end: Option<OwnedFd>,
}

impl Pending {
    pub fn new() -> io::Result<Pending> {
        let (d, c) = crate::platform::linux::fd_pass::pair()?;
        Ok(Pending {
            daemon_end: d,
            child_end: Some(c),
        })
    }

    /// The child enters the filter as its last hook before the exec; with `sockets` (the tree
    /// has a Unix socket rule) its `connect` and `bind` calls come to the daemon too.
    pub fn install(
        &mut self,
        cmd: &mut Spawn,
        no_new_privs: bool,
        (refuse_namespaces, sockets): (bool, bool),
    ) {
        let Some(child) = &self.child_end else { return };
        let mut side = filter::ChildSide {
            filter: filter::program(refuse_namespaces, sockets),
            socket: child.as_raw_fd(),
            no_new_privs,
            cmsg: Box::new([0u64; 4]),
        };
        cmd.uses(child.as_raw_fd())
            .hook(Box::new(move || filter::enter(&mut side)));
    }

    /// Before the spawn: the daemon's end of the socket, and the child's, held until the spawn
    /// returns.
    pub fn split(self) -> (OwnedFd, ChildEnd) {
        (self.daemon_end, ChildEnd(self.child_end))
    }
}

/// The child's end of the socket, held by the daemon until the spawn returns.
pub struct ChildEnd(#[allow(dead_code)] Option<OwnedFd>);

/// The checker thread stopped ([`Checker::pause`]); dropped, it goes on.
pub struct Paused(#[allow(dead_code)] std::sync::mpsc::SyncSender<()>);

/// The thread that answers every listener (and what answers a tree's first exec on the
/// thread that started it).
pub struct Checker {
    shared: Arc<shared::Shared>,
    first: std::sync::Mutex<inspect::View>,
}

impl Checker {
    /// `same_root`: checked trees may not change their root or mounts (namespaces refused),
    /// so every caller's root is the daemon's own. `own_socket`: the daemon's socket, whose
    /// connections made for a caller are told to be the caller's (`peers.rs`).
    pub fn start(same_root: bool, own_socket: PathBuf) -> io::Result<Checker> {
        let shared = Arc::new(shared::Shared::new(own_socket)?);
        let for_thread = shared.clone();
        std::thread::Builder::new()
            .name("cubad-exec".into())
            .spawn(move || serve::run(for_thread, same_root))?;
        Ok(Checker {
            shared,
            first: std::sync::Mutex::new(inspect::View::new(true)),
        })
    }

    /// Answers the first exec of the child that sends its listener on `socket` (it execs in
    /// `cwd`; `done` reads end of file once it has exec'd or ended), on this thread, then
    /// hands the listener to the checker's thread for the execs that follow.
    pub fn answer_first(
        &self,
        (socket, done): (&OwnedFd, RawFd),
        cwd: &std::path::Path,
        judge: Arc<dyn Judge>,
    ) -> io::Result<()> {
        let listener = first::answer_first(socket, done, cwd, &judge, &self.first)?;
        match listener {
            Some(l) => self.shared.add(Watch {
                source: Source::Listener(l),
                judge,
            }),
            None => Ok(()),
        }
    }

    /// Stops the thread between two notifications, for a hand-over to a new program: until
    /// the [`Paused`] returned is dropped. `Err` with the callers whose execs wait for a
    /// person's answer (it was not stopped), or `None` in them if it did not stop `within`.
    pub async fn pause(&self, within: std::time::Duration) -> Result<Paused, Option<Vec<i32>>> {
        let (paused, answer) = tokio::sync::oneshot::channel();
        let (go, resume) = std::sync::mpsc::sync_channel(1);
        self.shared
            .request_pause(shared::PauseRequest { paused, resume });
        match tokio::time::timeout(within, answer).await {
            Ok(Ok(Ok(()))) => Ok(Paused(go)),
            Ok(Ok(Err(held))) => Err(Some(held)),
            _ => Err(None),
        }
    }

    /// Hands `w` to the thread: its descriptor goes straight into the thread's `epoll`, so a
    /// start wakes the thread once, when the child sends its listener, not also to say so.
    pub fn watch(&self, w: Watch) -> Result<(), String> {
        self.shared
            .add(w)
            .map_err(|e| format!("the exec checks cannot watch a new tree: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Checker;

    #[tokio::test]
    async fn a_paused_checker_takes_nothing_until_let_go() {
        #[allow(clippy::expect_used)]
        let checker = Checker::start(true, "/nonexistent".into()).expect("the checker starts");
        let paused = checker.pause(Duration::from_secs(5)).await;
        let Ok(paused) = paused else {
            panic!("an idle checker did not pause");
        };
        // Stopped: it does not even take the next request.
        let again = checker.pause(Duration::from_millis(200)).await;
        assert!(matches!(again, Err(None)), "it went on while paused");
        drop(paused);
        // Let go, it takes the request that waited, and then the next one.
        assert!(checker.pause(Duration::from_secs(5)).await.is_ok());
    }
}
