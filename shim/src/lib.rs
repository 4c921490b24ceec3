//! `cuba-exec`: the MCP stdio server an editor launches. It translates tool calls into `cubad`
//! requests and holds no process state of its own.

#![warn(clippy::unwrap_used)]

mod args;
mod daemon;
mod output;
mod progress;
mod reply;
mod server;
pub mod view;

pub use server::CubaExec;
