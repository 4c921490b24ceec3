//! cuba-exec's own processes are not a way in for a command it runs: under a daemon of an
//! ordinary user, a command of that same user cannot trace `cubad`, `cuba-exec` or `cubactl`,
//! take their descriptors (`pidfd_getfd`: the MCP server's connection to the daemon) or read
//! their memory; and a sandboxed command cannot signal the daemon (Landlock's signal scope).

#![allow(clippy::unwrap_used)]

use std::os::unix::process::CommandExt;
use std::process::Stdio;

use cuba_tests::{machine, Step, TestDaemon};

/// Tries each way into `pid` and prints what happened: `NAME ok` or `NAME errno=N`.
const PROBE: &str = r#"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
pid = int(sys.argv[1])
r = libc.ptrace(16, pid, 0, 0)
if r == 0:
    os.waitpid(pid, 0x40000000)
    libc.ptrace(17, pid, 0, 0)
    print("ptrace ok")
else:
    print("ptrace errno=%d" % ctypes.get_errno())
pfd = libc.syscall(434, pid, 0)
r = libc.syscall(438, pfd, 0, 0)
print("pidfd_getfd ok" if r >= 0 else "pidfd_getfd errno=%d" % ctypes.get_errno())
try:
    with open("/proc/%d/mem" % pid, "rb") as m:
        print("mem ok")
except OSError as e:
    print("mem errno=%d" % e.errno)
"#;

/// Kills the test's own helper processes when dropped.
struct Kill(Vec<std::process::Child>);

impl Drop for Kill {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_cannot_trace_take_from_or_read_our_processes() {
    if !machine::root() {
        return machine::skip(
            "tracing cuba-exec's processes from a command",
            "this test runs a daemon as nobody: it needs root",
        );
    }
    let (uid, gid) = (65534, 65534);
    let d = TestDaemon::builder().as_user(uid, gid).start().await;
    let probe = d.dir().join("probe.py");
    std::fs::write(&probe, PROBE).unwrap();
    // An MCP server and a cubactl of the same user, each holding a connection or its stdin.
    let mut shim = std::process::Command::new(cuba_tests::bin("cuba-exec"));
    shim.env("CUBA_EXEC_SOCKET", d.socket())
        .env("HOME", d.dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .uid(uid)
        .gid(gid);
    let mut ctl = std::process::Command::new(cuba_tests::bin("cubactl"));
    ctl.args(["audit", "-f"])
        .env("CUBA_EXEC_SOCKET", d.socket())
        .env("HOME", d.dir())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .uid(uid)
        .gid(gid);
    let helpers = Kill(vec![shim.spawn().unwrap(), ctl.spawn().unwrap()]);
    let status = d
        .cubactl(&["daemon", "status", "--json"])
        .output()
        .step()
        .await
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let cubad = status["pid"].as_u64().unwrap();
    let targets = [
        ("cubad", cubad),
        ("cuba-exec", u64::from(helpers.0[0].id())),
        ("cubactl", u64::from(helpers.0[1].id())),
    ];
    for (name, pid) in targets {
        let out = d
            .cubactl(&["run", "--", &format!("python3 {} {pid}", probe.display())])
            .output()
            .step()
            .await
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for way in ["ptrace errno=1", "pidfd_getfd errno=1", "mem errno=13"] {
            assert!(said.contains(way), "{name} (pid {pid}): {way}: {said}");
        }
    }
    drop(helpers);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_command_cannot_signal_the_daemon() {
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_SANDBOX", "workspace-write")
        .start()
        .await;
    let c = d.client().await;
    let status = c.status().step().await.unwrap();
    // Landlock's signal scope is in Linux 6.12 (ABI 6) and later.
    if !machine::kernel_at_least(6, 12) {
        return machine::skip("Landlock's signal scope", "this kernel is older than 6.12");
    }
    let text = format!(
        "kill -STOP {pid}; echo stop=$?; kill -TERM {pid}; echo term=$?; \
         sleep 30 & kill $! && echo own=ok",
        pid = status.pid
    );
    let (p, out) = {
        let p = c.spawn(cuba_tests::spawn_req(&text)).step().await.unwrap();
        let done = cuba_tests::wait_exit(&c, p.id).await.process;
        let out = String::from_utf8_lossy(&cuba_tests::read_all(&c, p.id).await).into_owned();
        (done, out)
    };
    assert!(
        out.contains("stop=1") && out.contains("term=1") && out.contains("own=ok"),
        "{out} {p:?}"
    );
    // Still serving, and not stopped.
    let again = c.status().step().await.unwrap();
    assert_eq!(again.pid, status.pid);
}
