//! What this machine has, decided from the machine itself (never from what a daemon reports,
//! which is what the tests check), and the one way a test that cannot run here says so.
//!
//! A skip is a result: [`skip`] prints it, appends it to the file `scripts/test` collects
//! (`CUBA_TESTS_SKIPS`) and prints at the end, and under CI (`CI=true`) fails the test: the CI
//! machines have every prerequisite (root, a writable cgroup v2 tree, Linux 5.7 or later, a
//! tmpfs mount, `sshd`), so a skip there means a check that stopped working.

use std::fs;
use std::io::Write;
use std::path::PathBuf;

/// Running as root (mounts, another uid).
pub fn root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Linux `major.minor` or later (`CLONE_INTO_CGROUP` is 5.7).
pub fn kernel_at_least(major: u32, minor: u32) -> bool {
    let release = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release.trim().split(|c: char| !c.is_ascii_digit());
    let got: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor_got: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    (got, minor_got) >= (major, minor)
}

/// This process's cgroup v2 directory, where a test daemon makes its own: `Some` when it can
/// (the directory is writable and takes subgroups).
pub fn writable_cgroup_v2() -> Option<PathBuf> {
    let dir = crate::cgroups::v2_of(std::process::id() as i32)?;
    let writable = nix::unistd::access(&dir, nix::unistd::AccessFlags::W_OK).is_ok();
    (writable && dir.join("cgroup.subtree_control").exists()).then_some(dir)
}

/// Whether a daemon with cgroups `auto` (the default) should run each process in a cgroup of
/// its own here: a writable tree, and a kernel that starts a process in one.
pub fn per_process_cgroups() -> bool {
    writable_cgroup_v2().is_some() && kernel_at_least(5, 7)
}

/// Whether this run is CI's, where every prerequisite is there.
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| v == "true" || v == "1")
}

/// The check `what` cannot run here because `why`: said on stderr and in `CUBA_TESTS_SKIPS`
/// (with the test's name, which libtest gives its thread); under CI a failure.
pub fn skip(what: &str, why: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    let line = format!("{test} ({what}): {why}");
    assert!(
        !in_ci(),
        "skipped under CI, whose machines have this: {line}"
    );
    eprintln!("SKIPPED {line}");
    if let Some(path) = std::env::var_os("CUBA_TESTS_SKIPS") {
        let file = fs::OpenOptions::new().create(true).append(true).open(path);
        if let Ok(mut f) = file {
            let _ = writeln!(f, "{line}");
        }
    }
}

/// In a `pre_exec` hook (Linux): a seccomp filter on this process (inherited by what it starts) under
/// which `seccomp(2)` fails with ENOSYS and every other call goes on, as in a container whose
/// profile forbids seccomp. Only async-signal-safe calls; the filter is on the stack.
#[cfg(target_os = "linux")]
pub fn forbid_seccomp() -> std::io::Result<()> {
    let f = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    let mut prog = [
        f(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 0),
        f(
            libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
            0,
            1,
            libc::SYS_seccomp as u32,
        ),
        f(
            libc::BPF_RET | libc::BPF_K,
            0,
            0,
            libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
        ),
        f(libc::BPF_RET | libc::BPF_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ];
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_mut_ptr(),
    };
    // SAFETY: prctl with integer arguments and a filter that lives across the call.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &fprog as *const libc::sock_fprog,
            ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Elsewhere there is no seccomp to forbid: the daemon cannot check execs anyway.
#[cfg(not(target_os = "linux"))]
pub fn forbid_seccomp() -> std::io::Result<()> {
    Ok(())
}

/// In a child before its exec: a mount namespace of its own where `/etc/hosts` is the file
/// `hosts` (bind-mounted over it; root only). Only async-signal-safe calls.
#[cfg(target_os = "linux")]
pub fn own_hosts_file(hosts: &std::ffi::CStr) -> std::io::Result<()> {
    let err = std::io::Error::last_os_error;
    // SAFETY: plain system calls on NUL-terminated strings that outlive them.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return Err(err());
        }
        // Private first: the bind must not reach the machine's own namespace.
        let none = std::ptr::null::<libc::c_char>();
        if libc::mount(
            none,
            c"/".as_ptr(),
            none,
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            return Err(err());
        }
        if libc::mount(
            hosts.as_ptr(),
            c"/etc/hosts".as_ptr(),
            none,
            libc::MS_BIND,
            std::ptr::null(),
        ) != 0
        {
            return Err(err());
        }
    }
    Ok(())
}

/// Elsewhere there is no mount namespace: the hosts file cannot be given.
#[cfg(not(target_os = "linux"))]
pub fn own_hosts_file(_hosts: &std::ffi::CStr) -> std::io::Result<()> {
    Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
}
