//! macOS: libproc (`proc_pidinfo`, `proc_listchildpids`), `sysctl(KERN_PROCARGS2)`, rlimits set
//! in the child, Seatbelt through `sandbox-exec`, and malloc's pressure relief. No subreaper,
//! no pidfds, no cgroups: what that costs is said in each module.

pub mod cgroup;
pub mod descriptors;
pub mod input;
pub mod limits;
pub mod memory;
pub mod pipe;
pub mod proc;
pub mod process;
pub mod sandbox;
pub mod signal;
pub mod terminal;
