//! The genuine programs a password may go to: `sudo` (a setuid file of root's), `ssh`, `git`
//! and git's HTTP transports, and the askpass helper `cuba-askpass` itself, each known by its
//! file's identity (device and inode), found once when the daemon starts. A password ask is
//! judged before anything is put to the person: the process that connected must run the genuine
//! helper ([`Genuine::helper`], when it connects), and its parent, the program that ran it, one
//! of the genuine programs ([`Genuine::check`], at the ask); neither may be traced, nor started
//! with a loader variable (`LD_PRELOAD` …) naming a file the daemon's user could have written:
//! that puts other code into a genuine program.

#[cfg(unix)]
mod files;
mod shown;

use std::ffi::OsStr;
use std::path::Path;
#[cfg(unix)]
use std::path::PathBuf;

#[cfg(unix)]
use crate::platform::proc;
#[cfg(unix)]
use files::{root_only, Known};
#[cfg(unix)]
use shown::command_line;
pub use shown::{escaped, shortened};

/// The genuine programs, found once when the daemon starts.
#[cfg(unix)]
#[derive(Debug)]
pub struct Genuine {
    helper: Option<Known>,
    programs: Vec<Known>,
    /// The daemon's own uid: the real uid of a genuine `sudo` it asks for.
    uid: u32,
}

/// The program a password ask is for, judged genuine.
pub struct Asker {
    pub pid: i32,
    /// Its path and command line, as the question shows them.
    pub shown: String,
}

/// Why a password ask is refused: the process judged (the helper or its parent), its program
/// as far as known, and why.
#[derive(Clone, Debug)]
pub struct Refusal {
    pub pid: i32,
    pub program: String,
    pub why: String,
}

impl Refusal {
    pub fn new(pid: i32, program: impl Into<String>, why: impl Into<String>) -> Refusal {
        Refusal {
            pid,
            program: program.into(),
            why: why.into(),
        }
    }
}

#[cfg(unix)]
impl Genuine {
    /// Finds the genuine programs: `sudo`, `ssh` and `git` in `path_var`'s directories and the
    /// system's, git's HTTP transports beside each git, and `cuba-askpass` beside `exe` (the
    /// daemon's program, where the launcher finds it too).
    pub fn find(exe: &Path, path_var: Option<&OsStr>) -> Genuine {
        let programs = files::programs(path_var);
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        let helper = exe.parent().map(|d| d.join("cuba-askpass"));
        Genuine {
            helper: helper.and_then(|h| Known::at(&h, "cuba-askpass")),
            programs,
            uid,
        }
    }

    /// What was found, for the daemon's log.
    pub fn describe(&self) -> String {
        let helper = self
            .helper
            .as_ref()
            .map_or("none".to_string(), |h| h.path.display().to_string());
        let programs: Vec<String> = self
            .programs
            .iter()
            .map(|k| k.path.display().to_string())
            .collect();
        format!("helper {helper}; programs {}", programs.join(", "))
    }

    /// Judges the process that made a connection from inside a process tree as the askpass
    /// helper, when it connects (before its handshake is answered: from then on the helper may
    /// keep its `/proc` entries to itself): its program, when it is the genuine helper, untraced
    /// and started with no loader variable of the agent's; else why not.
    pub fn helper(&self, pid: Option<i32>) -> Result<String, Refusal> {
        let pid = pid
            .filter(|p| *p > 0)
            .ok_or_else(|| Refusal::new(0, "unknown", "the process asking cannot be told"))?;
        let program = self.helper_program(pid)?;
        untraced(pid, &program)?;
        clean_env(pid, &program)?;
        Ok(program)
    }

    /// Judges a password ask on a connection whose process `helper` was judged `judged` when
    /// it connected: the genuine helper, run by a genuine program, neither traced nor given
    /// other code; what the question shows of that program, or why it is refused.
    pub fn check(&self, helper: i32, judged: &Result<String, Refusal>) -> Result<Asker, Refusal> {
        let helper_program = judged.clone()?;
        // Traced since it connected? (`status` stays readable to this daemon.)
        untraced(helper, &helper_program)?;
        let parent = proc::stat(helper)
            .map(|s| s.ppid)
            .filter(|p| *p > 1)
            .ok_or_else(|| {
                Refusal::new(
                    helper,
                    &helper_program,
                    "the program that ran cuba-askpass is gone",
                )
            })?;
        let (path, setuid) = self.asker_program(parent)?;
        let program = path.display().to_string();
        untraced(parent, &program)?;
        // The loader ignores its variables in a setuid program.
        if !setuid {
            clean_env(parent, &program)?;
        }
        let shown = match proc::cmdline(parent) {
            Some(args) => format!("{program} `{}`", command_line(&args)),
            None => program,
        };
        Ok(Asker { pid: parent, shown })
    }

    /// The helper's program, when `pid` runs the genuine one.
    fn helper_program(&self, pid: i32) -> Result<String, Refusal> {
        let Some(helper) = &self.helper else {
            let why = "cuba-askpass was not found beside cubad when it started";
            return Err(Refusal::new(pid, "unknown", why));
        };
        let (path, file) = proc::exe(pid).map_err(|e| {
            let why = format!("the program of the process asking cannot be read: {e}");
            Refusal::new(pid, "unknown", why)
        })?;
        let program = path.display().to_string();
        if !helper.is(&file) {
            let why = format!(
                "the process asking (pid {pid}, {program}) is not cuba-askpass, the helper \
                 cubad gives"
            );
            return Err(Refusal::new(pid, program, why));
        }
        Ok(program)
    }

    /// The program of `pid` (the helper's parent), when it is a genuine one; and whether it is
    /// setuid.
    fn asker_program(&self, pid: i32) -> Result<(PathBuf, bool), Refusal> {
        match proc::exe(pid) {
            Ok((path, file)) => match self.programs.iter().find(|k| k.is(&file)) {
                Some(k) => Ok((path, k.setuid)),
                None => {
                    let program = path.display().to_string();
                    let why = format!(
                        "the program that ran cuba-askpass (pid {pid}, {program}) is not a \
                         genuine sudo, ssh or git"
                    );
                    Err(Refusal::new(pid, program, why))
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                Ok((self.setuid_sudo(pid)?, true))
            }
            Err(e) => {
                let why = format!("the program that ran cuba-askpass cannot be read: {e}");
                Err(Refusal::new(pid, "unknown", why))
            }
        }
    }

    /// A program whose file this daemon may not see (a setuid program running as root, when the
    /// daemon is not root): a genuine sudo when it runs as root for this daemon's user and its
    /// name is `sudo`; the path of the genuine one.
    fn setuid_sudo(&self, pid: i32) -> Result<PathBuf, Refusal> {
        let name = proc::name(pid).unwrap_or_default();
        let sudo = self.programs.iter().find(|k| k.name == "sudo");
        let creds = proc::creds(pid);
        match (sudo, creds) {
            (Some(sudo), Some(c)) if name == "sudo" && c.euid == 0 && c.ruid == self.uid => {
                Ok(sudo.path.clone())
            }
            _ => {
                let why = format!(
                    "the program that ran cuba-askpass (pid {pid}, {name}) cannot be seen and is \
                     not a genuine sudo"
                );
                Err(Refusal::new(pid, name, why))
            }
        }
    }
}

/// Refuses a traced process: its tracer reads what it reads.
#[cfg(unix)]
fn untraced(pid: i32, program: &str) -> Result<(), Refusal> {
    match proc::creds(pid) {
        Some(c) if !c.traced => Ok(()),
        Some(_) => Err(Refusal::new(
            pid,
            program,
            format!("{program} (pid {pid}) is being traced"),
        )),
        None => Err(Refusal::new(
            pid,
            program,
            format!("{program} (pid {pid}) is gone"),
        )),
    }
}

/// Refuses a process started with a loader variable naming a file (or directory) the daemon's
/// user could have written, or a relative one (the working directory's), or whose
/// environment cannot be read. Files only root can change are the system's own: a person's
/// `LD_LIBRARY_PATH` of such directories keeps working.
#[cfg(unix)]
fn clean_env(pid: i32, program: &str) -> Result<(), Refusal> {
    let Some(vars) = proc::env_vars(pid) else {
        let why = format!("the environment of {program} (pid {pid}) cannot be read");
        return Err(Refusal::new(pid, program, why));
    };
    for (name, value) in vars {
        // An empty value is no value to the loader.
        if !proc::LOADER_VARS.contains(&name.as_str()) || value.is_empty() {
            continue;
        }
        // An empty entry is the working directory's.
        let mut entries = value.split([':', ';', ' ', '\t']);
        if let Some(bad) = entries.find(|e| !root_only(Path::new(e))) {
            let why = format!(
                "{program} (pid {pid}) was started with {name}={}: `{}` is not a file only \
                 root can change, and could put other code into the program (run it without \
                 {name})",
                shortened(&escaped(&value, false), 100),
                shortened(&escaped(bad, false), 100),
            );
            return Err(Refusal::new(pid, program, why));
        }
    }
    Ok(())
}

/// On Windows no password ask is taken (`platform::capability::PASSWORD_ASKS`): no helper is
/// genuine.
#[cfg(windows)]
#[derive(Debug)]
pub struct Genuine;

#[cfg(windows)]
impl Genuine {
    pub fn find(_exe: &Path, _path_var: Option<&OsStr>) -> Genuine {
        Genuine
    }

    pub fn describe(&self) -> String {
        "none: password asks are not offered on Windows".to_string()
    }

    pub fn helper(&self, pid: Option<i32>) -> Result<String, Refusal> {
        Err(Self::refusal(pid.unwrap_or(0)))
    }

    pub fn check(&self, helper: i32, _: &Result<String, Refusal>) -> Result<Asker, Refusal> {
        Err(Self::refusal(helper))
    }

    fn refusal(pid: i32) -> Refusal {
        let f = crate::platform::capability::PASSWORD_ASKS;
        Refusal::new(
            pid,
            "unknown",
            format!("{} are not offered on Windows", f.name),
        )
    }
}

#[cfg(all(test, unix))]
mod tests;
