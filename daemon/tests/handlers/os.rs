//! What differs by OS in these tests, and only that: the text of a command in the shell it runs
//! with (`sh` on Unix; `cmd.exe` on Windows, the daemon's default under Wine, whose PowerShell
//! is a stub), the machine's processes as the OS lists them, and the clean-up of leftovers.

/// Command texts, one per OS, for the same behaviour.
pub mod text {
    /// Writes `word` and a line end.
    pub fn echo(word: &str) -> String {
        format!("echo {word}")
    }

    /// Ends with `code`.
    pub fn exit(code: i32) -> String {
        format!("exit {code}")
    }

    /// `out` on stdout, `err` on stderr, then ends with `code`.
    pub fn both_streams(out: &str, err: &str, code: i32) -> String {
        match cfg!(windows) {
            true => format!("echo {out}& echo {err}>&2& exit {code}"),
            false => format!("echo {out}; echo {err} >&2; exit {code}"),
        }
    }

    /// Writes the value of variable `name`.
    pub fn echo_var(name: &str) -> String {
        match cfg!(windows) {
            true => format!("echo %{name}%"),
            false => format!("echo \"${name}\""),
        }
    }

    /// Copies the lines of its stdin that contain `word` to stdout, until end of file.
    pub fn filter(word: &str) -> String {
        match cfg!(windows) {
            true => format!("find \"{word}\""),
            false => format!("grep {word}"),
        }
    }

    /// Runs until stopped (on Unix for a minute); once its last program runs, it writes a
    /// line [`RUNNING`] matches (see [`crate::fixture::spawn_running`]). On Windows it is
    /// `cmd` itself, waiting on a read of its stdin (which the daemon keeps open): Wine's
    /// programs buffer what they write to a pipe, so none of them could say that it runs.
    pub fn long() -> String {
        match cfg!(windows) {
            true => "echo running& set /p X=".into(),
            false => "echo running; exec sleep 60".into(),
        }
    }

    /// As [`long`], as a tree: a child that has a child of its own (the one that writes what
    /// [`RUNNING`] matches), and on Unix another child.
    pub fn tree() -> String {
        match cfg!(windows) {
            true => r#"cmd /d /c cmd /d /c "echo running& set /p X=""#.into(),
            false => "sh -c 'sleep 60 & echo running; wait' & sleep 60".into(),
        }
    }

    /// What [`long`] and [`tree`] write once their last program runs.
    pub const RUNNING: &str = "^running";
}

/// The lines of `bytes`, line ends (`\n`, `\r\n`) and trailing blanks removed: what a test
/// compares, whichever line end the OS's shell writes.
pub fn lines(bytes: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(bytes)
        .lines()
        .map(|l| l.trim_end().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// The bytes of one stream in a wait's output. (Compared per stream: the combined stream
/// interleaves the two as their writes came, and `cmd.exe` writes a line and its end apart.)
pub fn stream(w: &cuba_protocol::WaitResult, which: cuba_protocol::Stream) -> Vec<u8> {
    w.output
        .chunks
        .iter()
        .filter(|c| c.stream == which)
        .flat_map(|c| c.data.clone())
        .collect()
}

/// `(pid, parent pid)` of every live process.
#[cfg(unix)]
fn processes() -> Vec<(u32, u32)> {
    // `ps` is on every Unix (Linux and macOS alike); a zombie is not alive.
    let out = std::process::Command::new("ps")
        .args(["-A", "-o", "pid=", "-o", "ppid=", "-o", "stat="])
        .output()
        .expect("cannot run ps");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let pid = f.next()?.parse().ok()?;
            let ppid = f.next()?.parse().ok()?;
            let zombie = f.next().is_some_and(|s| s.starts_with('Z'));
            (!zombie).then_some((pid, ppid))
        })
        .collect()
}

/// `(pid, parent pid)` of every live process, from one Tool Help snapshot.
#[cfg(windows)]
fn processes() -> Vec<(u32, u32)> {
    cuba_protocol::win::processes()
        .into_iter()
        .filter(|p| p.pid != 0)
        .map(|p| (p.pid, p.ppid))
        .collect()
}

/// The live descendants of `root`, each with its depth (1: a child).
pub fn descendants(root: u32) -> Vec<(u32, usize)> {
    let all = processes();
    let mut found: Vec<(u32, usize)> = Vec::new();
    let mut edge = vec![(root, 0)];
    while let Some((parent, depth)) = edge.pop() {
        for (pid, _) in all
            .iter()
            .filter(|(pid, ppid)| *ppid == parent && *pid != root)
        {
            if !found.iter().any(|(p, _)| p == pid) {
                found.push((*pid, depth + 1));
                edge.push((*pid, depth + 1));
            }
        }
    }
    found
}

/// Which of `pids` are alive.
pub fn alive(pids: &[u32]) -> Vec<u32> {
    let all = processes();
    pids.iter()
        .copied()
        .filter(|p| all.iter().any(|(pid, _)| pid == p))
        .collect()
}

/// Kills every process that carries the process marker of daemon instance `instance` (what a
/// daemon that did not stop them left). Linux reads the environments in `/proc`; elsewhere the
/// daemon's own stop is what ends them (Windows: each tree's Job Object dies with the daemon).
pub fn kill_marked(instance: &str) {
    #[cfg(target_os = "linux")]
    {
        let marker = format!("CUBA_EXEC_PROCESS={instance}.");
        for _ in 0..50 {
            let marked: Vec<i32> = std::fs::read_dir("/proc")
                .into_iter()
                .flatten()
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .filter(|pid: &i32| {
                    let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
                    env.split(|b| *b == 0)
                        .any(|kv| kv.starts_with(marker.as_bytes()))
                })
                .collect();
            if marked.is_empty() {
                return;
            }
            for pid in marked {
                // SAFETY: kill(2) with a pid and a signal number has no memory effects.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = instance;
}
