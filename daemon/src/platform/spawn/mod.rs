//! What a child is started with, and the start itself. The launch layers fill a [`Spawn`] (its
//! program, arguments, environment, directory, stdio, process group, hooks and cgroup); the
//! reaper starts it.
//!
//! On Linux the start is our own `clone3(CLONE_VM | CLONE_VFORK)` (`platform::clone`): as cheap
//! as posix_spawn whatever the daemon's size and whatever the hooks, and with
//! `CLONE_INTO_CGROUP` the child is born in its cgroup, so placing it costs no migration (a
//! migration waits for an RCU grace period: ~12 ms here). Elsewhere, or where the kernel lacks
//! clone3, std's `Command` starts it, hooks as `pre_exec`.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A hook run in the child before its exec. It may only make async-signal-safe system calls on
/// data prepared before the spawn: no allocation, no locks, no panics.
pub type Hook = Box<dyn FnMut() -> io::Result<()> + Send + Sync>;

/// What answers a child's first exec when the child cannot exec until somebody does (a
/// checked tree: its filter is in place before its own exec).
pub trait Attend: Send {
    /// The start returned before the child's exec (a clone that shares memory but does not
    /// wait): answer its first exec here, on the starting thread, with no other thread woken.
    /// `done` reads end of file once the child has exec'd or ended.
    fn first_exec(&mut self, pid: i32, done: RawFd) -> io::Result<()>;
    /// The start waits for the exec itself (a fork): another thread must answer it.
    fn elsewhere(&mut self) -> io::Result<()>;
}

/// How the child stands to the daemon's process groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// The daemon's own (only for the daemon's own helpers).
    Inherit,
    /// A process group of its own, led by the child (`setpgid(0, 0)`).
    Own,
    /// A session of its own (a hook makes it; the terminal layer's `setsid`).
    Session,
}

/// A cgroup the child is born in: its directory, open until the spawn returns (for
/// `CLONE_INTO_CGROUP`; the fallback start writes "0" to its `cgroup.procs` before the exec).
#[derive(Clone, Copy, Debug)]
pub struct CgroupEntry {
    pub dir: RawFd,
}

pub struct Spawn {
    program: OsString,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    cwd: Option<PathBuf>,
    /// The child's stdin, stdout and stderr; `None` inherits the daemon's.
    stdio: [Option<OwnedFd>; 3],
    group: Group,
    hooks: Vec<Hook>,
    cgroup: Option<CgroupEntry>,
    /// The descriptors the hooks use (the child must have them at these numbers).
    uses: Vec<RawFd>,
    /// Started with memory of its own (`own_memory`).
    own_memory: bool,
    /// What answers its first exec, where one must (`attend`).
    attend: Option<Box<dyn Attend>>,
}

/// A [`Spawn`] in the form the child reads: every string NUL-terminated, every pointer array
/// null-terminated, built in the parent so the child allocates nothing.
pub struct Prepared<'a> {
    pub program: CString,
    pub argv: Vec<*const libc::c_char>,
    pub envp: Vec<*const libc::c_char>,
    pub cwd: Option<CString>,
    pub stdio: [RawFd; 3],
    pub group: Group,
    pub hooks: &'a mut [Hook],
    pub cgroup: Option<CgroupEntry>,
    /// Every descriptor of the daemon the child uses: its stdio (the daemon's own where it
    /// inherits them), the cgroup's directory and what the hooks use.
    pub fds: Vec<RawFd>,
    /// Kept alive for `argv` / `envp`.
    _strings: Vec<CString>,
}

impl Spawn {
    pub fn new(program: impl AsRef<OsStr>) -> Spawn {
        Spawn {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
            stdio: [None, None, None],
            group: Group::Inherit,
            hooks: Vec::new(),
            uses: Vec::new(),
            cgroup: None,
            own_memory: false,
            attend: None,
        }
    }

    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Spawn {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// The child's whole environment (nothing of the daemon's is inherited).
    pub fn env(&mut self, env: Vec<(OsString, OsString)>) -> &mut Spawn {
        self.env = env;
        self
    }

    /// Sets `name` after the environment given (a later entry of a name wins).
    pub fn add_env(&mut self, name: &str, value: &str) -> &mut Spawn {
        self.env.push((name.into(), value.into()));
        self
    }

    pub fn current_dir(&mut self, dir: &Path) -> &mut Spawn {
        self.cwd = Some(dir.to_owned());
        self
    }

    /// Descriptors (the child's ends) for its stdin, stdout and stderr.
    pub fn stdio(&mut self, stdin: OwnedFd, stdout: OwnedFd, stderr: OwnedFd) -> &mut Spawn {
        self.stdio = [Some(stdin), Some(stdout), Some(stderr)];
        self
    }

    pub fn group(&mut self, group: Group) -> &mut Spawn {
        self.group = group;
        self
    }

    /// Says that a hook uses the descriptor `fd` (open until the spawn returns): the child has
    /// it at that number.
    pub fn uses(&mut self, fd: RawFd) -> &mut Spawn {
        self.uses.push(fd);
        self
    }

    /// Adds a hook, run in the child (in the order added) after its stdio, group and directory
    /// are set and before the exec.
    pub fn hook(&mut self, hook: Hook) -> &mut Spawn {
        self.hooks.push(hook);
        self
    }

    /// `a` answers the child's first exec: see [`Attend`].
    pub fn attend(&mut self, a: Box<dyn Attend>) -> &mut Spawn {
        self.attend = Some(a);
        self
    }

    /// The child gets memory of its own (a fork) instead of sharing the daemon's until its
    /// exec: for a child that changes what is per memory (its dumpable flag).
    pub fn own_memory(&mut self) -> &mut Spawn {
        self.own_memory = true;
        self
    }

    /// The child starts in this cgroup; both descriptors stay open until the spawn returns.
    pub fn cgroup(&mut self, entry: CgroupEntry) -> &mut Spawn {
        self.cgroup = Some(entry);
        self
    }

    pub fn program(&self) -> &OsStr {
        &self.program
    }

    /// The directory the child starts in (`None`: the daemon's).
    pub fn cwd(&self) -> Option<&Path> {
        self.cwd.as_deref()
    }

    /// Starts the child; returns its pid once it has exec'd. An error (a program that cannot
    /// run, a hook that failed) leaves no child behind: it was reaped here. Call with the
    /// reaper's spawn lock held.
    pub fn start(
        #[cfg_attr(not(target_os = "linux"), allow(unused_mut))] mut self,
    ) -> io::Result<i32> {
        #[cfg(target_os = "linux")]
        if !self.own_memory {
            let mut attend = self.attend.take();
            let prepared = self.prepare()?;
            if let Some(started) = crate::platform::clone::start(prepared, attend.as_mut()) {
                return started;
            }
            self.attend = attend;
        }
        self.start_std()
    }

    /// Starts the child with its stdio on `/dev/null` (unless given) and waits for it: for
    /// probes at start-up, before the reaper exists.
    pub fn status(mut self) -> io::Result<std::process::ExitStatus> {
        use std::os::unix::process::ExitStatusExt;
        if self.stdio[0].is_none() {
            let null = || {
                std::fs::File::options()
                    .read(true)
                    .write(true)
                    .open("/dev/null")
            };
            self.stdio(null()?.into(), null()?.into(), null()?.into());
        }
        let pid = self.start()?;
        let mut status = 0;
        // SAFETY: waitpid on the child just started, into a local.
        while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(e);
            }
        }
        Ok(std::process::ExitStatus::from_raw(status))
    }

    /// The start through std's `Command` (posix_spawn when there is no hook, else fork).
    pub(crate) fn start_std(mut self) -> io::Result<i32> {
        use std::os::unix::process::CommandExt;
        // A fork waits for the exec: the first exec is answered by another thread.
        if let Some(a) = self.attend.as_mut() {
            a.elsewhere()?;
        }
        let mut cmd = std::process::Command::new(&self.program);
        cmd.args(&self.args).env_clear().envs(self.env);
        if let Some(dir) = &self.cwd {
            cmd.current_dir(dir);
        }
        let [stdin, stdout, stderr] = self.stdio;
        if let (Some(i), Some(o), Some(e)) = (stdin, stdout, stderr) {
            cmd.stdin(i).stdout(o).stderr(e);
        }
        if let Some(entry) = self.cgroup {
            // Without clone3 the child moves itself, first of all: a write of "0" moves the
            // writer. SAFETY: openat, write and close, async-signal-safe, relative to a
            // directory open until the spawn returns.
            unsafe {
                cmd.pre_exec(move || {
                    let procs = c"cgroup.procs".as_ptr();
                    let fd = libc::openat(entry.dir, procs, libc::O_WRONLY | libc::O_CLOEXEC);
                    let written = fd >= 0 && libc::write(fd, b"0".as_ptr().cast(), 1) == 1;
                    let err = io::Error::last_os_error();
                    if fd >= 0 {
                        libc::close(fd);
                    }
                    if written {
                        Ok(())
                    } else {
                        Err(err)
                    }
                });
            }
        }
        if self.group == Group::Own {
            cmd.process_group(0);
        }
        for hook in self.hooks {
            // SAFETY: a `Hook` is async-signal-safe by its contract.
            unsafe {
                cmd.pre_exec(hook);
            }
        }
        Ok(cmd.spawn()?.id() as i32)
    }

    /// The child's form of this spawn. The program is looked up in the child's `PATH` (else
    /// the daemon's) unless it names a path.
    pub fn prepare(&mut self) -> io::Result<Prepared<'_>> {
        let nul = |what: &str| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{what} contains a NUL byte"),
            )
        };
        let c = |s: &OsStr, what: &str| CString::new(s.as_bytes()).map_err(|_| nul(what));
        let program = c(resolve(&self.program, &self.env).as_os_str(), "the program")?;
        let mut strings = Vec::with_capacity(1 + self.args.len() + self.env.len());
        strings.push(c(&self.program, "the program")?);
        for a in &self.args {
            strings.push(c(a, "an argument")?);
        }
        let argc = strings.len();
        for (k, v) in &self.env {
            let mut kv = Vec::with_capacity(k.len() + 1 + v.len());
            kv.extend_from_slice(k.as_bytes());
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            strings.push(CString::new(kv).map_err(|_| nul("the environment"))?);
        }
        let ptrs = |s: &[CString]| {
            let mut p: Vec<*const libc::c_char> = s.iter().map(|s| s.as_ptr()).collect();
            p.push(std::ptr::null());
            p
        };
        let (argv, envp) = (ptrs(&strings[..argc]), ptrs(&strings[argc..]));
        let cwd = match &self.cwd {
            Some(d) => Some(c(d.as_os_str(), "the directory")?),
            None => None,
        };
        let fd = |f: &Option<OwnedFd>| f.as_ref().map_or(-1, AsRawFd::as_raw_fd);
        let stdio = [fd(&self.stdio[0]), fd(&self.stdio[1]), fd(&self.stdio[2])];
        let inherited = (0..3).filter(|&i| stdio[i as usize] < 0);
        let fds = stdio
            .iter()
            .copied()
            .filter(|fd| *fd >= 0)
            .chain(inherited)
            .chain(self.cgroup.map(|c| c.dir))
            .chain(self.uses.iter().copied())
            .collect();
        Ok(Prepared {
            program,
            argv,
            envp,
            cwd,
            stdio,
            group: self.group,
            hooks: &mut self.hooks,
            cgroup: self.cgroup,
            fds,
            _strings: strings,
        })
    }
}

/// `program` as a path: itself when it has a `/`, else the first executable file of that name
/// in the environment's `PATH` (the daemon's when the environment has none), else itself (the
/// exec then fails with "not found").
fn resolve(program: &OsStr, env: &[(OsString, OsString)]) -> PathBuf {
    if program.as_bytes().contains(&b'/') {
        return PathBuf::from(program);
    }
    let path = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join(program);
        let c = CString::new(candidate.as_os_str().as_bytes());
        // SAFETY: access(2) on a NUL-terminated path.
        if c.is_ok_and(|c| unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0) {
            return candidate;
        }
    }
    PathBuf::from(program)
}

#[cfg(test)]
pub(crate) mod tests;
