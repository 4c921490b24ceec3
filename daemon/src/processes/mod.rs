//! Running processes: the launch of a record's process through its layers (`launch`), the
//! supervisor that owns it until its end (`supervise`), and shells that run commands one after
//! another (`session`).

pub(crate) mod launch;
#[cfg(unix)]
pub(crate) mod session;
#[cfg(windows)]
#[path = "session/unsupported.rs"]
pub(crate) mod session;
pub(crate) mod supervise;
