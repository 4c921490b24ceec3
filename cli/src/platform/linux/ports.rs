//! Listening sockets: the reading of `/proc` the daemon's port watcher shares.

pub use cuba_protocol::ports::holders;
pub use cuba_protocol::ports::listening;
