//! Running processes: the launch of a record's process through its layers (`launch`), the
//! supervisor that owns it until its end (`supervise`), shells that run commands one after
//! another (`session`), the watcher of the ports running trees listen on (`ports`), and the
//! ports leased to them (`leases`), and the budgets per agent over their trees (`budgets`).

pub(crate) mod budgets;
pub(crate) mod launch;
pub(crate) mod leases;
pub(crate) mod ports;
#[cfg(unix)]
pub(crate) mod session;
#[cfg(windows)]
#[path = "session/unsupported.rs"]
pub(crate) mod session;
pub(crate) mod supervise;
