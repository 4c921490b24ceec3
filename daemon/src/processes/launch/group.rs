//! The process group layer: a command on pipes leads a process group of its own (the handle
//! its whole tree is stopped by), in the daemon's session, which has no terminal.

use super::error::LaunchError;
use super::layer::Layer;
use crate::platform::spawn::{Group, Spawn};

pub struct ProcessGroup;

impl Layer for ProcessGroup {
    fn before(&mut self, cmd: &mut Spawn) -> Result<(), LaunchError> {
        cmd.group(Group::Own);
        Ok(())
    }
}
