//! The process group layer: a command on pipes leads a process group of its own (the handle
//! its whole tree is stopped by), in the daemon's session, which has no terminal.

use std::os::unix::process::CommandExt;
use std::process::Command;

use super::layer::Layer;

pub struct ProcessGroup;

impl Layer for ProcessGroup {
    fn before(&mut self, cmd: &mut Command) -> Result<(), String> {
        // No `pre_exec`: without one std spawns with posix_spawn (vfork-fast) instead of
        // copying the daemon with fork.
        cmd.process_group(0);
        Ok(())
    }
}
