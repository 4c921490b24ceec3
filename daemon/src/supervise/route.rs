//! How a supervisor reaches the session layer without knowing it: a session's shell routes its
//! output through a [`Route`] (implemented by `session::Router`).

use std::sync::Arc;

use cuba_protocol::Stream;

use crate::record::Proc;

/// The output of a session's shell, routed to the command running in it.
pub trait Route: Send {
    /// Bytes the shell wrote on `stream`: into the shell's record and, between the running
    /// command's markers, into the command's; a command whose end marker passes ends.
    fn feed(&mut self, shell: &Proc, stream: Stream, bytes: &[u8]);
    /// A stream of the shell closed: it will carry no more markers.
    fn closed(&mut self, shell: &Proc, stream: Stream);
    /// The shell ended: the command it ran (if any) ends with it.
    fn shell_ended(&mut self, shell: &Proc);
    /// The command running in the shell now.
    fn current(&self) -> Option<Arc<Proc>>;
}
