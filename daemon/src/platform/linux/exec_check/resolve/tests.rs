//! The resolver against real processes: a child whose root, working directory, descriptors and
//! `/proc/self` are its own, not the test's.

#![allow(clippy::unwrap_used)]

use std::os::unix::fs::MetadataExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::*;

/// A child that has opened `/bin/true` as descriptor 3 and reads `stdin` as its stdin, in
/// `cwd`; killed when dropped.
struct Subject(Child);

impl Drop for Subject {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn subject(cwd: &std::path::Path, stdin: std::fs::File) -> (Subject, Caller<'static>) {
    let child = Command::new("/bin/sh")
        .args(["-c", "exec 3</bin/true; exec sleep 60"])
        .current_dir(cwd)
        .stdin(Stdio::from(stdin))
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    // Its descriptor 3 is there once the shell has run its redirection and exec'd sleep.
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::read_link(format!("/proc/{pid}/fd/3")).is_err()
        || std::fs::read_link(format!("/proc/{pid}/exe"))
            .is_ok_and(|e| e.to_string_lossy().contains("sh"))
    {
        assert!(Instant::now() < deadline, "the subject never got ready");
        std::thread::sleep(Duration::from_millis(1));
    }
    (Subject(child), Caller::new(pid, None, None))
}

fn id_of(f: &Found) -> (u64, u64) {
    let m = std::fs::metadata(format!("/proc/self/fd/{}", f.fd.as_raw_fd())).unwrap();
    (m.dev(), m.ino())
}

fn id_at(path: &str) -> (u64, u64) {
    let m = std::fs::metadata(path).unwrap();
    (m.dev(), m.ino())
}

#[test]
fn paths_are_the_callers_own() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("data"), b"stdin of the subject").unwrap();
    let stdin = std::fs::File::open(dir.path().join("data")).unwrap();
    std::os::unix::fs::symlink("/bin/true", dir.path().join("to-true")).unwrap();
    std::os::unix::fs::symlink("loop", dir.path().join("loop")).unwrap();
    let (_s, c) = subject(dir.path(), stdin);

    // Plain, and through links (`/bin` → `usr/bin` on merged systems): named by the file.
    let f = find(&c, Base::Cwd, b"/usr/bin/env", true).unwrap();
    assert_eq!(
        (f.name.as_slice(), id_of(&f)),
        (&b"env"[..], id_at("/usr/bin/env"))
    );
    let f = find(&c, Base::Cwd, b"to-true", true).unwrap();
    assert_eq!(id_of(&f), id_at("/bin/true"));
    assert_eq!(f.name, name_of(&f.fd).unwrap());
    // What the caller's own `/proc/self` names, not the daemon's.
    let f = find(&c, Base::Cwd, b"/proc/self/exe", true).unwrap();
    assert_eq!(id_of(&f), id_at(&format!("/proc/{}/exe", c.tid)));
    assert_ne!(id_of(&f), id_at("/proc/self/exe"));
    let f = find(&c, Base::Cwd, b"/dev/fd/3", true).unwrap();
    assert_eq!(id_of(&f), id_at("/bin/true"));
    let f = find(&c, Base::Cwd, b"/proc/thread-self/fd/3", true).unwrap();
    assert_eq!(id_of(&f), id_at("/bin/true"));
    let f = find(&c, Base::Cwd, b"/dev/stdin", true).unwrap();
    assert_eq!(id_of(&f), id_at(dir.path().join("data").to_str().unwrap()));
    let f = find(&c, Base::Cwd, b"/proc/self/cwd/to-true", true).unwrap();
    assert_eq!(id_of(&f), id_at("/bin/true"));
    let f = find(&c, Base::Dir(3), b"", true);
    assert!(f.is_err(), "an empty path is not AT_EMPTY_PATH here");
    // `..` above the root stays at the root, as for the kernel.
    let f = find(&c, Base::Cwd, b"/../../usr/bin/env", true).unwrap();
    assert_eq!(id_of(&f), id_at("/usr/bin/env"));
    let f = find(&c, Base::Cwd, b"../../../../../../usr/bin/env", true).unwrap();
    assert_eq!(id_of(&f), id_at("/usr/bin/env"));

    // What the kernel would say instead.
    assert_eq!(
        find(&c, Base::Cwd, b"/nonexistent/x", true).unwrap_err(),
        Miss::Errno(libc::ENOENT)
    );
    assert_eq!(
        find(&c, Base::Cwd, b"data/x", true).unwrap_err(),
        Miss::Errno(libc::ENOTDIR)
    );
    assert_eq!(
        find(&c, Base::Cwd, b"loop", true).unwrap_err(),
        Miss::Errno(libc::ELOOP)
    );
    assert_eq!(
        find(&c, Base::Cwd, b"to-true", false).unwrap_err(),
        Miss::Errno(libc::ELOOP)
    );
    assert_eq!(
        find(&c, Base::Cwd, b"", true).unwrap_err(),
        Miss::Errno(libc::ENOENT)
    );
}

#[test]
fn a_deleted_file_reads_through_its_descriptor() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gone");
    std::fs::write(&path, b"#!/bin/sh\n").unwrap();
    let held = std::fs::File::open(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let me = Caller::new(std::process::id() as i32, None, None);
    let n = held.as_raw_fd();
    let f = find(
        &me,
        Base::Cwd,
        format!("/proc/self/fd/{n}").as_bytes(),
        true,
    )
    .unwrap();
    assert_eq!(f.name, b"gone");
    let mut text = String::new();
    std::io::Read::read_to_string(&mut reopen(&f.fd).unwrap(), &mut text).unwrap();
    assert_eq!(text, "#!/bin/sh\n");
}
