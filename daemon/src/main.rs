//! `cubad`, the supervisor. Unix: `main_unix.rs`. Windows: not built yet (the protocol, the
//! clients and the Windows platform pieces are; the server and supervision there are next).

#[cfg(unix)]
#[path = "main_unix.rs"]
mod unix;

#[cfg(unix)]
fn main() -> std::process::ExitCode {
    unix::main()
}

#[cfg(windows)]
fn main() -> std::process::ExitCode {
    eprintln!(
        "cubad: the daemon does not run on Windows yet (cuba-exec and cubactl build there; \
         the Windows server and supervision are still to come)"
    );
    std::process::ExitCode::from(2)
}
