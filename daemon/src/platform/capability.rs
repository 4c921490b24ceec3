//! What this OS's daemon can do: one table, so that every refusal of a feature the OS lacks
//! says the same thing, with the `Unsupported` kind and reason a client can branch on
//! (`ProtocolError::unsupported`). Linux and macOS have every feature; Windows lacks those
//! marked here (docs/decisions.md, "Windows": why each).

use cuba_protocol::ProtocolError;

/// A feature by its name in refusals, and what to do instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Feature {
    pub name: &'static str,
    pub instead: &'static str,
    /// Whether this OS's daemon has it.
    pub here: bool,
}

impl Feature {
    /// `Ok` where the feature exists, else the refusal naming it and the OS.
    pub fn check(self) -> Result<(), ProtocolError> {
        match self.here {
            true => Ok(()),
            false => Err(ProtocolError::unsupported(self.name, self.instead)),
        }
    }
}

const UNIX: bool = cfg!(unix);

/// Persistent shells (`session`): a shell fed commands one by one through a pipe, with markers
/// for each command's end; `cmd.exe` and PowerShell read their input differently.
pub const SESSIONS: Feature = Feature {
    name: "shell sessions",
    instead: ": run each command on its own (use `&&` to chain)",
    here: UNIX,
};

/// In-place upgrade: the program is replaced with `execve` keeping every descriptor.
pub const UPGRADES: Feature = Feature {
    name: "in-place upgrades",
    instead: ": stop the daemon (`cubactl daemon stop`) and let the next client start the new one",
    here: UNIX,
};

/// Password asks (`cuba-askpass`): the genuine programs a password may go to are told by file
/// identity and process ancestry, which the Windows daemon does not read.
pub const PASSWORD_ASKS: Feature = Feature {
    name: "password asks",
    instead: ": give the program its credentials another way (a credential manager)",
    here: UNIX,
};

/// Every feature, for `cubactl daemon status` and the docs.
pub const ALL: [Feature; 3] = [SESSIONS, UPGRADES, PASSWORD_ASKS];

/// The features this OS lacks, one line, for the daemon's status (`None` when it has all).
pub fn missing() -> Option<String> {
    let names: Vec<&str> = ALL.iter().filter(|f| !f.here).map(|f| f.name).collect();
    (!names.is_empty()).then(|| names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_feature_is_refused_as_unsupported_naming_it() {
        let lacking = Feature {
            here: false,
            ..SESSIONS
        };
        let e = lacking.check().expect_err("refused");
        assert_eq!(e.kind, cuba_protocol::ErrorKind::Unsupported);
        assert!(e.message.contains("shell sessions"), "{}", e.message);
        assert!(Feature {
            here: true,
            ..SESSIONS
        }
        .check()
        .is_ok());
    }

    #[test]
    fn unix_has_every_feature() {
        if cfg!(unix) {
            assert_eq!(missing(), None);
        }
    }
}
