//! A launch plan: everything about how one process is to be started, decided from the request
//! and its caller before anything is done, so it can be read (and tested) on its own.

use std::ffi::OsString;
#[cfg(unix)]
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cuba_protocol::{ClientInfo, SpawnRequest, TtySize};

use crate::base::config::Sandbox;
use crate::state::caller::Caller;

/// Linux refuses a single argument longer than this (MAX_ARG_STRLEN), counting its terminating
/// NUL: command text of this length or more is handed to the shell as a script file.
pub const MAX_ARG: usize = 128 * 1024;
/// What a program on a terminal gets as `TERM` when its caller has no real one.
const DEFAULT_TERM: &str = "xterm-256color";

/// What the shell runs.
#[derive(Debug)]
pub enum Program {
    /// `shell -c TEXT`.
    Inline(String),
    /// `shell FILE`: text too long for one argument, written to a script file first.
    Script(String),
    /// A session's shell, reading its commands from the read end of a pipe of its own (given
    /// as fd 3), apart from stdin, so what its commands leave unread is never run.
    #[cfg(unix)]
    Session(OwnedFd),
}

/// The sandbox a process runs in and the directories it may write under: the daemon's
/// sandbox plus what its client asked for, confined to the client's (narrowed) roots.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Confinement {
    pub sandbox: Sandbox,
    pub roots: Vec<PathBuf>,
}

impl Confinement {
    pub fn of(caller: &Caller, daemon: &Sandbox) -> Confinement {
        let workspace_write = daemon.workspace_write || caller.policy.write_confined;
        Confinement {
            sandbox: Sandbox {
                workspace_write,
                no_network: daemon.no_network || caller.policy.no_network,
                // A caller confined to writes gets the masks with them, as the daemon would.
                masked: daemon.masked || workspace_write,
                ..daemon.clone()
            },
            roots: caller.policy.rules().dirs.clone(),
        }
    }
}

#[derive(Debug)]
pub struct LaunchPlan {
    pub id: u64,
    pub shell: String,
    pub program: Program,
    pub cwd: PathBuf,
    /// The child's whole environment, in order (a later entry of a name wins).
    pub env: Vec<(OsString, OsString)>,
    /// Run on a terminal of this size instead of pipes.
    pub terminal: Option<TtySize>,
    pub confinement: Confinement,
    /// Written to stdin right after the start; then stdin is closed if `close_stdin`.
    pub stdin: Option<Vec<u8>>,
    pub close_stdin: bool,
    pub timeout: Option<Duration>,
    /// A person approved running a setuid program in this tree: no exec checks (and so no
    /// `no_new_privs`) for it.
    pub privileged: bool,
}

impl LaunchPlan {
    /// Process `id` running `req` for `caller` in `cwd`: through the request's shell (else
    /// `shell`), with the caller's environment, the request's over it, and the process's
    /// `marker` (`NAME=VALUE`) last.
    pub fn command(
        id: u64,
        req: SpawnRequest,
        caller: &Caller,
        cwd: PathBuf,
        (shell, confinement): (&str, Confinement),
        marker: &str,
    ) -> LaunchPlan {
        let mut env = environment(&caller.client, &req.env, marker);
        if req.tty.is_some() && !has_term(&caller.client, &req) {
            env.push(("TERM".into(), DEFAULT_TERM.into()));
        }
        let program = if req.command.len() >= MAX_ARG {
            Program::Script(req.command)
        } else {
            Program::Inline(req.command)
        };
        LaunchPlan {
            id,
            shell: req.shell.unwrap_or_else(|| shell.to_string()),
            program,
            cwd,
            env,
            terminal: req.tty,
            confinement,
            stdin: req.stdin,
            close_stdin: req.close_stdin,
            timeout: req.timeout_ms.map(Duration::from_millis),
            privileged: false,
        }
    }

    #[cfg(unix)]
    /// Process `id`, the shell of a session: `shell` reading commands from `commands`, with
    /// the caller's environment and the marker, on pipes, no timeout.
    pub fn session_shell(
        id: u64,
        shell: String,
        commands: OwnedFd,
        caller: &Caller,
        cwd: &Path,
        confinement: Confinement,
        marker: &str,
    ) -> LaunchPlan {
        LaunchPlan {
            id,
            shell,
            program: Program::Session(commands),
            cwd: cwd.to_path_buf(),
            env: environment(&caller.client, &[], marker),
            terminal: None,
            confinement,
            stdin: None,
            close_stdin: false,
            timeout: None,
            privileged: false,
        }
    }
}

/// The client's environment, `extra` over it, and the marker last.
fn environment(
    client: &ClientInfo,
    extra: &[(OsString, OsString)],
    marker: &str,
) -> Vec<(OsString, OsString)> {
    let (name, value) = marker.split_once('=').unwrap_or((marker, ""));
    let mut env = Vec::with_capacity(client.env.len() + extra.len() + 2);
    env.extend(client.env.iter().cloned());
    env.extend(extra.iter().cloned());
    env.push((name.into(), value.into()));
    env
}

/// Whether the command gets a `TERM` from its caller: set in the request, or a real one (not
/// `dumb`) in the client's environment.
fn has_term(client: &ClientInfo, req: &SpawnRequest) -> bool {
    let is_term = |k: &OsString| k.as_encoded_bytes() == b"TERM";
    req.env.iter().any(|(k, _)| is_term(k))
        || client
            .env
            .iter()
            .any(|(k, v)| is_term(k) && !v.is_empty() && v.as_encoded_bytes() != b"dumb")
}

/// The working directory must be a directory: said before anything else is done.
/// Checks the proxy's rules of `sandbox`, at the start: a bad pattern stops the daemon.
pub fn proxy_rules(sandbox: &Sandbox) -> Result<(), String> {
    match &sandbox.proxy {
        #[cfg(target_os = "linux")]
        Some(r) => super::proxy::rules_of(r).map(drop),
        #[cfg(not(target_os = "linux"))]
        Some(_) => Err("network = \"proxy\" needs Linux (a network namespace per command)".into()),
        None => Ok(()),
    }
}

pub fn check_cwd(cwd: &Path) -> Result<(), super::LaunchError> {
    match std::fs::metadata(cwd) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => {
            let why = format!("cwd {}: not a directory", cwd.display());
            Err(super::LaunchError::new(super::Stage::Cwd, why))
        }
        Err(e) => Err(super::LaunchError::os(
            super::Stage::Cwd,
            format!("cwd {}: {e}", cwd.display()),
            e,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::caller::tests::caller_with_env;

    fn get<'a>(env: &'a [(OsString, OsString)], name: &str) -> Option<&'a str> {
        env.iter()
            .rev()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.to_str())
    }

    fn plan(req: SpawnRequest, client_env: &[(&str, &str)]) -> LaunchPlan {
        let caller = caller_with_env(client_env);
        let confinement = Confinement::of(&caller, &Sandbox::default());
        LaunchPlan::command(
            7,
            req,
            &caller,
            "/w".into(),
            ("/bin/sh", confinement),
            "CUBA_EXEC_PROCESS=i.7",
        )
    }

    #[test]
    fn the_environment_is_the_callers_then_the_requests_then_the_marker() {
        let req = SpawnRequest {
            command: "env".into(),
            env: vec![("A".into(), "request".into())],
            ..SpawnRequest::default()
        };
        let p = plan(req, &[("A", "client"), ("B", "client")]);
        assert_eq!(get(&p.env, "A"), Some("request"));
        assert_eq!(get(&p.env, "B"), Some("client"));
        assert_eq!(get(&p.env, "CUBA_EXEC_PROCESS"), Some("i.7"));
        assert_eq!(
            p.env.last().map(|(k, _)| k.as_os_str()),
            Some("CUBA_EXEC_PROCESS".as_ref())
        );
        assert_eq!(p.shell, "/bin/sh");
        assert!(p.terminal.is_none() && get(&p.env, "TERM").is_none());
    }

    #[test]
    fn a_terminal_gets_a_real_term_unless_the_caller_has_one() {
        let tty = |env: Vec<(OsString, OsString)>| SpawnRequest {
            command: "vim".into(),
            tty: Some(TtySize::DEFAULT),
            env,
            ..SpawnRequest::default()
        };
        let p = plan(tty(vec![]), &[("TERM", "dumb")]);
        assert_eq!(get(&p.env, "TERM"), Some(DEFAULT_TERM));
        let p = plan(tty(vec![]), &[("TERM", "screen")]);
        assert_eq!(get(&p.env, "TERM"), Some("screen"));
        let p = plan(tty(vec![("TERM".into(), "linux".into())]), &[]);
        assert_eq!(get(&p.env, "TERM"), Some("linux"));
    }

    #[test]
    fn long_text_becomes_a_script_and_the_requests_settings_carry_over() {
        let req = SpawnRequest {
            command: "x".repeat(MAX_ARG),
            shell: Some("/bin/bash".into()),
            timeout_ms: Some(1500),
            stdin: Some(b"in".to_vec()),
            close_stdin: true,
            ..SpawnRequest::default()
        };
        let p = plan(req, &[]);
        assert!(matches!(p.program, Program::Script(ref t) if t.len() == MAX_ARG));
        assert_eq!(p.shell, "/bin/bash");
        assert_eq!(p.timeout, Some(Duration::from_millis(1500)));
        assert_eq!(
            (p.stdin.as_deref(), p.close_stdin),
            (Some(&b"in"[..]), true)
        );
        let short = plan(
            SpawnRequest {
                command: "true".into(),
                ..SpawnRequest::default()
            },
            &[],
        );
        assert!(matches!(short.program, Program::Inline(ref t) if t == "true"));
    }
}
