//! `cuba-exec`: the MCP stdio server an editor launches. It translates tool calls into `cubad`
//! requests and holds no process state of its own.
//!
//! - [`transport`]: stdin/stdout as lines of JSON-RPC, every unusable line answered; [`stdio`]:
//!   those descriptors, read and written by the runtime itself where they are pipes.
//! - `server.rs`: the `CubaExec` handler; `tools/` one file per tool, `resources.rs` the
//!   per-process output resources.
//! - `link.rs`: the connection to cubad and which requests may be retried.
//! - `args.rs` / `reply.rs` / `schema.rs`: what the model sends, what it gets back, and the
//!   schemas of both; `error.rs`: error codes and what to do about them.
//! - `clients.rs`: the reply shape and arguments per MCP client (what each shows the model).
//! - `fetch.rs` and [`view`]: output for a reply, as the model sees it.
//! - [`http`]: `serve --http`, the streamable HTTP endpoint: tokens, sessions, bounds.
//! - `approve.rs`: a command held for the person's approval, asked through the client
//!   (elicitation, both eras).
//! - `hints.rs`, `env.rs`, `keys.rs`, `spawn.rs`, `progress.rs`, `platform.rs`: small pieces
//!   the tools share.

#![warn(clippy::unwrap_used)]

mod approve;
mod args;
mod clients;
mod env;
mod error;
mod excerpt;
mod fetch;
mod hints;
pub mod http;
mod keys;
mod link;
mod platform;
mod progress;
mod reply;
mod resources;
mod schema;
mod server;
mod spawn;
pub mod stdio;
mod subscriptions;
mod tasks;
mod tools;
pub mod transport;
pub mod view;

pub use server::CubaExec;
