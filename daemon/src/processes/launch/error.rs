//! Why a start failed, kept whole through the layers: the stage it failed in, the words for
//! people, and the OS error when there is one, so that the kind a client reads
//! (`StartFailure`: not found, permission, other) comes from the error, not from the words.

use std::fmt;
use std::io;

use cuba_protocol::StartFailure;

/// The part of a start that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The working directory.
    Cwd,
    /// The shell's program: a script file, a session's command pipe (Unix).
    #[cfg(unix)]
    Program,
    Cgroup,
    Sandbox,
    Terminal,
    Pipes,
    ExecCheck,
    /// The spawn itself: the shell could not be run.
    Spawn,
}

#[derive(Debug)]
pub struct LaunchError {
    pub stage: Stage,
    pub why: String,
    pub source: Option<io::Error>,
}

impl LaunchError {
    /// A failure with no OS error behind it.
    pub fn new(stage: Stage, why: impl Into<String>) -> LaunchError {
        LaunchError {
            stage,
            why: why.into(),
            source: None,
        }
    }

    /// A failure of the OS: `why` says what was being done, `source` what the OS said.
    pub fn os(stage: Stage, why: impl Into<String>, source: io::Error) -> LaunchError {
        LaunchError {
            stage,
            why: why.into(),
            source: Some(source),
        }
    }

    /// `f` as a map from an OS error to a failure at `stage`: `doing` and the error's words.
    pub fn at(stage: Stage, doing: &str) -> impl FnOnce(io::Error) -> LaunchError + '_ {
        move |e| LaunchError::os(stage, format!("{doing}: {e}"), e)
    }

    /// The kind a client reads.
    pub fn kind(&self) -> StartFailure {
        self.source
            .as_ref()
            .map_or(StartFailure::Other, StartFailure::of)
    }
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.why)
    }
}

impl std::error::Error for LaunchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kind_comes_from_the_os_error_and_the_words_stay() {
        let e = LaunchError::at(Stage::Spawn, "cannot run /bin/nope")(io::Error::from(
            io::ErrorKind::NotFound,
        ));
        assert_eq!(e.kind(), StartFailure::NotFound);
        assert_eq!(e.stage, Stage::Spawn);
        assert!(e.to_string().starts_with("cannot run /bin/nope: "), "{e}");
        let e = LaunchError::os(
            Stage::Cwd,
            "cwd /root/x",
            io::Error::from(io::ErrorKind::PermissionDenied),
        );
        assert_eq!(e.kind(), StartFailure::PermissionDenied);
        // No OS error: no kind to guess from words.
        let e = LaunchError::new(Stage::Cwd, "cwd /x: not a directory, permission denied");
        assert_eq!(e.kind(), StartFailure::Other);
    }
}
