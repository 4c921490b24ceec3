//! Linux: `/proc`, pidfds, `prctl`, Landlock, namespaces, `prlimit`, cgroups (v2, v1 for limits) and glibc's
//! `malloc_trim`.

pub mod cgroup;
mod cgroup_bases;
mod cgroup_budget;
mod cgroup_files;
mod cgroup_leftovers;
mod cgroup_pool;
mod cgroup_proc;
mod cgroup_watch;
pub mod clone;
mod clone3;
pub mod descriptors;
pub mod exec_check;
pub mod fd_pass;
pub mod input;
pub mod limits;
pub mod memory;
pub mod pipe;
pub mod proc;
pub mod process;
mod proxy_port;
mod read_masks;
pub mod sandbox;
pub mod signal;
mod spawner;
pub mod terminal;
