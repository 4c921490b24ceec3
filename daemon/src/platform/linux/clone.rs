//! Starting a child with `clone3(CLONE_VM | CLONE_VFORK)`, plus `CLONE_INTO_CGROUP` when it has
//! a cgroup: the child shares the daemon's memory on a stack of its own until its exec, as
//! posix_spawn's does, so the start costs the same however large the daemon is; and it is born
//! in its cgroup, with no migration (which waits for an RCU grace period).
//!
//! The child runs only [`child`]: it is born with the daemon's signal handlers cleared
//! (`CLONE_CLEAR_SIGHAND`) and resets the ignored signals, places its stdio, joins
//! its group, changes directory, runs the hooks, clears its signal mask and execs. All signals
//! are blocked around the clone, so no daemon handler can run in the child on shared memory
//! before the dispositions are reset. A failure is left in shared memory for the parent, which
//! reaps the child before it answers.
//!
//! A child whose exec is checked cannot exec until its first exec is answered. Its start is a
//! clone without `CLONE_VFORK`, which returns at once: the starting thread answers that exec
//! itself (`Attend`, with no other thread woken for it), then waits for the exec on a pipe the
//! exec closes, holding everything the child uses as a vfork parent would.

use std::ffi::c_void;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Mutex, OnceLock};

use super::clone3::{clone3, CloneArgs};
use crate::platform::spawn::{Attend, Group, Prepared};

const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;
/// The child starts with every caught signal back to its default (Linux 5.5): no daemon handler
/// can run in it, and it has only the ignored ones to reset.
const CLONE_CLEAR_SIGHAND: u64 = 0x1_0000_0000;
/// The child's stack: hooks only make system calls.
const STACK_SIZE: usize = 256 * 1024;

/// clone3 (or its cgroup field) is missing from this kernel: std's start from now on.
static UNAVAILABLE: AtomicBool = AtomicBool::new(false);

/// This kernel refused `CLONE_CLEAR_SIGHAND`: the child resets every disposition itself.
static NO_CLEAR_SIGHAND: AtomicBool = AtomicBool::new(false);

/// The signals the daemon ignores (SIGPIPE, std's, and whatever it inherited ignored and could
/// not handle instead), read once at the first spawn: the daemon sets no signal to ignored
/// after it has started. A child born with its handlers cleared resets only these.
static IGNORED: OnceLock<Vec<i32>> = OnceLock::new();

fn ignored() -> &'static [i32] {
    IGNORED.get_or_init(|| {
        (1..=64)
            .filter(|&sig| {
                let mut old = [0u64; 4];
                // SAFETY: the raw call (glibc's wrapper refuses 32 and 33) with no new action,
                // reading the current one into `old`, which outlives the call.
                let r = unsafe {
                    libc::syscall(
                        libc::SYS_rt_sigaction,
                        sig,
                        std::ptr::null::<u64>(),
                        old.as_mut_ptr(),
                        8usize,
                    )
                };
                r == 0 && old[0] == libc::SIG_IGN as u64
            })
            .collect()
    })
}

/// One stack, reused: a vfork-style clone returns only once the child is done with it.
static STACK: Mutex<Option<Stack>> = Mutex::new(None);

struct Stack {
    base: *mut c_void,
}

// SAFETY: the mapping is only used under `STACK`'s lock.
unsafe impl Send for Stack {}

impl Stack {
    /// The stack's base, mapped on first use.
    fn get(slot: &mut Option<Stack>) -> io::Result<*mut c_void> {
        if slot.is_none() {
            *slot = Some(Stack::map()?);
        }
        Ok(slot.as_ref().map_or(std::ptr::null_mut(), |s| s.base))
    }

    fn map() -> io::Result<Stack> {
        // SAFETY: a fresh anonymous mapping; the lowest page becomes a guard.
        unsafe {
            let base = libc::mmap(
                std::ptr::null_mut(),
                STACK_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            );
            if base == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            libc::mprotect(base, 4096, libc::PROT_NONE);
            Ok(Stack { base })
        }
    }
}

/// What the child reads and where it leaves its error.
struct Child<'a, 'b> {
    p: &'a mut Prepared<'b>,
    /// The signals whose disposition the child must reset: the ignored ones when it was born
    /// with its handlers cleared, else all.
    reset: &'static [i32],
    errno: AtomicI32,
}

/// Every signal but KILL and STOP, for a child born with the daemon's handlers.
static ALL_SIGNALS: [i32; 62] = {
    let mut all = [0i32; 62];
    let mut i = 0;
    let mut sig = 1;
    while sig <= 64 {
        if sig != libc::SIGKILL && sig != libc::SIGSTOP {
            all[i] = sig;
            i += 1;
        }
        sig += 1;
    }
    all
};

/// Starts the child of `p`. `None`: this kernel cannot (no clone3, or no `CLONE_INTO_CGROUP`),
/// nothing was started and the caller starts it another way.
///
/// With `attend`, the child cannot exec until its first exec is answered: the clone does not
/// wait for the exec (no `CLONE_VFORK`), `attend` answers it on this thread, and the start then
/// waits for the exec on a pipe the exec closes. The memory the child uses (its stack, `p`) is
/// kept until then, as a vfork parent's would be.
pub fn start(mut p: Prepared<'_>, attend: Option<&mut Box<dyn Attend>>) -> Option<io::Result<i32>> {
    if UNAVAILABLE.load(Ordering::Relaxed) {
        return None;
    }
    let done = match attend.is_some() {
        true => match super::pipe::pipe() {
            Ok(ends) => Some(ends),
            Err(e) => return Some(Err(e)),
        },
        false => None,
    };
    if let Some((_, write)) = &done {
        p.fds.push(std::os::fd::AsRawFd::as_raw_fd(write));
    }
    let vfork = done.is_none();
    let mut guard = STACK.lock().unwrap_or_else(|e| e.into_inner());
    let stack = match Stack::get(&mut guard) {
        Ok(s) => s,
        Err(e) => return Some(Err(e)),
    };
    let cgroup = p.cgroup.map(|entry| entry.dir);
    let clear = !NO_CLEAR_SIGHAND.load(Ordering::Relaxed);
    let fds = std::mem::take(&mut p.fds);
    let mut child = Child {
        p: &mut p,
        reset: if clear { ignored() } else { &ALL_SIGNALS },
        errno: AtomicI32::new(0),
    };
    let arg: *mut c_void = (&mut child as *mut Child).cast();
    // SAFETY: the child runs only `child_main` on `child`, which outlives the call (the
    // parent is suspended until the child has exec'd or exited); the stack is ours under
    // the lock. From the spawner thread, the child has the descriptors it uses at the same
    // numbers, and few others.
    let clone = || unsafe { vfork_clone(stack, cgroup, (clear, vfork), child_main, arg) };
    let mut ret = match vfork {
        true => super::spawner::run(&fds, clone).unwrap_or_else(clone),
        false => clone(),
    };
    if ret == -(libc::EINVAL as isize) && clear {
        // A kernel before 5.5: the child resets all, from now on.
        NO_CLEAR_SIGHAND.store(true, Ordering::Relaxed);
        child.reset = &ALL_SIGNALS;
        // SAFETY: as above.
        ret = unsafe { vfork_clone(stack, cgroup, (false, vfork), child_main, arg) };
    }
    if let (Some((read, write)), Some(attend), true) = (done, attend, ret > 0) {
        // Only the child's copy of the write end may remain: its exec (or exit) closes it.
        drop(write);
        let answered = attend.first_exec(ret as i32, std::os::fd::AsRawFd::as_raw_fd(&read));
        if answered.is_err() {
            // SAFETY: kill(2) of the child just started, which nobody else reaps before us.
            unsafe { libc::kill(ret as i32, libc::SIGKILL) };
        }
        wait_for_end_of_file(&read);
        if let Err(e) = answered {
            // SAFETY: reaps the child killed above; the spawn lock keeps the reaper away.
            unsafe { libc::waitpid(ret as i32, std::ptr::null_mut(), 0) };
            return Some(Err(e));
        }
    }
    drop(guard);
    let cgroup = cgroup.is_some();
    if ret < 0 {
        let errno = (-ret) as i32;
        return match errno {
            // No clone3 at all, or one without the cgroup field.
            libc::ENOSYS | libc::E2BIG => {
                UNAVAILABLE.store(true, Ordering::Relaxed);
                None
            }
            // A filter that refuses clone3 (some container runtimes).
            libc::EPERM if !cgroup => {
                UNAVAILABLE.store(true, Ordering::Relaxed);
                None
            }
            _ => Some(Err(io::Error::from_raw_os_error(errno))),
        };
    }
    let pid = ret as i32;
    match child.errno.load(Ordering::SeqCst) {
        0 => Some(Ok(pid)),
        errno => {
            // It exits at once; the caller holds the spawn lock, so nobody else reaps it.
            // SAFETY: waitpid on our own child with a null status pointer.
            while unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) } < 0
                && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
            {}
            Some(Err(io::Error::from_raw_os_error(errno)))
        }
    }
}

/// Reads `fd` until end of file (the child's exec or exit closed the last write end).
fn wait_for_end_of_file(fd: &OwnedFd) {
    let mut buf = [0u8; 8];
    loop {
        // SAFETY: reads into a local buffer of the given length.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n == 0 || (n < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR)) {
            return;
        }
    }
}

/// A vfork-style clone3 onto `stack`, into `cgroup` if given, with every signal blocked
/// around it; the child runs `f(arg)`. `(clear_handlers, vfork)`: without `vfork` the clone
/// returns at once (the memory is still shared). The pid, or `-errno`.
unsafe fn vfork_clone(
    stack: *mut c_void,
    cgroup: Option<i32>,
    (clear_handlers, vfork): (bool, bool),
    f: extern "C" fn(*mut c_void) -> !,
    arg: *mut c_void,
) -> isize {
    let mut args = CloneArgs {
        flags: match vfork {
            true => (libc::CLONE_VM | libc::CLONE_VFORK) as u64,
            false => libc::CLONE_VM as u64,
        },
        exit_signal: libc::SIGCHLD as u64,
        stack: stack as u64,
        stack_size: STACK_SIZE as u64,
        ..CloneArgs::default()
    };
    if let Some(dir) = cgroup {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = dir as u64;
    }
    if clear_handlers {
        args.flags |= CLONE_CLEAR_SIGHAND;
    }
    let _blocked = BlockSignals::new();
    // SAFETY: the caller's contract.
    unsafe { clone3(&mut args, f, arg) }
}

/// Whether a child can be born in the cgroup whose directory is open as `dir` (clone3 with
/// `CLONE_INTO_CGROUP`, Linux 5.7): a trial child that exits at once.
pub fn can_start_in(dir: i32) -> bool {
    extern "C" fn exit_at_once(_: *mut c_void) -> ! {
        // SAFETY: ends the trial child.
        unsafe { libc::_exit(0) }
    }
    let mut guard = STACK.lock().unwrap_or_else(|e| e.into_inner());
    let Ok(stack) = Stack::get(&mut guard) else {
        return false;
    };
    // SAFETY: the child only calls _exit.
    let pid = unsafe {
        vfork_clone(
            stack,
            Some(dir),
            (false, true),
            exit_at_once,
            std::ptr::null_mut(),
        )
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: reaps the trial child (the reaper does not exist yet at set-up).
    unsafe { libc::waitpid(pid as i32, std::ptr::null_mut(), 0) };
    true
}

/// All signals blocked in this thread until dropped.
struct BlockSignals(libc::sigset_t);

impl BlockSignals {
    fn new() -> BlockSignals {
        // SAFETY: sigset_t is plain data; the calls fill and apply it.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
            BlockSignals(old)
        }
    }
}

impl Drop for BlockSignals {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved in `new`.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

/// The child's entry, on its own stack. Never returns: it execs or exits 127 with its error
/// left in `errno`.
extern "C" fn child_main(arg: *mut c_void) -> ! {
    // SAFETY: `arg` is the parent's `Child`, alive while the parent is suspended.
    let child = unsafe { &mut *arg.cast::<Child>() };
    // SAFETY: `prepare_and_exec` only makes system calls on prepared data.
    let errno = unsafe { prepare_and_exec(child.p, child.reset) };
    child.errno.store(errno.max(1), Ordering::SeqCst);
    // SAFETY: _exit ends the child without running anything of the daemon's.
    unsafe { libc::_exit(127) }
}

/// In the child: returns only on a failure, with its errno.
unsafe fn prepare_and_exec(p: &mut Prepared<'_>, reset: &[i32]) -> i32 {
    let errno = || {
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL)
    };
    // SAFETY: system calls on the prepared data, valid until the exec; see the module.
    unsafe {
        // Default dispositions: the daemon's handlers must never run here (born without them,
        // or reset here), and what it ignores (SIGPIPE) the command must not.
        // The raw call: glibc's wrapper refuses the signals it keeps for itself (32, 33),
        // which may have come in ignored. All-zero is SIG_DFL with no flags on every layout.
        let dfl = [0u64; 4];
        for &sig in reset {
            libc::syscall(libc::SYS_rt_sigaction, sig, dfl.as_ptr(), 0usize, 8usize);
        }
        // A source descriptor below 3 would be overwritten by an earlier dup2: move it up first.
        let mut fds = p.stdio;
        for (target, fd) in fds.iter_mut().enumerate() {
            if *fd >= 0 && *fd < 3 && *fd != target as i32 {
                *fd = libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, 3);
                if *fd < 0 {
                    return errno();
                }
            }
        }
        for (target, &fd) in fds.iter().enumerate() {
            let target = target as i32;
            let placed = match fd {
                -1 => 0,
                // dup2 onto itself would keep close-on-exec.
                _ if fd == target => libc::fcntl(fd, libc::F_SETFD, 0),
                _ => libc::dup2(fd, target) - target,
            };
            if placed != 0 {
                return errno();
            }
        }
        if p.group == Group::Own && libc::setpgid(0, 0) != 0 {
            return errno();
        }
        if let Some(dir) = &p.cwd {
            if libc::chdir(dir.as_ptr()) != 0 {
                return errno();
            }
        }
        for hook in p.hooks.iter_mut() {
            if let Err(e) = hook() {
                return e.raw_os_error().unwrap_or(libc::EINVAL);
            }
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        libc::execve(p.program.as_ptr(), p.argv.as_ptr(), p.envp.as_ptr());
        errno()
    }
}
