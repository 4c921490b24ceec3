//! A cgroup per process (Linux, where the daemon finds a writable cgroup v2 tree): the child is
//! in it before it runs, a stop kills it whole with `cgroup.kill` (a `setsid` + double-fork
//! escapee included), CPU and memory come from it, `pids_max` / `memory_max` go through it (v2
//! controllers, or the v1 hierarchies where v2 lacks them), an OOM kill is the reason given, an
//! emptied cgroup serves the next process, and the cgroups are removed at shutdown and, left by
//! a crashed daemon, at the next start. Where no cgroup v2 tree is writable the tests say so and
//! only the fallback is checked.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use cuba_protocol::{
    FollowRequest, ProcState, Request, Response, Signal, SignalRequest, StreamFilter,
};
use cuba_tests::{
    bounded, number_after, pid_alive, spawn, text, wait_exit, wait_for, wait_for_async, wait_match,
    TestDaemon, STEP,
};

/// A daemon and its cgroup base; dropping it kills the daemon, then whatever is left in the
/// base, and removes the cgroups.
struct Cg {
    d: TestDaemon,
    base: Option<PathBuf>,
    /// What the daemon said of its supervision.
    supervision: String,
}

impl Cg {
    /// A daemon with per-process cgroups asked for (`on`, so a kernel without
    /// `CLONE_INTO_CGROUP` is tested too), and `envs` on top.
    async fn start(envs: &[(&str, &str)]) -> Cg {
        let cg = Cg::launch(envs).await;
        // The machine decides whether there should be cgroups, not the daemon's report.
        match (&cg.base, cuba_tests::machine::writable_cgroup_v2()) {
            (None, Some(dir)) => panic!(
                "{} is a writable cgroup v2 tree, yet the daemon runs without cgroups: {}",
                dir.display(),
                cg.supervision
            ),
            (None, None) => cuba_tests::machine::skip(
                "cgroups",
                &format!("no writable cgroup v2 tree here ({})", cg.supervision),
            ),
            _ => {}
        }
        cg
    }

    /// As [`Cg::start`], for a daemon told to run without cgroups.
    async fn launch(envs: &[(&str, &str)]) -> Cg {
        let mut b = TestDaemon::builder().env("CUBA_EXEC_CGROUPS", "on");
        for (k, v) in envs {
            b = b.env(k, v);
        }
        let d = b.start().await;
        let status = d.client().await.status().await.unwrap();
        let base = status
            .supervision
            .strip_prefix("cgroup v2 at ")
            .map(|rest| PathBuf::from(rest.split(';').next().unwrap_or(rest)));
        Cg {
            d,
            base,
            supervision: status.supervision,
        }
    }

    /// The v2 cgroup of the running process `pid`, which must be under the base.
    fn dir(&self, pid: u32) -> PathBuf {
        let dir = cuba_tests::cgroups::v2_of(pid as i32).unwrap();
        assert_eq!(dir.parent(), self.base.as_deref(), "{}", dir.display());
        dir
    }

    /// Whether the memory controller is on for the per-process cgroups: then none is reused.
    fn reuses(&self) -> bool {
        let base = self.base.as_ref().unwrap();
        let on = std::fs::read_to_string(base.join("cgroup.subtree_control")).unwrap_or_default();
        !on.split_whitespace().any(|c| c == "memory")
    }
}

/// The process that was in cgroup `dir` has ended and the cgroup is empty: kept for the next
/// process, or removed.
async fn released(dir: &Path) -> bool {
    wait_for(|| !cuba_tests::cgroups::populated(dir), STEP).await
}

impl Drop for Cg {
    fn drop(&mut self) {
        self.d.kill9();
        if let Some(base) = &self.base {
            cuba_tests::cgroups::remove_tree(base);
        }
    }
}

fn procs(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

async fn stop(d: &TestDaemon, id: u64) -> cuba_protocol::ProcessInfo {
    let c = d.client().await;
    let req = SignalRequest {
        id,
        signal: Signal::Term,
        escalate: true,
        grace_ms: Some(300),
        wait: true,
    };
    bounded("stop", STEP, c.signal(req)).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_is_in_its_cgroup_before_it_runs() {
    let cg = Cg::start(&[]).await;
    if cg.base.is_none() {
        return;
    }
    let c = cg.d.client().await;
    // Forks at once: a move after the spawn could miss the first child. Both sleeps are
    // forked before the line the test waits for.
    let p = spawn(&c, "(sleep 31 &) ; sleep 32 & echo main=$$; wait").await;
    let main = number_after(&wait_match(&c, p.id, r"^main=\d+$").await, "main");
    // Each is marked once its exec is done (a process in the middle of one has no
    // environment yet).
    let three = wait_for(|| cg.d.marked(p.id).len() >= 3, STEP).await;
    let marked = cg.d.marked(p.id);
    assert!(three, "{marked:?}");
    let dir = cg.dir(p.pid);
    let inside = procs(&dir);
    assert!(inside.contains(&main), "shell {main} not in {inside:?}");
    for pid in &marked {
        assert!(inside.contains(pid), "{pid} not in its cgroup: {inside:?}");
    }
    assert_eq!(stop(&cg.d, p.id).await.state, ProcState::Killed);
    assert!(released(&dir).await, "{} still populated", dir.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cgroup_kill_ends_a_setsid_double_fork_escapee() {
    let cg = Cg::start(&[]).await;
    if cg.base.is_none() {
        return;
    }
    let c = cg.d.client().await;
    // The escapee leaves the session, is reparented (double fork) and ignores TERM.
    let cmd = r#"setsid sh -c "sh -c 'trap \"\" TERM; echo esc=\$\$; while :; do sleep 1; done' &"; echo main=$$; wait; sleep 300"#;
    let p = spawn(&c, cmd).await;
    let esc = number_after(&wait_match(&c, p.id, r"^esc=\d+$").await, "esc");
    let dir = cg.dir(p.pid);
    assert!(procs(&dir).contains(&esc), "escapee outside");
    let info = stop(&cg.d, p.id).await;
    assert_eq!(info.state, ProcState::Killed, "{info:?}");
    assert!(
        wait_for(|| !pid_alive(esc), STEP).await,
        "escapee {esc} survived"
    );
    assert!(released(&dir).await, "{} still populated", dir.display());
    assert!(cg.d.marked(p.id).is_empty(), "{:?}", cg.d.marked(p.id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_loop_shows_its_cpu_time_and_rate() {
    let cg = Cg::start(&[]).await;
    if cg.base.is_none() {
        return;
    }
    let c = cg.d.client().await;
    let p = spawn(&c, "echo go; while :; do :; done").await;
    let idle = spawn(&c, "echo go; exec sleep 300").await;
    wait_match(&c, p.id, "^go$").await;
    wait_match(&c, idle.id, "^go$").await;
    let busy = wait_for_async(
        || async { c.info(p.id).await.unwrap().cpu_ms.unwrap_or(0) > 0 },
        STEP,
    );
    assert!(busy.await, "no CPU time on a running row");
    // The rate is over the time since the daemon's previous look: a window of the daemon's
    // own length between two looks (a measurement, not a wait for an event).
    c.info(idle.id).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    let (spinning, sleeping) = (c.info(p.id).await.unwrap(), c.info(idle.id).await.unwrap());
    // Even on a loaded machine a busy loop gets a tenth of a core; `sleep` next to nothing (its
    // exec, after the `go`, may fall in the window: a millisecond of CPU).
    assert!(
        spinning.cpu_millicores.is_some_and(|m| m >= 100),
        "{spinning:?}"
    );
    assert!(
        sleeping.cpu_millicores.is_some_and(|m| m < 20),
        "{sleeping:?}"
    );
    let end = stop(&cg.d, p.id).await;
    let info = c.info(p.id).await.unwrap();
    assert!(
        info.cpu_ms.unwrap_or(0) > 0,
        "not kept after the end: {info:?} {end:?}"
    );
    assert_eq!(info.cpu_millicores, None, "no rate once it ended");
    stop(&cg.d, idle.id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_holding_memory_shows_it() {
    // From `memory.current` where the memory controller is on, else the summed RSS of the
    // cgroup's processes.
    let cg = Cg::start(&[]).await;
    if cg.base.is_none() {
        return;
    }
    let c = cg.d.client().await;
    let p = spawn(
        &c,
        "x=$(head -c 40000000 /dev/zero | tr '\\0' a); echo go; sleep 30",
    )
    .await;
    wait_match(&c, p.id, "^go$").await;
    let info = c.info(p.id).await.unwrap();
    let bytes = info.memory_bytes.unwrap_or(0);
    assert!(bytes >= 30_000_000, "{info:?}");
    stop(&cg.d, p.id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pids_max_refuses_a_fork_bomb_counts_it_and_the_tree_still_stops() {
    let cg = Cg::start(&[("CUBA_EXEC_PIDS_MAX", "20")]).await;
    if cg.base.is_none() {
        return;
    }
    let c = cg.d.client().await;
    let p = spawn(
        &c,
        // The subshell dies at its first failed fork (dash does); the shell waits with a
        // builtin, which needs no fork.
        "(i=0; while [ $i -lt 100 ]; do sleep 33 & i=$((i+1)); done) 2>&1; echo spawned; read x",
    )
    .await;
    wait_match(&c, p.id, "^spawned$").await;
    let out = text(&cuba_tests::read_all(&c, p.id).await).to_lowercase();
    assert!(
        out.contains("fork") || out.contains("resource temporarily"),
        "no fork failure: {out}"
    );
    let dir = cg.dir(p.pid);
    let inside = procs(&dir);
    assert!(
        inside.len() <= 20,
        "{} processes under pids_max 20",
        inside.len()
    );
    // The kernel's count of the refusals is the process's, while it runs and once it ended.
    let running = c.info(p.id).await.expect("info");
    assert_eq!(running.pids_max, Some(20), "{running:?}");
    assert!(running.forks_refused.is_some_and(|n| n >= 1), "{running:?}");
    let said = running.refused_forks().unwrap_or_default();
    assert!(said.contains("pids_max 20"), "{said}");
    let ended = stop(&cg.d, p.id).await;
    assert!(ended.forks_refused >= running.forks_refused, "{ended:?}");
    assert!(wait_for(|| inside.iter().all(|p| !pid_alive(*p)), STEP).await);
    assert!(released(&dir).await, "{} still populated", dir.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oom_kill_is_the_reason_given() {
    let cg = Cg::start(&[("CUBA_EXEC_MEMORY_MAX", "32M")]).await;
    if cg.base.is_none() {
        return;
    }
    let c = cg.d.client().await;
    // `tail` keeps a line it has not seen the end of: 200 MB with no newline.
    let p = spawn(&c, "head -c 200M /dev/zero | tail").await;
    let w = wait_exit(&c, p.id).await;
    let error = w.process.error.clone().unwrap_or_default();
    assert!(error.contains("out of memory"), "{:?}", w.process);
    assert!(error.contains("memory_max 32 MiB"), "{error}");
}

/// Whether this kernel can start a process in its cgroup (clone3 `CLONE_INTO_CGROUP`, 5.7).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_takes_a_cgroup_per_process_where_one_can_be_born_in_it() {
    // Where `on` finds a tree and the kernel clones into cgroups, the default does the same.
    let on = Cg::start(&[]).await;
    if on.base.is_none() {
        return;
    }
    if !cuba_tests::machine::kernel_at_least(5, 7) {
        cuba_tests::machine::skip("cgroups auto", "Linux before 5.7: no CLONE_INTO_CGROUP");
        return;
    }
    drop(on);
    let auto = Cg::start(&[("CUBA_EXEC_CGROUPS", "auto")]).await;
    assert!(auto.base.is_some(), "auto went without cgroups");
    let c = auto.d.client().await;
    let p = spawn(&c, "cat /proc/self/cgroup; sleep 30").await;
    let dir = auto.dir(p.pid);
    let leaf = dir.strip_prefix("/sys/fs/cgroup").unwrap_or(&dir);
    let leaf = leaf.file_name().unwrap().to_string_lossy().into_owned();
    wait_match(&c, p.id, &format!("^0::.*/{leaf}$")).await;
    assert_eq!(stop(&auto.d, p.id).await.state, ProcState::Killed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_cgroup_processes_still_run_and_stop() {
    for envs in [
        [("CUBA_EXEC_CGROUPS", "off")],
        [("CUBA_EXEC_CGROUP_PARENT", "/sys/fs/cgroup/no-such-parent")],
    ] {
        let cg = Cg::launch(&envs).await;
        let c = cg.d.client().await;
        let status = c.status().await.unwrap();
        assert!(
            status
                .supervision
                .starts_with("process groups + /proc tree walk"),
            "{envs:?}: {}",
            status.supervision
        );
        let p = spawn(&c, "echo up; sleep 34").await;
        wait_match(&c, p.id, "^up$").await;
        assert_eq!(stop(&cg.d, p.id).await.state, ProcState::Killed);
        let d = &cg.d;
        assert!(
            wait_for(|| d.marked(p.id).is_empty(), STEP).await,
            "{:?}",
            d.marked(p.id)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_emptied_cgroup_serves_the_next_process_and_all_go_at_the_end() {
    let mut cg = Cg::start(&[]).await;
    let Some(base) = cg.base.clone() else {
        return;
    };
    let c = cg.d.client().await;
    let p = spawn(&c, "sleep 30").await;
    let dir = cg.dir(p.pid);
    stop(&cg.d, p.id).await;
    if cg.reuses() {
        // Given back once its output is in, and taken by a later process (the longest free
        // first: at most one more made while it was not back yet).
        assert!(released(&dir).await, "{} still populated", dir.display());
        let reused = wait_for_async(
            || async {
                let q = spawn(&c, "sleep 31").await;
                let same = cg.dir(q.pid) == dir;
                stop(&cg.d, q.id).await;
                same
            },
            STEP,
        );
        assert!(reused.await, "{} was not reused", dir.display());
    } else {
        assert!(
            wait_for(|| !dir.exists(), STEP).await,
            "{} left",
            dir.display()
        );
    }
    // At shutdown every cgroup goes, the base too.
    // SAFETY: a signal to the test's own daemon.
    unsafe { libc::kill(cg.d.pid(), libc::SIGTERM) };
    assert!(cg.d.wait_daemon_exit(STEP).await.success());
    assert!(!base.exists(), "{} left", base.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_daemons_cgroups_go_at_the_next_start() {
    let mut cg = Cg::start(&[]).await;
    let Some(base) = cg.base.clone() else {
        return;
    };
    let c = cg.d.client().await;
    // An escapee without the marker, outside the group, reparented: only its cgroup has it.
    let cmd = r#"setsid env -u CUBA_EXEC_PROCESS sh -c "sh -c 'echo esc=\$\$; exec sleep 301' &"; sleep 302"#;
    let p = spawn(&c, cmd).await;
    let dir = cg.dir(p.pid);
    let esc = number_after(&wait_match(&c, p.id, r"^esc=\d+$").await, "esc");
    drop(c);
    std::fs::create_dir(base.join("999")).unwrap();
    cg.d.restart().await;
    assert!(
        wait_for(|| !pid_alive(esc), STEP).await,
        "escapee {esc} survived"
    );
    let c = cg.d.client().await;
    assert_eq!(c.info(p.id).await.unwrap().state, ProcState::Lost);
    assert!(!base.join("999").exists(), "an empty leftover stayed");
    // Its name may serve the new daemon's pool, empty.
    assert!(procs(&dir).is_empty(), "a populated leftover stayed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_tree_ends_once_its_cgroup_is_empty_not_after_the_grace_period() {
    // A grace period longer than the follow below may wait: the end must come from the
    // cgroup's emptying, not from the KILL due after it.
    let cg = Cg::start(&[("CUBA_EXEC_SHUTDOWN_TIMEOUT", "60s")]).await;
    if cg.base.is_none() {
        return;
    }
    let c = cg.d.client().await;
    // The shell execs `sleep`, which dies at the TERM; its child outlives it by 0.3 s.
    let cmd = r#"sh -c 'trap "sleep 0.3; exit 0" TERM; echo up; while :; do sleep 0.1; done' & exec sleep 30"#;
    let p = spawn(&c, cmd).await;
    wait_match(&c, p.id, "^up$").await;
    // The KILL a stop arms is re-armed at the exit with the daemon's grace period.
    let info = stop(&cg.d, p.id).await;
    assert_eq!(info.state, ProcState::Killed, "{info:?}");
    let follow = FollowRequest {
        id: p.id,
        since: Some(0),
        backlog: 0,
        stream: StreamFilter::Both,
    };
    let mut sub = bounded("follow", STEP, c.subscribe(Request::Follow(follow)))
        .await
        .unwrap();
    // The end frame comes once all output is in and the tree is gone.
    loop {
        match bounded("follow frame", STEP, sub.next()).await {
            Some(Ok(Response::Output(_))) => {}
            Some(Ok(Response::Process(info))) => {
                assert_eq!(info.state, ProcState::Killed);
                break;
            }
            other => panic!("unexpected follow frame: {other:?}"),
        }
    }
}
