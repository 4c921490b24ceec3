//! What a command is started as, shared by its pipes (`pipes.rs`) and its terminal (`tty.rs`).

use std::path::Path;

use cuba_protocol::SpawnRequest;

use crate::platform::win_shell::Kind;

/// Writes queued for a command's stdin before a request is told it does not read them.
pub const STDIN_QUEUE: usize = 64;

/// What a command is started as.
pub struct Plan<'a> {
    pub shell: &'a str,
    pub kind: Kind,
    pub req: &'a SpawnRequest,
    pub cwd: &'a Path,
    /// The client's environment with the request's on top, as Windows orders a block.
    pub env: &'a [(String, String)],
}
