//! The program layers: what the shell is told to run. Command text as `-c TEXT`, or as a script
//! file when it is too long for an argument (removed when the process ends), or for a session's
//! shell the pipe its commands come through, as fd 3.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::error::{LaunchError, Stage};
use super::layer::Layer;
use super::plan::Program;
use crate::base::blocking::off_runtime;
use crate::platform::spawn::Spawn;
use crate::processes::supervise::Cleanup;

/// The layer that gives the shell its program.
pub fn layer(program: Program, shell: &str, script: PathBuf) -> Box<dyn Layer> {
    match program {
        Program::Inline(text) => Box::new(Inline(Some(text))),
        Program::Script(text) => Box::new(Script {
            text: Some(text),
            path: script,
            open: None,
        }),
        Program::Session(read) => Box::new(CommandPipe {
            read: Some(read),
            bash: Path::new(shell).file_name().is_some_and(|n| n == "bash"),
        }),
    }
}

struct Inline(Option<String>);

impl Layer for Inline {
    fn before(&mut self, cmd: &mut Spawn) -> Result<(), LaunchError> {
        let text = self.0.take().unwrap_or_default();
        cmd.arg("-c")
            .arg(crate::platform::shell_command_text(&text));
        Ok(())
    }
}

struct Script {
    text: Option<String>,
    path: PathBuf,
    /// The written file, open until the child has its copy as fd 3.
    open: Option<OwnedFd>,
}

impl Layer for Script {
    fn before(&mut self, cmd: &mut Spawn) -> Result<(), LaunchError> {
        let text = self.text.take().unwrap_or_default();
        let file = write_script(&self.path, text.as_bytes()).map_err(|e| {
            let why = format!("cannot write script file {}: {e}", self.path.display());
            LaunchError::os(Stage::Program, why, e)
        })?;
        // The shell reads the file it was given as fd 3, not its path: a `scripts/` renamed and
        // replaced by a link between the write and the shell's start cannot change what runs.
        let fd = OwnedFd::from(file);
        let raw = fd.as_raw_fd();
        self.open = Some(fd);
        cmd.arg("/dev/fd/3");
        cmd.uses(raw).hook(Box::new(move || on_fd_3(raw)));
        Ok(())
    }

    fn after(&mut self, _pid: i32) -> Result<(), LaunchError> {
        // The shell has its copy.
        self.open = None;
        Ok(())
    }

    fn undo(&mut self) -> Option<Cleanup> {
        Some(remove_script(self.path.clone()))
    }
}

/// A session's shell reads its commands from `/dev/fd/3`, the read end of a pipe of its own.
struct CommandPipe {
    read: Option<OwnedFd>,
    bash: bool,
}

impl Layer for CommandPipe {
    fn before(&mut self, cmd: &mut Spawn) -> Result<(), LaunchError> {
        let fd = self.read.as_ref().map(AsRawFd::as_raw_fd).ok_or_else(|| {
            LaunchError::new(Stage::Program, "the session's command pipe is gone")
        })?;
        // No start-up files, so the session is the client's environment and nothing else (as
        // `sh -c` is); the script is the command pipe, which the shell reads line by line.
        if self.bash {
            cmd.arg("--noprofile").arg("--norc");
        }
        cmd.arg("/dev/fd/3");
        cmd.uses(fd).hook(Box::new(move || on_fd_3(fd)));
        Ok(())
    }

    fn after(&mut self, _pid: i32) -> Result<(), LaunchError> {
        // The shell has its copy: the daemon keeps only the write end.
        self.read = None;
        Ok(())
    }
}

/// In the child before its exec: descriptor `fd` becomes fd 3, kept across the exec.
fn on_fd_3(fd: std::os::fd::RawFd) -> std::io::Result<()> {
    // SAFETY: dup2 / fcntl on integers only, async-signal-safe.
    let ok = unsafe {
        if fd == 3 {
            // dup2 onto itself would keep close-on-exec.
            libc::fcntl(3, libc::F_SETFD, 0) == 0
        } else {
            libc::dup2(fd, 3) == 3
        }
    };
    match ok {
        true => Ok(()),
        false => Err(std::io::Error::last_os_error()),
    }
}

/// Writes a command's script file anew in `scripts/`, never through a link: the directory is
/// opened from the state directory down without following one, and the file created through
/// that handle (a shell runs what is in it). Returns the file, open for reading from its start.
pub fn write_script(path: &Path, text: &[u8]) -> std::io::Result<std::fs::File> {
    use std::io::{Seek, Write};
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    };
    let mut file = cuba_protocol::safe_dir::Dir::open(dir, 1, true)?.create_new(name)?;
    file.write_all(text)?;
    file.rewind()?;
    Ok(file)
}

/// Removes a command's script file (if it had one) once the process has ended.
pub fn remove_script(path: std::path::PathBuf) -> Cleanup {
    Box::new(move || {
        off_runtime(move || {
            if let Err(e) = std::fs::remove_file(&path) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!("cannot remove {}: {e}", path.display());
                }
            }
        })
    })
}
