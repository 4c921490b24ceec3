//! Shell sessions where the OS's daemon does not offer them (`platform::capability::SESSIONS`):
//! every request for one is refused as unsupported, naming what to do instead.

use std::path::Path;

use cuba_protocol::{ProcessInfo, ProtocolError, SpawnRequest};

use crate::processes::launch::Launcher;
use crate::state::caller::Caller;

pub struct Sessions;

impl Sessions {
    pub fn new(_: Launcher) -> Sessions {
        Sessions
    }

    /// No session has a command running: there are none.
    pub fn busy(&self, _shell_id: u64) -> bool {
        false
    }

    pub fn run(
        &self,
        _: &Caller,
        _: SpawnRequest,
        _: &Path,
        _: Vec<String>,
    ) -> Result<ProcessInfo, ProtocolError> {
        let f = crate::platform::capability::SESSIONS;
        Err(ProtocolError::unsupported(f.name, f.instead))
    }
}
