//! proptest strategies for the message types: every `Request` and `Response` variant.

mod asks;
mod events;

use std::ffi::OsString;

use cuba_protocol::*;
use proptest::collection::vec;
use proptest::option::of as opt;
use proptest::prelude::*;

/// Any text: control characters, newlines and non-ASCII included.
pub fn text() -> impl Strategy<Value = String> {
    "(?s).{0,24}"
}

pub fn bytes() -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..48)
}

/// Any bytes as an `OsString`, valid UTF-8 or not (on Windows, what of them Windows can hold).
pub fn os_string() -> impl Strategy<Value = OsString> {
    bytes().prop_map(os_text::from_bytes)
}

pub fn env() -> impl Strategy<Value = Env> {
    vec((os_string(), os_string()), 0..4)
}

pub fn client_kind() -> impl Strategy<Value = ClientKind> {
    prop_oneof![
        Just(ClientKind::Mcp),
        Just(ClientKind::Cli),
        Just(ClientKind::Other)
    ]
}

pub fn hello() -> impl Strategy<Value = Hello> {
    (
        client_kind(),
        text(),
        any::<u32>(),
        os_string(),
        env(),
        any::<bool>(),
    )
        .prop_map(|(kind, name, pid, cwd, env, remote)| Hello {
            client: ClientInfo {
                kind,
                name,
                pid,
                cwd,
                env,
            },
            remote,
        })
}

fn stream_filter() -> impl Strategy<Value = StreamFilter> {
    prop_oneof![
        Just(StreamFilter::Both),
        Just(StreamFilter::Stdout),
        Just(StreamFilter::Stderr)
    ]
}

fn stream() -> impl Strategy<Value = Stream> {
    prop_oneof![Just(Stream::Stdout), Just(Stream::Stderr)]
}

fn signal() -> impl Strategy<Value = Signal> {
    prop_oneof![
        Just(Signal::Term),
        Just(Signal::Kill),
        Just(Signal::Int),
        Just(Signal::Hup),
        Just(Signal::Quit),
        Just(Signal::Usr1),
        Just(Signal::Usr2),
        Just(Signal::Stop),
        Just(Signal::Cont),
        any::<i32>().prop_map(Signal::Other),
        Just(Signal::Segv),
        Just(Signal::Xfsz),
    ]
}

fn proc_state() -> impl Strategy<Value = ProcState> {
    prop_oneof![
        Just(ProcState::Running),
        Just(ProcState::WaitingInput),
        Just(ProcState::Exited),
        Just(ProcState::Signaled),
        Just(ProcState::TimedOut),
        Just(ProcState::Killed),
        Just(ProcState::FailedToStart),
        Just(ProcState::Lost),
        Just(ProcState::AwaitingApproval),
        Just(ProcState::Denied),
    ]
}

fn error_kind() -> impl Strategy<Value = ErrorKind> {
    prop_oneof![
        Just(ErrorKind::NotFound),
        Just(ErrorKind::BadRequest),
        Just(ErrorKind::Limit),
        Just(ErrorKind::Cancelled),
        Just(ErrorKind::ShuttingDown),
        Just(ErrorKind::InvalidState),
        Just(ErrorKind::Denied),
        Just(ErrorKind::Internal),
        Just(ErrorKind::Blocked),
        Just(ErrorKind::Unsupported),
    ]
}

fn error_reason() -> impl Strategy<Value = Option<ErrorReason>> {
    proptest::option::of(prop_oneof![
        Just(ErrorReason::NoTerminal),
        Just(ErrorReason::SideEffectBlocked),
        (text(), text()).prop_map(|(feature, os)| ErrorReason::Unsupported { feature, os }),
    ])
}

fn spawn_request() -> impl Strategy<Value = SpawnRequest> {
    let fields = (
        text(),
        opt(os_string()),
        env(),
        opt(text()),
        opt(bytes()),
        any::<bool>(),
        opt(any::<u64>()),
        opt(text()),
        proptest::collection::vec(text(), 0..4),
    );
    let port = prop_oneof![Just(PortWish::Auto), any::<u16>().prop_map(PortWish::Exact)];
    let tail = (opt(tty_size()), opt(text()), opt(token()), opt(port));
    (fields, tail).prop_map(
        |(
            (command, cwd, env, shell, stdin, close_stdin, timeout_ms, name, side_effects),
            (tty, session, token, port),
        )| SpawnRequest {
            command,
            cwd,
            env,
            shell,
            stdin,
            close_stdin,
            timeout_ms,
            name,
            side_effects,
            tty,
            session,
            token,
            port,
        },
    )
}

fn token() -> impl Strategy<Value = RequestToken> {
    any::<[u8; 16]>().prop_map(RequestToken)
}

fn tty_size() -> impl Strategy<Value = TtySize> {
    (any::<u16>(), any::<u16>()).prop_map(|(cols, rows)| TtySize { cols, rows })
}

fn proc_kind() -> impl Strategy<Value = ProcKind> {
    prop_oneof![
        Just(ProcKind::Command),
        Just(ProcKind::Session),
        Just(ProcKind::InSession)
    ]
}

fn screen_view() -> impl Strategy<Value = ScreenView> {
    (
        tty_size(),
        vec(text(), 0..4),
        any::<u16>(),
        any::<u16>(),
        any::<bool>(),
        text(),
        any::<u64>(),
        bytes(),
    )
        .prop_map(
            |(size, lines, cursor_row, cursor_col, alternate, title, cursor, formatted)| {
                ScreenView {
                    size,
                    lines,
                    cursor_row,
                    cursor_col,
                    alternate,
                    title,
                    cursor,
                    formatted,
                }
            },
        )
}

fn list_request() -> impl Strategy<Value = ListRequest> {
    (
        opt(proc_state()),
        opt(text()),
        opt(text()),
        opt(any::<u32>()),
        opt(any::<u32>()),
    )
        .prop_map(|(state, owner, name, finished, running)| ListRequest {
            state,
            owner,
            name,
            finished,
            running,
        })
}

/// Every `Request` variant. Boxed: the unboxed union of all arms is deep enough to overflow a
/// test thread's stack.
pub fn request() -> BoxedStrategy<Request> {
    let id = any::<u64>;
    let since = || opt(any::<u64>());
    prop_oneof![
        spawn_request().prop_map(Request::Spawn).boxed(),
        id().prop_map(|id| Request::Info(IdRequest { id })),
        (id(), since(), any::<u32>(), stream_filter()).prop_map(
            |(id, since, max_bytes, stream)| {
                Request::Read(ReadRequest {
                    id,
                    since,
                    max_bytes,
                    stream,
                })
            }
        ),
        (
            (id(), since(), opt(text()), opt(any::<u64>())),
            (any::<u64>(), any::<u32>(), stream_filter())
        )
            .prop_map(
                |((id, since, until, quiet_ms), (timeout_ms, max_bytes, stream))| {
                    Request::Wait(WaitRequest {
                        id,
                        since,
                        spec: WaitSpec {
                            until,
                            quiet_ms,
                            timeout_ms,
                            max_bytes,
                            stream,
                        },
                    })
                }
            ),
        (id(), bytes(), any::<bool>(), opt(token())).prop_map(|(id, data, eof, token)| {
            Request::Stdin(StdinRequest {
                id,
                data,
                eof,
                token,
            })
        }),
        (
            id(),
            signal(),
            any::<bool>(),
            opt(any::<u64>()),
            any::<bool>()
        )
            .prop_map(|(id, signal, escalate, grace_ms, wait)| Request::Signal(
                SignalRequest {
                    id,
                    signal,
                    escalate,
                    grace_ms,
                    wait,
                }
            )),
        list_request().prop_map(Request::List),
        (id(), since(), any::<u32>(), stream_filter()).prop_map(|(id, since, backlog, stream)| {
            Request::Follow(FollowRequest {
                id,
                since,
                backlog,
                stream,
            })
        }),
        list_request().prop_map(Request::WatchTable),
        id().prop_map(Request::Cancel),
        Just(Request::Prune),
        Just(Request::DaemonStatus),
        any::<bool>().prop_map(|force| Request::Shutdown(ShutdownRequest { force })),
        spawn_request().prop_map(Request::Ensure).boxed(),
        text().prop_map(Request::PolicyCheck).boxed(),
        (id(), tty_size())
            .prop_map(|(id, size)| Request::Resize(ResizeRequest { id, size }))
            .boxed(),
        id().prop_map(|id| Request::Screen(IdRequest { id }))
            .boxed(),
        proptest::option::of(text())
            .prop_map(|binary| Request::Upgrade(UpgradeRequest { binary }))
            .boxed(),
        asks::request(),
        events::request(),
    ]
    .boxed()
}

fn process_info() -> impl Strategy<Value = ProcessInfo> {
    let owner = (client_kind(), text(), any::<u32>()).prop_map(|(kind, name, pid)| Owner {
        kind,
        name,
        pid,
    });
    let first = (
        any::<u64>(),
        any::<u32>(),
        owner,
        opt(text()),
        text(),
        text(),
        proc_state(),
        opt(any::<i32>()),
    );
    let second = (
        opt(signal()),
        opt(text()),
        any::<u64>(),
        opt(any::<u64>()),
        opt(any::<u64>()),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
    );
    let third = (
        proc_kind(),
        opt(tty_size()),
        opt(text()),
        opt(text()),
        opt(text()),
    );
    let usage = (
        opt(any::<u64>()),
        opt(any::<u64>()),
        opt(any::<u64>()),
        opt(any::<u64>()),
        opt(any::<u64>()),
        opt(any::<u32>()),
    );
    let last = (vec(asks::ask(), 0..2), opt(any::<u16>()));
    (first, second, third, usage, last).prop_map(
        |(
            (id, pid, owner, name, command, cwd, state, exit_code),
            (signal, error, started_at_ms, ended_at_ms, timeout_ms, stdout, stderr, dropped),
            (kind, tty, session, notice, spool),
            (cpu_ms, memory_bytes, memory_peak_bytes, pids_max, forks_refused, cpu_millicores),
            (asks, port),
        )| ProcessInfo {
            id,
            pid,
            owner,
            name,
            command,
            cwd,
            state,
            exit_code,
            signal,
            error,
            started_at_ms,
            ended_at_ms,
            timeout_ms,
            stdout_bytes: stdout,
            stderr_bytes: stderr,
            dropped_bytes: dropped,
            kind,
            tty,
            session,
            notice,
            spool,
            cpu_ms,
            memory_bytes,
            memory_peak_bytes,
            pids_max,
            forks_refused,
            cpu_millicores,
            blocked: Vec::new(),
            failure: Some(StartFailure::NotFound),
            asks,
            port,
            errors: Some(ErrorMarks {
                first: ErrorMark {
                    cursor: id,
                    line: format!("error[E{pid}]"),
                    location: Some("src/main.rs:3:5".into()),
                },
                last: ErrorMark {
                    cursor: pid.into(),
                    line: String::new(),
                    location: None,
                },
                count: dropped,
            }),
            budget: Some(format!("agent-{pid}")),
            budget_hit: None,
        },
    )
}

fn output_read() -> impl Strategy<Value = OutputRead> {
    let chunk = (stream(), bytes()).prop_map(|(stream, data)| Chunk { stream, data });
    (
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        vec(chunk, 0..4),
    )
        .prop_map(|(start, next, dropped, total, chunks)| OutputRead {
            start,
            next,
            dropped,
            total,
            chunks,
        })
}

fn wait_reason() -> impl Strategy<Value = WaitReason> {
    prop_oneof![
        Just(WaitReason::Exited),
        text().prop_map(WaitReason::Matched),
        Just(WaitReason::Quiet),
        Just(WaitReason::Timeout),
        Just(WaitReason::WaitingInput),
        Just(WaitReason::AwaitingApproval),
    ]
}

fn daemon_status() -> impl Strategy<Value = DaemonStatus> {
    let fields = (
        (text(), any::<u32>(), any::<u32>(), any::<u64>()),
        (text(), text(), proptest::collection::vec(text(), 0..3)),
        (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()),
        (text(), text(), text(), text()),
        (
            (proptest::option::of(any::<u64>()), any::<u32>()),
            text(),
            text(),
            proptest::option::of(text()),
        ),
    );
    fields.prop_map(
        |(
            (daemon_version, protocol_version, pid, started_at_ms),
            (socket, state_dir, notices),
            (clients, running, total, max_procs),
            (os, arch, hostname, shell),
            ((upgraded_at_ms, upgrades), supervision, exec_checks, upgrade_failed),
        )| DaemonStatus {
            daemon_version,
            protocol_version,
            pid,
            started_at_ms,
            socket,
            state_dir,
            clients,
            running,
            total,
            max_procs,
            notices,
            os,
            arch,
            hostname,
            shell,
            upgraded_at_ms,
            upgrades,
            upgrade_failed,
            supervision,
            exec_checks,
            sandbox: Vec::new(),
        },
    )
}

fn policy_decision() -> impl Strategy<Value = PolicyDecision> {
    (
        any::<bool>(),
        opt(text()),
        opt(text()),
        vec(text(), 0..3),
        text(),
        vec(text(), 0..3),
        opt(text()),
    )
        .prop_map(
            |(allowed, rule, offending, commands, message, nested, ask)| PolicyDecision {
                allowed,
                rule,
                offending,
                commands,
                message,
                nested,
                ask,
            },
        )
}

/// Every `Response` variant.
pub fn response() -> BoxedStrategy<Response> {
    prop_oneof![
        Just(Response::Ok),
        process_info().prop_map(Response::Process),
        process_info().prop_map(Response::Existing),
        output_read().prop_map(Response::Output),
        (wait_reason(), process_info(), output_read()).prop_map(|(reason, process, output)| {
            Response::Waited(WaitResult {
                reason,
                process,
                output,
            })
        }),
        (vec(process_info(), 0..3), any::<u64>(), any::<u64>()).prop_map(
            |(processes, hidden, hidden_running)| Response::List(Listing {
                processes,
                hidden,
                hidden_running,
                budgets: Vec::new(),
            })
        ),
        any::<u64>().prop_map(Response::Pruned),
        daemon_status().prop_map(Response::DaemonStatus),
        Just(Response::End),
        (error_kind(), text(), error_reason()).prop_map(|(kind, message, reason)| {
            Response::Error(ProtocolError {
                kind,
                message,
                reason,
            })
        }),
        policy_decision().prop_map(Response::Policy).boxed(),
        screen_view().prop_map(Response::Screen).boxed(),
        text()
            .prop_map(|reason| Response::Closing { reason })
            .boxed(),
        asks::response(),
        events::response(),
    ]
    .boxed()
}

pub fn request_frame() -> impl Strategy<Value = RequestFrame> {
    (any::<u64>(), request()).prop_map(|(id, request)| RequestFrame { id, request })
}

pub fn response_frame() -> impl Strategy<Value = ResponseFrame> {
    (any::<u64>(), response()).prop_map(|(id, response)| ResponseFrame { id, response })
}
