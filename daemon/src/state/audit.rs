//! The audit log: one JSON line per policy decision on a spawn and per process end, appended
//! to `<state_dir>/audit.jsonl` (and copied to stderr with `CUBA_EXEC_AUDIT=1`).
//!
//! Every line has `ts` (Unix ms), `event` (`spawn` / `end`), `client`, `client_kind`,
//! `client_pid` (what the client said), `peer_uid` / `peer_pid` (the connection's SO_PEERCRED,
//! what the kernel said), `command`, `cwd`, `decision`, `rule`, `id`, `pid`; end lines add
//! `state`, `exit`, `signal` and `duration_ms` (also as `ms`).
//!
//! Rotation: once the file has grown past `audit_max` bytes it is renamed `audit.jsonl.1`
//! (`.1` → `.2` → `.3`, the oldest dropped) and the next line starts a new file.
//!
//! A std `Mutex<File>`: a line is one `write_all` under the lock, never held across an
//! `.await`, so lines from concurrent spawns never interleave.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use cuba_protocol::{now_ms, safe_fs, ClientInfo, ClientKind, PolicyDecision, ProcessInfo};
use serde::Serialize;

/// Who answered, for the audit log and a remembered approval.
#[derive(Debug, Clone)]
pub struct Who {
    /// The person (`alice (uid 1000)`), or `nobody` for a timeout.
    pub by: String,
    /// `cubactl`, `elicitation in claude-code`, `approval_timeout`.
    pub channel: String,
}
#[cfg(test)]
use serde_json::{json, Value};

/// Rotated generations kept beside the live file.
const GENERATIONS: u32 = 3;

/// The system's word on who is at the other end of a connection.
pub use crate::platform::transport::Peer;

struct Log {
    /// Opened on the first line, so a daemon that never spawns writes no file.
    file: Option<File>,
    /// Bytes in the live file.
    size: u64,
    /// Peers of processes still running, for their end lines.
    peers: HashMap<u64, Peer>,
    /// The last write failed part-way: the file may end inside a line.
    torn: bool,
}

pub struct Audit {
    path: PathBuf,
    stderr: bool,
    max: u64,
    log: Mutex<Log>,
}

fn kind_name(kind: ClientKind) -> &'static str {
    match kind {
        ClientKind::Mcp => "mcp",
        ClientKind::Cli => "cli",
        ClientKind::Other => "other",
    }
}

/// One audit line, serialized straight from borrowed fields (no map built per line). The
/// fields are in the order of their names, the order the lines have always had; those an
/// event lacks are left out, those it has without a value are `null`.
#[derive(Serialize, Default)]
struct Line<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    argv: Option<&'a [String]>,
    /// A question put to the person: its number, kind and what it is about.
    #[serde(skip_serializing_if = "Option::is_none")]
    ask: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ask_kind: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    asked: Option<&'a str>,
    /// Who answered it, and through which channel.
    #[serde(skip_serializing_if = "Option::is_none")]
    by: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    channel: Option<&'a str>,
    client: &'a str,
    client_kind: &'a str,
    client_pid: u32,
    command: &'a str,
    cwd: &'a str,
    decision: &'a str,
    /// A connection through the proxy: where to, the address reached, and how it was asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    dest: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dest_addr: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    duration_ms: Option<u64>,
    event: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    exit: Option<Option<i32>>,
    id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    offending: Option<Option<&'a str>>,
    peer_pid: Option<i32>,
    peer_uid: Option<u32>,
    pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    program: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    rule: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    signal: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<&'a str>,
    ts: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    unresolved: Option<&'a [String]>,
}

impl Audit {
    pub fn new(path: PathBuf, stderr: bool, max: u64) -> Audit {
        Audit {
            path,
            stderr,
            max,
            log: Mutex::new(Log {
                file: None,
                size: 0,
                peers: HashMap::new(),
                torn: false,
            }),
        }
    }

    /// A spawn the policy refused, asked for by `client` on the connection from `peer`.
    pub fn refused(
        &self,
        (client, peer): (&ClientInfo, Peer),
        command: &str,
        cwd: &str,
        d: &PolicyDecision,
    ) {
        let who = (client.name.as_str(), client.kind, client.pid);
        let line = Line {
            rule: d.rule.as_deref(),
            offending: Some(d.offending.as_deref()),
            ..fields("spawn", who, Some(peer), command, cwd, "refused")
        };
        self.write(None, &line);
    }

    /// A spawn the policy allowed (the process may still have failed to start), with the parts
    /// of its text that could not be resolved before run time.
    pub fn allowed(
        &self,
        (client, peer): (&ClientInfo, Peer),
        info: &ProcessInfo,
        unresolved: &[String],
    ) {
        let who = (client.name.as_str(), client.kind, client.pid);
        let line = Line {
            id: Some(info.id),
            pid: Some(info.pid),
            state: Some(info.state.as_str()),
            unresolved: (!unresolved.is_empty()).then_some(unresolved),
            ..fields(
                "spawn",
                who,
                Some(peer),
                &info.command,
                &info.cwd,
                "allowed",
            )
        };
        // An end line may already have been written (a process that failed to start).
        let running = info.state.as_str() == "running";
        self.write(running.then_some((info.id, peer)), &line);
    }

    /// A process's end.
    pub fn ended(&self, info: &ProcessInfo) {
        let peer = self.lock().peers.remove(&info.id);
        let ms = info.elapsed_ms(now_ms());
        let who = (info.owner.name.as_str(), info.owner.kind, info.owner.pid);
        let line = Line {
            id: Some(info.id),
            pid: Some(info.pid),
            state: Some(info.state.as_str()),
            exit: Some(info.exit_code),
            signal: Some(info.signal.map(|s| format!("{s:?}"))),
            duration_ms: Some(ms),
            ms: Some(ms),
            // Why the daemon stopped it (a timeout, its client gone, nobody attending to it).
            reason: info.error.as_deref().filter(|_| {
                matches!(
                    info.state,
                    cuba_protocol::ProcState::Killed | cuba_protocol::ProcState::TimedOut
                )
            }),
            ..fields(
                "end",
                who,
                peer,
                &info.command,
                &info.cwd,
                match info.state {
                    cuba_protocol::ProcState::Denied => "denied",
                    _ => "allowed",
                },
            )
        };
        self.write(None, &line);
    }

    /// A question put to the person about `info` (`ask` lines: `decision` is `asked`).
    pub fn asked(&self, info: &ProcessInfo, ask: &cuba_protocol::Ask) {
        self.ask_line(info, ask, "asked", None);
    }

    /// Its answer: `decision` is `approved`, `approved_always`, `denied`, `timed_out` or (a
    /// password) `answered`; `by`, `channel` and the reason given. Never the password.
    pub fn answered(
        &self,
        info: &ProcessInfo,
        ask: &cuba_protocol::Ask,
        decision: &str,
        who: (&str, &str, Option<&str>),
    ) {
        self.ask_line(info, ask, decision, Some(who));
    }

    fn ask_line(
        &self,
        info: &ProcessInfo,
        ask: &cuba_protocol::Ask,
        decision: &str,
        who: Option<(&str, &str, Option<&str>)>,
    ) {
        let peer = self.lock().peers.get(&info.id).copied();
        let owner = (info.owner.name.as_str(), info.owner.kind, info.owner.pid);
        let line = Line {
            id: Some(info.id),
            pid: Some(ask.pid),
            rule: Some(&ask.rule),
            ask: Some(ask.id),
            ask_kind: Some(ask.kind.as_str()),
            asked: Some(&ask.what),
            by: who.map(|w| w.0),
            channel: who.map(|w| w.1),
            reason: who.and_then(|w| w.2),
            ..fields("ask", owner, peer, &info.command, &ask.cwd, decision)
        };
        self.write(None, &line);
    }

    /// A command let run without asking: a remembered approval of its rule holds in its cwd.
    pub fn remembered(
        &self,
        (client, peer): (&ClientInfo, Peer),
        (command, cwd): (&str, &str),
        r: &cuba_protocol::Remembered,
    ) {
        let who = (client.name.as_str(), client.kind, client.pid);
        let line = Line {
            rule: Some(&r.rule),
            by: Some(&r.by),
            channel: Some(&r.channel),
            ..fields("ask", who, Some(peer), command, cwd, "remembered")
        };
        self.write(None, &line);
    }

    /// An exec let go on without asking: a remembered approval of its rule holds in its cwd.
    /// (Execs are checked on Linux only.)
    #[cfg(target_os = "linux")]
    pub fn remembered_exec(
        &self,
        info: &ProcessInfo,
        (what, cwd): (&str, &str),
        r: &cuba_protocol::Remembered,
    ) {
        let peer = self.lock().peers.get(&info.id).copied();
        let owner = (info.owner.name.as_str(), info.owner.kind, info.owner.pid);
        let line = Line {
            id: Some(info.id),
            rule: Some(&r.rule),
            asked: Some(what),
            by: Some(&r.by),
            channel: Some(&r.channel),
            ..fields("ask", owner, peer, &info.command, cwd, "remembered")
        };
        self.write(None, &line);
    }

    /// An exec in the tree of `info` that the exec checks refused (or killed once it ran).
    #[cfg(target_os = "linux")]
    pub fn exec_refused(&self, info: &ProcessInfo, b: &cuba_protocol::ExecBlocked) {
        let peer = self.lock().peers.get(&info.id).copied();
        let who = (info.owner.name.as_str(), info.owner.kind, info.owner.pid);
        let decision = if b.killed { "killed" } else { "refused" };
        let line = Line {
            id: Some(info.id),
            pid: Some(b.pid),
            rule: Some(&b.rule),
            program: Some(&b.program),
            argv: Some(&b.argv),
            ..fields("exec", who, peer, &info.command, &info.cwd, decision)
        };
        self.write(None, &line);
    }

    /// A connection the tree of `info` asked the proxy for (`dest` is `HOST:PORT`, `via`
    /// CONNECT, HTTP METHOD or SOCKS5): `decision` is `allowed`, `denied` or `failed`.
    #[cfg(target_os = "linux")]
    pub fn network(
        &self,
        info: &ProcessInfo,
        (dest, via, addr): (&str, &str, Option<&str>),
        (decision, reason): (&str, Option<&str>),
    ) {
        let peer = self.lock().peers.get(&info.id).copied();
        let who = (info.owner.name.as_str(), info.owner.kind, info.owner.pid);
        let line = Line {
            id: Some(info.id),
            pid: Some(info.pid),
            dest: Some(dest),
            dest_addr: addr,
            program: Some(via),
            reason,
            ..fields("net", who, peer, &info.command, &info.cwd, decision)
        };
        self.write(None, &line);
    }

    /// A person's verb (`upgrade`, `token create`, `reload` …) asked on the connection from
    /// `peer`: `decision` is `allowed`, or `refused` with `rule` (`person_only`) and why.
    pub fn control(
        &self,
        (client, peer): (&ClientInfo, Peer),
        verb: &str,
        refused: Option<(&str, &str)>,
    ) {
        let who = (client.name.as_str(), client.kind, client.pid);
        let decision = if refused.is_some() {
            "refused"
        } else {
            "allowed"
        };
        let line = Line {
            rule: refused.map(|r| r.0),
            reason: refused.map(|r| r.1),
            ..fields("control", who, Some(peer), verb, "", decision)
        };
        self.write(None, &line);
    }

    /// A password question the askpass helper asked for on behalf of a program that is not
    /// the genuine one it claims (or cannot be told): never put to the person.
    pub fn askpass_refused(&self, info: &ProcessInfo, pid: u32, program: &str, why: &str) {
        let peer = self.lock().peers.get(&info.id).copied();
        let who = (info.owner.name.as_str(), info.owner.kind, info.owner.pid);
        let line = Line {
            id: Some(info.id),
            pid: Some(pid),
            rule: Some("askpass"),
            program: Some(program),
            reason: Some(why),
            ..fields("ask", who, peer, &info.command, &info.cwd, "refused")
        };
        self.write(None, &line);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends `line`; `remember` keeps a running process's peer for its end line.
    fn write(&self, remember: Option<(u64, Peer)>, line: &impl Serialize) {
        let mut text = match serde_json::to_string(line) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!("cannot encode an audit line: {e}");
                return;
            }
        };
        text.push('\n');
        if self.stderr {
            crate::base::health::to_stderr(&format!("cubad audit: {text}"));
        }
        let mut log = self.lock();
        if let Some((id, peer)) = remember {
            log.peers.insert(id, peer);
        }
        if log.file.is_none() {
            match safe_fs::open_append(&self.path) {
                Ok(f) => {
                    log.size = f.metadata().map_or(0, |m| m.len());
                    log.file = Some(f);
                }
                Err(e) => {
                    crate::base::health::AUDIT.failed(&e);
                    tracing::warn!("cannot open the audit log {}: {e}", self.path.display());
                    return;
                }
            }
        }
        // After a line that was cut short (a full disk), start on a line of our own: the torn
        // one is then a single unparsable line, not the start of the next.
        if log.torn {
            text.insert(0, '\n');
        }
        if let Some(f) = log.file.as_mut() {
            if let Err(e) = f.write_all(text.as_bytes()) {
                crate::base::health::AUDIT.failed(&e);
                log.torn = true;
                tracing::warn!("cannot write the audit log {}: {e}", self.path.display());
                return;
            }
        }
        log.torn = false;
        log.size += text.len() as u64;
        if log.size >= self.max {
            log.file = None;
            log.size = 0;
            if let Err(e) = rotate(&self.path) {
                tracing::warn!("cannot rotate the audit log {}: {e}", self.path.display());
            }
        }
    }
}

fn generation(path: &Path, n: u32) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// `audit.jsonl.2` → `.3`, `.1` → `.2`, `audit.jsonl` → `.1` (rename replaces the oldest).
fn rotate(path: &Path) -> std::io::Result<()> {
    for n in (1..GENERATIONS).rev() {
        match std::fs::rename(generation(path, n), generation(path, n + 1)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    std::fs::rename(path, generation(path, 1))
}

/// The fields every audit line has: when, what, who (client and kernel-reported peer), the
/// command and the decision.
fn fields<'a>(
    event: &'a str,
    (client, kind, client_pid): (&'a str, ClientKind, u32),
    peer: Option<Peer>,
    command: &'a str,
    cwd: &'a str,
    decision: &'a str,
) -> Line<'a> {
    Line {
        ts: now_ms(),
        event,
        client,
        client_kind: kind_name(kind),
        client_pid,
        peer_uid: peer.map(|p| p.uid),
        peer_pid: peer.and_then(|p| p.pid),
        command,
        cwd,
        decision,
        ..Line::default()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The lines keep the shape they always had: every field in the order of its name, a
    /// field without a value `null`.
    #[test]
    fn a_refused_spawn_is_one_line_of_ordered_fields() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let audit = Audit::new(path.clone(), false, 1 << 20);
        let client = ClientInfo {
            kind: ClientKind::Mcp,
            name: "agent \"x\"".into(),
            pid: 7,
            cwd: "/".into(),
            env: Vec::new(),
        };
        let d = PolicyDecision {
            allowed: false,
            rule: Some("blocklist".into()),
            offending: Some("rm -rf /".into()),
            commands: Vec::new(),
            message: String::new(),
            nested: Vec::new(),
            ask: None,
        };
        let peer = Peer {
            uid: 1000,
            pid: None,
        };
        audit.refused((&client, peer), "rm -rf /", "/tmp", &d);
        let text = std::fs::read_to_string(&path).unwrap();
        let ts = serde_json::from_str::<Value>(&text).unwrap()["ts"]
            .as_u64()
            .unwrap();
        assert_eq!(
            text,
            format!(
                "{{\"client\":\"agent \\\"x\\\"\",\"client_kind\":\"mcp\",\"client_pid\":7,\
                 \"command\":\"rm -rf /\",\"cwd\":\"/tmp\",\"decision\":\"refused\",\
                 \"event\":\"spawn\",\"id\":null,\"offending\":\"rm -rf /\",\"peer_pid\":null,\
                 \"peer_uid\":1000,\"pid\":null,\"rule\":\"blocklist\",\"ts\":{ts}}}\n"
            )
        );
    }

    #[test]
    fn rotation_keeps_three_generations_of_valid_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let audit = Audit::new(path.clone(), false, 1024);
        for i in 0..200 {
            audit.write(None, &json!({ "i": i, "pad": "x".repeat(40) }));
        }
        for n in 1..=3 {
            let text = std::fs::read_to_string(generation(&path, n)).unwrap();
            assert!(
                text.len() >= 1024 && text.len() < 1200,
                "{n}: {}",
                text.len()
            );
            for l in text.lines() {
                serde_json::from_str::<Value>(l).unwrap();
            }
        }
        assert!(!generation(&path, 4).exists());
        let live = std::fs::read_to_string(&path).unwrap_or_default();
        let last: Value = serde_json::from_str(
            live.lines().last().unwrap_or(
                std::fs::read_to_string(generation(&path, 1))
                    .unwrap()
                    .lines()
                    .last()
                    .unwrap(),
            ),
        )
        .unwrap();
        assert_eq!(last["i"], 199);
    }
}
