//! One daemon per user: a lock file in the state directory, open for writing by one process at
//! a time (the sharing mode of its handle). The pipe's first-instance flag says the same on
//! Windows; Wine does not enforce that flag, the sharing mode it does.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::windows::fs::OpenOptionsExt;
use std::path::Path;

const FILE_SHARE_READ: u32 = 1;
const FILE_SHARE_WRITE: u32 = 2;
const ERROR_SHARING_VIOLATION: i32 = 32;

/// The lock, or the pid written by the daemon that holds it.
#[derive(Debug)]
pub enum Taken {
    Ours(File),
    Held(String),
}

/// Takes the lock at `path` and writes this pid into it.
pub fn take(path: &Path) -> io::Result<Taken> {
    let opened = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        // Others may read the pid; nobody else may open it for writing meanwhile.
        .share_mode(FILE_SHARE_READ)
        .open(path);
    let mut file = match opened {
        Ok(file) => file,
        Err(e) if e.raw_os_error() == Some(ERROR_SHARING_VIOLATION) => {
            let mut pid = String::new();
            if let Ok(mut f) = OpenOptions::new()
                .read(true)
                .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE)
                .open(path)
            {
                let _ = f.read_to_string(&mut pid);
            }
            return Ok(Taken::Held(pid.trim().to_string()));
        }
        Err(e) => return Err(e),
    };
    file.set_len(0)?;
    file.rewind()?;
    write!(file, "{}", std::process::id())?;
    Ok(Taken::Ours(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_taker_finds_the_first_ones_pid() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("cubad.lock");
        let first = take(&path).expect("first");
        assert!(matches!(first, Taken::Ours(_)), "{first:?}");
        let pid = std::process::id().to_string();
        match take(&path).expect("second") {
            Taken::Held(held) => assert_eq!(held, pid),
            other => panic!("a second lock was taken: {other:?}"),
        }
        drop(first);
        assert!(matches!(take(&path).expect("again"), Taken::Ours(_)));
    }
}
