//! Keeping a program of cuba-exec to itself: its memory and descriptors are not for another
//! process of the same user. `cubad` holds every process and the person's trust, `cuba-exec`
//! and `cubactl` a connection to it, `cuba-askpass` a password: none may be traced, have its
//! descriptors taken (`pidfd_getfd`) or its memory read (`/proc/PID/mem`,
//! `process_vm_readv`), which the kernel allows a process of the same user otherwise.

/// Makes this process not dumpable (Linux: `PR_SET_DUMPABLE` 0): only a process with
/// `CAP_SYS_PTRACE` may trace it or read it then. Its `/proc/PID` entries become root's, so a
/// process of the same user no longer reads its environment or descriptors either. A child it
/// starts is dumpable again once it has run a program of its own (the flag belongs to the
/// memory, which an exec replaces). Elsewhere: nothing yet.
pub fn keep_to_itself() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with integer arguments; it cannot fail for a valid flag.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn a_process_kept_to_itself_is_not_dumpable_and_its_children_are() {
        // In a child: the flag would stay on this test binary otherwise.
        let status = std::process::Command::new(std::env::current_exe().expect("exe"))
            .env("CUBA_PRIVATE_PROBE", "1")
            .args(["--exact", "private::tests::probe", "--nocapture"])
            .status()
            .expect("run the probe");
        assert!(status.success());
    }

    #[test]
    fn probe() {
        if std::env::var_os("CUBA_PRIVATE_PROBE").is_none() {
            return;
        }
        super::keep_to_itself();
        // SAFETY: prctl reads the flag.
        assert_eq!(unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) }, 0);
        let out = std::process::Command::new("sh")
            .args(["-c", "grep -c . /proc/self/environ"])
            .output()
            .expect("sh");
        assert!(
            out.status.success(),
            "a child reads its own /proc after its exec"
        );
    }
}
