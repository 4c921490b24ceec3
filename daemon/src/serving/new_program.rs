//! Which program the daemon may become (`cubactl daemon upgrade`, `restart`). An upgrade runs a file as the daemon itself: outside
//! every sandbox, with the socket, every process and the person's trust. So the file is judged
//! before anything runs it, by who could have written it, and what was judged is what runs:
//! it is opened once and executed through that descriptor (a path swapped afterwards changes
//! nothing).
//!
//! Accepted: the program the daemon was started from, at the path it was installed at (so a
//! new version installed over it takes over at `cubactl daemon restart`), or a file owned by
//! root that only root may write. Anything else could have been written by a command the
//! daemon ran (as the daemon's own user), and is refused.

use std::path::PathBuf;

// Only Unix accepts a program and hands over to it.
#[cfg(unix)]
use {
    crate::parts::reaper::Reaper,
    crate::platform::{set_cloexec, spawn::Spawn},
    std::fs::File,
    std::os::fd::AsRawFd,
    std::os::unix::fs::MetadataExt,
    std::path::Path,
    std::time::Duration,
    tokio::time::timeout,
};

/// A program accepted to take the hand-over: its descriptor and the path it was named by (on
/// Windows, which has no upgrade, none is ever accepted).
#[derive(Debug)]
pub struct Accepted {
    #[cfg(unix)]
    pub file: File,
    pub path: PathBuf,
}

#[cfg(unix)]
impl Accepted {
    /// The path through which the accepted file itself is run, whatever its name is by now.
    pub fn proc_path(&self) -> PathBuf {
        let fd = self.file.as_raw_fd();
        match cfg!(target_os = "linux") {
            true => PathBuf::from(format!("/proc/self/fd/{fd}")),
            false => PathBuf::from(format!("/dev/fd/{fd}")),
        }
    }
}

/// The hand-over format this program writes and reads (`handover/`). A program that reads
/// another version is refused before the old one stops anything (`cubad --handover-version`).
#[cfg(unix)]
pub const HANDOVER_VERSION: u32 = 12;

#[cfg(unix)]
impl Accepted {
    /// Asks the program which hand-over version it reads (`--handover-version`), run through
    /// its descriptor; refuses one that cannot take ours.
    pub async fn takes_handover(&self, reaper: &Reaper) -> Result<(), String> {
        let accepted = self;
        let binary = accepted.path.as_path();
        let cannot = |e: std::io::Error| format!("cannot run {}: {e}", binary.display());
        let (read_end, write_end) = crate::platform::pipe::pipe().map_err(cannot)?;
        let null = || {
            std::fs::File::options()
                .read(true)
                .write(true)
                .open("/dev/null")
        };
        let mut cmd = Spawn::new(accepted.proc_path());
        let fd = accepted.file.as_raw_fd();
        // Open across the exec: a `#!` program reads itself through that descriptor's path.
        cmd.uses(fd).hook(Box::new(move || set_cloexec(fd, false)));
        cmd.arg("--handover-version").stdio(
            null().map_err(cannot)?.into(),
            write_end,
            null().map_err(cannot)?.into(),
        );
        // The reaper collects every child of the daemon: this one's exit comes from it too.
        let (pid, exit, _) = reaper.spawn(cmd).map_err(cannot)?;
        let read = tokio::task::spawn_blocking(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut std::fs::File::from(read_end), &mut text);
            text
        });
        let text = match timeout(Duration::from_secs(5), read).await {
            Ok(Ok(text)) => text,
            _ => {
                crate::platform::signal::kill_child(pid);
                return Err(format!(
                    "{} did not answer --handover-version",
                    binary.display()
                ));
            }
        };
        let _ = timeout(Duration::from_secs(1), exit).await;
        let versions: Vec<u32> = text
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        if !versions.contains(&HANDOVER_VERSION) {
            return Err(format!(
                "{} cannot take this daemon's hand-over (version {HANDOVER_VERSION}; it reads {}); restart \
                 with --kill instead",
                binary.display(),
                if versions.is_empty() {
                    "none".to_string()
                } else {
                    format!("{versions:?}")
                }
            ));
        }
        Ok(())
    }
}

/// Judges `binary` as the program to hand over to; `installed` is the one the daemon runs from.
#[cfg(unix)]
pub fn accept(binary: &Path, installed: &Path) -> Result<Accepted, String> {
    let shown = binary.display();
    if !binary.is_absolute() {
        return Err(format!("binary {shown}: give an absolute path"));
    }
    let file = File::open(binary).map_err(|e| format!("cannot open {shown}: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    if !meta.is_file() || meta.mode() & 0o111 == 0 {
        return Err(format!("{shown} is not an executable file"));
    }
    let same_path = |p: &Path| std::fs::canonicalize(p).ok();
    let is_installed = same_path(binary).is_some_and(|b| Some(b) == same_path(installed));
    if is_installed {
        return Ok(Accepted {
            file,
            path: binary.to_path_buf(),
        });
    }
    let writable_by_others = meta.mode() & 0o022 != 0;
    if meta.uid() != 0 || writable_by_others {
        let who = match meta.uid() {
            0 => "root, but group or others may write it".to_string(),
            uid => format!("uid {uid}"),
        };
        return Err(format!(
            "{shown} is owned by {who}: a command cuba-exec ran could have written it, and an \
             upgrade runs it as the daemon. Install the new cubad over the running one ({}) and \
             run `cubactl daemon restart`, or give a file owned by root that only root may write",
            installed.display()
        ));
    }
    Ok(Accepted {
        file,
        path: binary.to_path_buf(),
    })
}

#[cfg(all(test, unix))]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_installed_program_or_a_file_only_root_may_write() {
        let dir = tempfile::tempdir().unwrap();
        let installed = dir.path().join("cubad");
        std::fs::write(&installed, b"\x7fELF").unwrap();
        std::fs::set_permissions(&installed, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(accept(&installed, &installed).is_ok());
        assert!(accept(Path::new("cubad"), &installed)
            .unwrap_err()
            .contains("absolute"));
        assert!(accept(&dir.path().join("none"), &installed).is_err());
        let other = dir.path().join("new");
        std::fs::write(&other, b"#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(accept(&other, &installed)
            .unwrap_err()
            .contains("not an executable"));
        std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o777)).unwrap();
        let why = accept(&other, &installed).unwrap_err();
        // The test runs as root in CI (a root-owned file others may write) or as a user.
        assert!(why.contains("could have written it"), "{why}");
        std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o755)).unwrap();
        // SAFETY: getuid has no preconditions.
        let root = unsafe { libc::getuid() } == 0;
        assert_eq!(accept(&other, &installed).is_ok(), root);
        // A link to the installed program is that program.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&installed, &link).unwrap();
        assert!(accept(&link, &installed).is_ok());
    }
}
