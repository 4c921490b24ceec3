//! One module per subcommand: its clap arguments and its `run`.

pub mod approvals;
pub mod attach;
pub mod audit;
pub mod bridge;
pub mod completions;
pub mod daemon;
pub mod events;
pub mod hosts;
pub mod http;
pub mod info;
pub mod kill;
pub mod logs;
pub mod man;
pub mod policy;
pub mod prune;
pub mod ps;
pub mod ps_all;
pub mod resize;
pub mod run;
mod run_ask;
pub mod screen;
pub mod send;
pub mod setup;
pub mod start;
pub mod tail;
pub mod token;
pub mod wait;
