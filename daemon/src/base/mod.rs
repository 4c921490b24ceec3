//! The ground floor: settings (`config`, `policy`, `side_effects`) and the small leaves every
//! part uses (admission of work, the blocking pool, descriptors, health counts). Nothing here
//! knows of processes.

pub(crate) mod admission;
pub(crate) mod blocking;
pub mod config;
#[cfg(unix)]
pub(crate) mod fd;
pub mod health;
pub mod policy;
pub(crate) mod side_effects;
