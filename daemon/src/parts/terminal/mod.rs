//! Pseudo-terminals: the master end the daemon reads and writes (non-blocking, driven by the
//! runtime; on Windows a pseudo console, `platform/windows/master.rs`), the size and the
//! foreground process group; `screen.rs` renders what the program wrote as a terminal emulator
//! would.

#[cfg(unix)]
mod master;
mod screen;

#[cfg(windows)]
pub use crate::platform::windows::master::Master;
#[cfg(unix)]
pub use master::{open, Master};
pub use screen::{valid_size, Screen};
