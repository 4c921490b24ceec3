//! The handshake's bodies: who a client is, and the daemon's welcome.

use std::ffi::OsString;

use serde::{Deserialize, Serialize};

/// An environment as `(name, value)` pairs. `OsString` so non-UTF-8 values survive the trip;
/// on the wire as byte strings ([`crate::os_text`]), the same from every OS.
pub type Env = Vec<(OsString, OsString)>;

/// What kind of program is on the other end of a connection.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientKind {
    /// The MCP server `cuba-exec`, on behalf of an agent.
    Mcp,
    /// The human CLI `cubactl`.
    Cli,
    /// Anything else (tests, benchmarks, scripts).
    Other,
}

/// Who a client is. Sent once, in the handshake.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ClientInfo {
    pub kind: ClientKind,
    /// Display name: the MCP `clientInfo.name`, or `cubactl`.
    pub name: String,
    pub pid: u32,
    /// The client's working directory: the default `cwd` of what it spawns.
    #[serde(with = "crate::os_text")]
    pub cwd: OsString,
    /// The client's environment: the base environment of what it spawns.
    #[serde(with = "crate::os_text::env")]
    pub env: Env,
}

/// Handshake request body (after the fixed-layout version prefix, see `handshake.rs`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    pub client: ClientInfo,
    /// The client runs on another machine and reaches this daemon through a bridge (`cubactl
    /// bridge` over ssh, `docker exec -i`, …). Its `env` then holds only its policy narrowing
    /// (`CUBA_EXEC_*`): what it starts gets this daemon's environment (the remote user's) with
    /// those on top. An empty `cwd` means the daemon user's home directory.
    pub remote: bool,
}

/// Handshake reply body.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Welcome {
    pub daemon_version: String,
    pub daemon_pid: u32,
    /// For a remote client ([`Hello::remote`]): the environment what it starts begins with, so
    /// the client can hide its secret values from output as it does its own. Empty otherwise.
    #[serde(with = "crate::os_text::env")]
    pub env: Env,
}
