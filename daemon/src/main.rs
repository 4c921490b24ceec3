//! `cubad`, the supervisor: `main_unix.rs` on Unix, `main_windows.rs` on Windows.

#[cfg(unix)]
#[path = "main_unix.rs"]
mod unix;

#[cfg(windows)]
#[path = "main_windows.rs"]
mod windows;

#[cfg(unix)]
fn main() -> std::process::ExitCode {
    unix::main()
}

#[cfg(windows)]
fn main() -> std::process::ExitCode {
    windows::main()
}
