//! `cuba-exec`: the MCP stdio server an editor launches. It translates tool calls into `cubad`
//! requests and holds no process state of its own.

#![warn(clippy::unwrap_used)]

mod args;
mod fetch;
mod link;
mod platform;
mod progress;
mod reply;
mod server;
pub mod view;

pub use server::CubaExec;
