//! What went wrong, as an error code and what the model should do about it: a process that did
//! not succeed ([`failure`]), a daemon that refused or could not be reached ([`remote`]), a call
//! lost after it was sent ([`link`]), an argument that makes no sense ([`Failure::bad_request`])
//! or a request too large to send.
//! `reply.rs` turns a [`Failure`] into the tool result.

use cuba_protocol::client::ClientError;
use cuba_protocol::wire::{WireError, MAX_FRAME};
use cuba_protocol::{ProcState, ProcessInfo, StartFailure};

use crate::link::LinkError;

/// An error code (`NOT_FOUND`, `EXIT`, …) and its explanation, hint included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub code: &'static str,
    pub message: String,
}

impl Failure {
    pub fn new(code: &'static str, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Failure {
        Failure::new("BAD_REQUEST", message)
    }
}

/// A daemon error, with a hint the model can act on.
pub fn remote(e: ClientError) -> Failure {
    if let ClientError::Wire(WireError::TooLarge(bytes)) = e {
        return too_large(bytes);
    }
    match &e {
        // Their messages already say what to do.
        ClientError::Host(m) => {
            return Failure::bad_request(format!("{m}. list_hosts shows the hosts there are."))
        }
        ClientError::Bridge { .. } | ClientError::Broken { .. } => {
            return Failure::new("UNAVAILABLE", format!("{e}."))
        }
        // Its own fatal error, with the fix: a retry fails the same way.
        ClientError::Start { reason, .. } => {
            return Failure::new(
                "UNAVAILABLE",
                format!(
                    "the cubad daemon cannot start; a person must fix this (retrying will not \
                     help): {reason}"
                ),
            )
        }
        _ => {}
    }
    let code = e.kind().map_or("UNAVAILABLE", |k| k.code());
    let hint = match code {
        "NOT_FOUND" => " Call list_processes to see the ids there are.",
        // Every LIMIT names its bound and what to do about it: no generic hint to mislead.
        "UNAVAILABLE" => " The cubad daemon could not be reached; retry, or check its log.",
        _ => "",
    };
    let message = match &e {
        ClientError::Remote(p) => p.message.clone(),
        other => other.to_string(),
    };
    Failure::new(code, format!("{message}.{hint}"))
}

/// [`remote`] for a request to `host`: a connection lost there is that host's link or daemon,
/// not this machine's.
pub fn remote_at(host: Option<&str>, e: ClientError) -> Failure {
    match (remote_host(host), &e) {
        (Some(h), ClientError::Closed | ClientError::Gone | ClientError::Io(_)) => Failure::new(
            "UNAVAILABLE",
            format!(
                "host {h}: {e}: the link to it dropped, or the cubad there stopped. Retry; \
                 list_hosts shows whether it answers."
            ),
        ),
        _ => remote(e),
    }
}

/// `host` when it names another machine.
fn remote_host(host: Option<&str>) -> Option<&str> {
    host.filter(|h| !cuba_protocol::hosts::is_local(Some(h)))
}

/// A request over the daemon's frame limit. The client checks the size before sending, so the
/// daemon never saw it; the same request would fail again, so this is the caller's to fix.
fn too_large(bytes: usize) -> Failure {
    Failure::bad_request(format!(
        "the request is {} bytes; the limit is {}: send large input through a file (write it \
         to a file and pass its path, e.g. `cmd < FILE`)",
        digits(bytes),
        limit(MAX_FRAME)
    ))
}

/// `n` in groups of three digits ("10 485 812"): sizes a person compares at a glance.
pub fn digits(n: usize) -> String {
    let mut groups = Vec::new();
    let mut rest = n;
    loop {
        groups.push(rest % 1000);
        rest /= 1000;
        if rest == 0 {
            break;
        }
    }
    let mut groups = groups.into_iter().rev();
    let mut out = groups.next().unwrap_or(0).to_string();
    for group in groups {
        out.push_str(&format!(" {group:03}"));
    }
    out
}

/// A size limit of whole MiB as "8 MiB (8 388 608 bytes)".
pub fn limit(bytes: usize) -> String {
    format!("{} MiB ({} bytes)", bytes >> 20, digits(bytes))
}

/// A request that must not be repeated, for the reply when the connection was lost after it
/// was sent and nobody knows whether the daemon carried it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// A run or start.
    Command,
    /// A stdin write to process `id`.
    Input(u64),
    /// A signal to process `id`.
    Signal(u64),
}

/// The failure of a request sent through the link to `host`; `sent` says what it was.
pub fn link(e: LinkError, sent: Sent, host: Option<&str>) -> Failure {
    let e = match e {
        LinkError::Failed(e) => return remote_at(host, e),
        LinkError::MaybeDone(e) => e,
    };
    let (peer, on) = match remote_host(host) {
        Some(h) => (format!("the link to host {h}"), format!("(host=\"{h}\")")),
        None => ("the connection to cubad".to_string(), String::new()),
    };
    let (what, check) = match sent {
        Sent::Command => (
            "the command",
            format!("it may be running: list_processes{on} shows it"),
        ),
        Sent::Input(id) => (
            "the input",
            format!("it may have been written: status(id={id}) shows the process's output"),
        ),
        Sent::Signal(id) => (
            "the signal",
            format!("it may have been delivered: status(id={id}) shows the process's state"),
        ),
    };
    Failure::new(
        "UNAVAILABLE",
        format!("{peer} was lost after {what} was sent ({e}); {check}."),
    )
}

/// The error code and explanation for a process that did not succeed; `None` when it did (or
/// is still running, or was stopped on request).
pub fn failure(info: &ProcessInfo) -> Option<Failure> {
    match info.state {
        ProcState::Exited => exit_failure(info),
        ProcState::TimedOut => Some(Failure::new(
            "TIMEOUT",
            format!(
                "stopped after its timeout_ms={}: raise timeout_ms, or use start and wait for \
                 long-running commands",
                info.timeout_ms.unwrap_or(0)
            ),
        )),
        ProcState::Signaled => Some(Failure::new(
            "SIGNAL",
            with_reason(
                format!(
                    "ended by {}",
                    info.signal.map_or("a signal".into(), |s| s.to_string())
                ),
                info,
            ),
        )),
        ProcState::FailedToStart => {
            let why = info.error.clone().unwrap_or_default();
            let code = match info.failure {
                Some(StartFailure::NotFound) => "ENOENT",
                Some(StartFailure::PermissionDenied) => "EACCES",
                _ => "FAILED",
            };
            Some(Failure::new(
                code,
                format!("process {} could not start: {why}", info.id),
            ))
        }
        ProcState::Lost => Some(Failure::new(
            "LOST",
            info.error
                .clone()
                .unwrap_or_else(|| "the daemon restarted while it ran".into()),
        )),
        ProcState::Denied => Some(Failure::new(
            "DENIED",
            format!(
                "the user did not approve it, so it did not run ({}); do not look for another \
                 way to do it: ask the user what they want instead",
                info.error.as_deref().unwrap_or("denied")
            ),
        )),
        ProcState::Running
        | ProcState::WaitingInput
        | ProcState::AwaitingApproval
        | ProcState::Killed => None,
    }
}

/// A nonzero exit: the shell's own codes for "not found" and "not executable" get their own.
fn exit_failure(info: &ProcessInfo) -> Option<Failure> {
    match info.exit_code {
        Some(0) | None => None,
        Some(127) => Some(Failure::new(
            "ENOENT",
            "command not found (exit 127): check the program name, install it, or fix PATH",
        )),
        Some(126) => Some(Failure::new(
            "EACCES",
            "permission denied or not executable (exit 126): check the file's mode \
             (chmod +x) or run it through its interpreter",
        )),
        Some(code) => Some(Failure::new(
            "EXIT",
            with_reason(format!("the command failed with exit code {code}"), info),
        )),
    }
}

/// `message`, plus the daemon's explanation of the end when it gave one (e.g. a command whose
/// session's shell ended under it).
fn with_reason(message: String, info: &ProcessInfo) -> String {
    match &info.error {
        Some(why) => format!("{message}: {why}"),
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use cuba_protocol::{ErrorKind, ProtocolError};

    use super::*;

    #[test]
    fn a_lost_action_says_it_may_have_happened() {
        let f = link(
            LinkError::MaybeDone(ClientError::Closed),
            Sent::Command,
            None,
        );
        assert_eq!(f.code, "UNAVAILABLE");
        assert_eq!(
            f.message,
            "the connection to cubad was lost after the command was sent (connection to cubad \
             closed); it may be running: list_processes shows it."
        );
        let f = link(
            LinkError::MaybeDone(ClientError::Closed),
            Sent::Input(3),
            None,
        );
        assert!(f.message.contains("status(id=3)"), "{}", f.message);
        // Unlike an unreachable daemon, nothing here says "retry".
        assert!(!f.message.contains("retry"), "{}", f.message);
    }

    #[test]
    fn a_host_lost_is_that_host_not_this_machine() {
        let f = link(
            LinkError::MaybeDone(ClientError::Closed),
            Sent::Command,
            Some("b"),
        );
        assert!(
            f.message
                .starts_with("the link to host b was lost after the command was sent")
                && f.message.contains("list_processes(host=\"b\")"),
            "{}",
            f.message
        );
        let f = link(
            LinkError::Failed(ClientError::Gone),
            Sent::Command,
            Some("b"),
        );
        assert!(
            f.message.starts_with("host b: ") && f.message.contains("was not sent"),
            "{}",
            f.message
        );
        assert!(
            !f.message.contains("cubad daemon could not"),
            "{}",
            f.message
        );
        let broken = ClientError::Broken {
            from: "the link to host b".into(),
            why: "sent part of a reply (3 bytes), then nothing for 2 s".into(),
            sent: false,
        };
        let f = remote_at(Some("b"), broken);
        assert_eq!(
            f.message,
            "the link to host b sent part of a reply (3 bytes), then nothing for 2 s; the \
             request was not sent."
        );
        // This machine keeps its own words.
        assert!(remote_at(Some("local"), ClientError::Gone)
            .message
            .contains("The cubad daemon could not be reached"));
    }

    #[test]
    fn a_daemon_that_cannot_start_is_for_a_person_to_fix() {
        let e = ClientError::Start {
            exe: "/bin/cubad".into(),
            reason: "the socket directory /tmp/x is open to other users (mode 755): `chmod 700 \
                     /tmp/x`"
                .into(),
        };
        let f = remote(e);
        assert_eq!(f.code, "UNAVAILABLE");
        assert!(
            f.message.contains("a person must fix this") && f.message.contains("chmod 700 /tmp/x"),
            "{}",
            f.message
        );
        assert!(!f.message.contains("; retry"), "{}", f.message);
    }

    #[test]
    fn daemon_errors_keep_their_kind_and_get_a_hint() {
        let e = ClientError::Remote(ProtocolError {
            kind: ErrorKind::NotFound,
            message: "no process 7".into(),
            reason: None,
        });
        let f = link(LinkError::Failed(e), Sent::Command, None);
        assert_eq!(f.code, "NOT_FOUND");
        assert_eq!(
            f.message,
            "no process 7. Call list_processes to see the ids there are."
        );
        assert_eq!(remote(ClientError::Gone).code, "UNAVAILABLE");
    }

    #[test]
    fn a_request_too_large_to_send_is_the_callers_to_fix() {
        let f = remote(ClientError::Wire(WireError::TooLarge(10_485_812)));
        assert_eq!(f.code, "BAD_REQUEST");
        assert!(
            f.message.starts_with(
                "the request is 10 485 812 bytes; the limit is 8 MiB (8 388 608 bytes)"
            ),
            "{}",
            f.message
        );
        assert!(!f.message.contains("retry"), "{}", f.message);
        assert_eq!(digits(0), "0");
        assert_eq!(digits(999), "999");
        assert_eq!(digits(1000), "1 000");
        assert_eq!(digits(1_000_001), "1 000 001");
    }
}
