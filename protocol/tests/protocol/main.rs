//! The protocol's wire format, handshake and client, one binary (linked once). `paths.rs` is a
//! binary of its own: it changes the process's environment.

#[cfg(unix)]
mod client;
mod golden;
mod handshake;
mod strategies;
mod wire;
