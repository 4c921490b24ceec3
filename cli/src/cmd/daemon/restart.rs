//! `daemon restart`: stop (gracefully; running processes only with --force), then start. Works
//! on a daemon of another protocol version too, through the pid in its lock file.

use std::process::ExitCode;

use anyhow::Result;

use super::stop::{self, Stopped};
use crate::ctx::Ctx;
use crate::exit;

pub async fn run(ctx: &Ctx, args: stop::Args) -> Result<ExitCode> {
    match stop::stop_daemon(ctx, args.force).await? {
        Stopped::Refused(why) => {
            eprintln!("cubactl: not restarting: {why}");
            return Ok(exit::failed());
        }
        Stopped::NotRunning => {}
        Stopped::Done { pid, processes } => {
            outln!("{}", stop::stopped_line(pid, processes))?;
        }
    }
    super::start::started(ctx, "started").await
}
