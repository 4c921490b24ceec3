//! Linux: `/proc`, pidfds, `prctl`, Landlock, namespaces, `prlimit`, cgroup v2 and glibc's
//! `malloc_trim`.

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
