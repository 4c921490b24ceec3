//! How a supervisor reaches the session layer without knowing it: a session's shell routes its
//! output through a [`Route`] (implemented by `session::Router`).

use std::sync::Arc;

use cuba_protocol::Stream;

use crate::state::record::{Proc, Writer};

/// The output of a session's shell, routed to the command running in it.
pub trait Route: Send {
    /// Bytes the shell wrote on `stream`: into the shell's record and, between the running
    /// command's markers, into the command's; a command whose end marker passes ends.
    fn feed(&mut self, shell: &Writer, stream: Stream, bytes: &[u8]);
    /// A stream of the shell closed: it will carry no more markers.
    fn closed(&mut self, shell: &Writer, stream: Stream);
    /// The shell ended: the command it ran (if any) ends with it.
    fn shell_ended(&mut self, shell: &Writer);
    /// The command running in the shell now, to read.
    fn current(&self) -> Option<Arc<Proc>>;
    /// Calls `write` with the writer of the command running in the shell now, if one runs:
    /// the session holds it, and its shell's supervisor writes the command's record through
    /// here.
    fn write_current(&self, write: &mut dyn FnMut(&Writer));
}
