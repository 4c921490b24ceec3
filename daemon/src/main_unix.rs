//! `cubad` on Unix: binds the socket (one daemon per socket, guarded by a lock file), then runs the
//! supervisor until SIGTERM/SIGINT or a client's shutdown request.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Parser;
use cuba_daemon::platform::process::Started;
use cuba_daemon::platform::transport::Listener;
use cuba_daemon::Config;
use cuba_protocol::{paths, safe_fs};
use tokio::signal::unix::{signal, SignalKind};

/// The cuba-exec supervisor. Clients (cuba-exec, cubactl) start it on demand; run it by hand
/// only to watch its log in the foreground.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Socket to listen on [default: $CUBA_EXEC_SOCKET, else $XDG_RUNTIME_DIR/cuba-exec/cubad.sock,
    /// else /tmp/cuba-exec-$UID/cubad.sock ($TMPDIR on macOS)]
    #[arg(long)]
    socket: Option<PathBuf>,
    /// State directory: journal, spools, log [default: $CUBA_EXEC_STATE_DIR, else
    /// $XDG_STATE_HOME/cuba-exec]
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Detach: fork into the background in a session of its own (what clients use).
    #[arg(long)]
    daemonize: bool,
    /// Take over from the program this pid ran before (an in-place upgrade): the descriptor of
    /// its hand-over file. Set by the daemon itself.
    #[arg(long, hide = true, value_name = "FD")]
    handover: Option<i32>,
    /// Print the hand-over versions this program can take, and exit.
    #[arg(long, hide = true)]
    handover_version: bool,
}

/// How long the parent of a detaching daemon waits for it to serve before leaving the wait to
/// the client (a large journal to restore, a slow disk).
const STARTED_WITHIN: std::time::Duration = std::time::Duration::from_secs(8);

pub fn main() -> ExitCode {
    // Before anything else: no process of the same user traces the daemon or reads its memory.
    cuba_protocol::private::keep_to_itself();
    let args = Args::parse();
    // Held here, not in `setup`: a failed start's error is in the log before the waiting
    // parent learns of the failure (the pipe closes when this is dropped) and the client reads it.
    let mut started = None;
    match setup(args, &mut started) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cubad: {e:#}");
            drop(started);
            ExitCode::FAILURE
        }
    }
}

fn absolute(p: PathBuf) -> Result<PathBuf> {
    if p.is_absolute() {
        Ok(p)
    } else {
        Ok(std::env::current_dir()?.join(p))
    }
}

fn setup(args: Args, started: &mut Option<Started>) -> Result<ExitCode> {
    if args.handover_version {
        println!("{}", cuba_daemon::handover::VERSION);
        return Ok(ExitCode::SUCCESS);
    }
    let socket = absolute(args.socket.unwrap_or_else(paths::socket_path))?;
    let state_dir = absolute(args.state_dir.unwrap_or_else(paths::state_dir))?;
    if socket.as_os_str().len() > paths::MAX_SOCKET_PATH {
        bail!(
            "socket path {} is longer than the {} bytes a Unix socket allows; set \
             CUBA_EXEC_SOCKET to a shorter path",
            socket.display(),
            paths::MAX_SOCKET_PATH
        );
    }
    let config = Config::new(socket.clone(), state_dir)
        .load(|k| std::env::var(k).ok())
        .context("bad configuration")?;
    // Read before anything else opens a descriptor; the daemon is already detached.
    let handed = match args.handover {
        Some(fd) => Some(cuba_daemon::handover::read(fd).context("cannot read the hand-over")?),
        None => None,
    };
    // Before any thread exists: fork, and start a new session; the parent exits once this
    // daemon serves (0) or has failed to (1, its error in the log), so the client that started
    // it knows at once.
    if args.daemonize && handed.is_none() {
        *started = Some(
            cuba_daemon::platform::process::detach(STARTED_WITHIN).context("cannot daemonize")?,
        );
    }
    tracing_subscriber::fmt()
        .with_writer(|| cuba_daemon::health::LogWriter)
        .with_ansi(false)
        .log_internal_errors(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CUBA_EXEC_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    raise_fd_limit();
    cuba_daemon::platform::process::close_inherited_fds_on_exec();
    no_inherited_ignored_signals();
    // One thread: a command's request, spawn, output, exit and reply are handed from task to
    // task on it, with no wake-up of another thread between them (measured: 0.1 ms less per
    // short command, and less CPU). Blocking work goes to the blocking pool as before.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .on_thread_start(no_signals_here)
        .build()
        .context("cannot start the async runtime")?;
    if let Some(handed) = handed {
        // The socket and its lock stayed open across the exec: the same listener serves on.
        // SAFETY: descriptors the previous program kept open for exactly this; nothing else
        // here owns them.
        let lock = unsafe { File::from_raw_fd(handed.header.lock) };
        let std_listener =
            unsafe { std::os::unix::net::UnixListener::from_raw_fd(handed.header.listener) };
        std_listener.set_nonblocking(true)?;
        runtime.block_on(async {
            let listener = tokio::net::UnixListener::from_std(std_listener)?;
            let shutdown = stop_signal()?;
            cuba_daemon::run(
                config,
                Listener::new(listener),
                lock.as_raw_fd(),
                Some(handed),
                shutdown,
            )
            .await
        })?;
        drop(lock);
        return Ok(ExitCode::SUCCESS);
    }
    prepare_dir(socket.parent().unwrap_or(Path::new("/")))?;
    let Some(lock) = take_lock(&paths::lock_path(&socket))? else {
        // Another daemon serves this socket: the client connects to it.
        started.iter_mut().for_each(Started::ready);
        return Ok(ExitCode::SUCCESS);
    };
    runtime.block_on(serve(config, &socket, lock.as_raw_fd(), started))?;
    Ok(ExitCode::SUCCESS)
}

/// The blocking pool's threads take no signal: the kernel gives a process-wide signal to any
/// thread that does not block it, and SIGCHLD landing on an idle pool thread costs a wake-up of
/// that thread and a hand-over to the runtime's, on every command's exit. The runtime's thread
/// keeps them all.
fn no_signals_here() {
    // SAFETY: a sigset on the stack, filled, then set as this thread's mask.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
    }
}

/// Resolves on SIGTERM or SIGINT.
fn stop_signal() -> Result<impl std::future::Future<Output = ()>> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {},
            _ = int.recv() => {},
        }
    })
}

/// Signals the daemon inherited as ignored (from a shell's background job, `nohup`, an editor
/// that ignores SIGINT) would be ignored by every command it starts, exec keeps them so: a
/// person's Ctrl-C or Ctrl-\\ through a terminal would vanish. Each becomes a handler that does
/// nothing instead: the daemon still ignores it, and exec resets a handled signal to its
/// default, so commands start with default dispositions as under any terminal. SIGPIPE is
/// std's own (ignored here, reset for children); SIGCHLD is the reaper's. SIGXFSZ is handled
/// whatever its disposition: a file-size limit must make a write fail (EFBIG, reported like a
/// full disk), not kill the daemon. Before any thread exists.
fn no_inherited_ignored_signals() {
    extern "C" fn ignore(_: libc::c_int) {}
    for sig in 1..32 {
        if matches!(
            sig,
            libc::SIGKILL | libc::SIGSTOP | libc::SIGPIPE | libc::SIGCHLD
        ) {
            continue;
        }
        // SAFETY: sigaction with a zeroed struct to read the current disposition, then (only
        // for an ignored signal) a handler that touches nothing; both structs live across
        // the calls.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
                || (old.sa_sigaction != libc::SIG_IGN && sig != libc::SIGXFSZ)
            {
                continue;
            }
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = ignore as extern "C" fn(libc::c_int) as libc::sighandler_t;
            new.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut new.sa_mask);
            libc::sigaction(sig, &new, std::ptr::null_mut());
        }
    }
}

/// Every process costs the daemon a few descriptors (pipes, spool files): lift the soft limit
/// to the hard one so hundreds of processes fit.
fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer to a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                tracing::warn!(
                    "cannot raise the open-file limit: {}",
                    std::io::Error::last_os_error()
                );
            }
        }
    }
}

/// Creates the socket's directory owner-only if missing; refuses one owned by someone else.
fn prepare_dir(dir: &Path) -> Result<()> {
    cuba_daemon::private_dir::ensure(
        dir,
        "socket directory",
        "set CUBA_EXEC_SOCKET (or --socket) to a path in a directory of your own",
    )
    .map_err(anyhow::Error::msg)
}

/// Takes the one-daemon-per-socket lock and writes our pid into it. `None`: another daemon holds
/// it (a client racing us started it): nothing to do.
fn take_lock(path: &Path) -> Result<Option<File>> {
    // Reused from daemon to daemon, but never through a link or someone else's file.
    let mut file = safe_fs::open(
        path,
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .mode(0o600),
    )
    .with_context(|| format!("cannot open lock file {}", path.display()))?;
    // SAFETY: flock on an fd we own.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let mut pid = String::new();
        let _ = file.read_to_string(&mut pid);
        eprintln!(
            "cubad: already running (pid {}) for this socket",
            pid.trim()
        );
        return Ok(None);
    }
    file.set_len(0)?;
    file.rewind()?;
    write!(file, "{}", std::process::id())?;
    // On the descriptor: the path may have been replaced since.
    file.set_permissions(fs::Permissions::from_mode(0o600))?;
    Ok(Some(file))
}

async fn serve(
    config: Config,
    socket: &Path,
    lock: std::os::fd::RawFd,
    started: &mut Option<Started>,
) -> Result<()> {
    // We hold the lock: a socket file left here is stale.
    match fs::remove_file(socket) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot remove {}", socket.display())),
    }
    // Owner-only from the first moment: no window where the socket is wider.
    // SAFETY: umask only changes this process's file-creation mask.
    let old = unsafe { libc::umask(0o177) };
    let bound = tokio::net::UnixListener::bind(socket);
    // SAFETY: as above, restoring the previous mask.
    unsafe { libc::umask(old) };
    let listener = bound.with_context(|| format!("cannot listen on {}", socket.display()))?;
    let inode = fs::metadata(socket).map(|m| m.ino()).ok();
    // Connections wait in the listener's backlog until the daemon takes them.
    started.iter_mut().for_each(Started::ready);
    let shutdown = stop_signal()?;
    let result = cuba_daemon::run(config, Listener::new(listener), lock, None, shutdown).await;
    // Remove the socket only if it is still ours.
    if fs::metadata(socket).map(|m| m.ino()).ok() == inode {
        let _ = fs::remove_file(socket);
    }
    result
}
