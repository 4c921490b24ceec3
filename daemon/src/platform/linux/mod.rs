//! Linux: `/proc`, pidfds, `prctl`, Landlock, namespaces, `prlimit` and cgroup v2.

pub mod descriptors;
pub mod input;
pub mod limits;
pub mod pipe;
pub mod proc;
pub mod process;
pub mod sandbox;
pub mod signal;
pub mod terminal;
