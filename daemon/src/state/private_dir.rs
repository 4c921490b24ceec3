//! The socket's and the state's directories are this user's alone, as tmux and OpenSSH require
//! of theirs: the state holds every process's output, and the socket's directory decides who can
//! put a socket in its place.

use std::fs;
#[cfg(unix)]
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::Path;

/// Makes `dir` (and missing parents) mode 0700 whatever the umask, or checks the one there: a
/// directory owned by this user and closed to group and others. `what` names it in the error,
/// `setting` says how to point elsewhere; the error says the fix.
#[cfg(unix)]
pub fn ensure(dir: &Path, what: &str, setting: &str) -> Result<(), String> {
    let shown = dir.display();
    if !dir.exists() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create the {what} {shown}: {e}"))?;
        // Made here: made private, whatever the umask left.
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("cannot make the {what} {shown} private: {e}"))?;
    }
    // Not followed if a link: one planted in /tmp (where a sandboxed command may write) would
    // put the daemon's files in a directory of the link's choosing.
    let meta =
        fs::symlink_metadata(dir).map_err(|e| format!("cannot read the {what} {shown}: {e}"))?;
    if meta.file_type().is_symlink() {
        return Err(format!(
            "the {what} {shown} is a symbolic link: refusing to follow it; remove it, or {setting}"
        ));
    }
    if !meta.is_dir() {
        return Err(format!("the {what} {shown} is not a directory; {setting}"));
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(format!(
            "the {what} {shown} belongs to uid {}, not to this user ({me}); {setting}",
            meta.uid()
        ));
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "the {what} {shown} is open to other users (mode {mode:03o}): `chmod 700 {shown}`, \
             or {setting}"
        ));
    }
    Ok(())
}

/// Windows: makes `dir` with a protected access list of this user's (and the system's and
/// administrators'), or checks the one there: owned by this user, open to nobody else, and not
/// a link or junction. The error says what is wrong and how to point elsewhere.
#[cfg(windows)]
pub fn ensure(dir: &Path, what: &str, setting: &str) -> Result<(), String> {
    let shown = dir.display();
    if !dir.exists() {
        cuba_protocol::win::make_private_dir(dir)
            .map_err(|e| format!("cannot create the {what} {shown}: {e}"))?;
    }
    let meta =
        fs::symlink_metadata(dir).map_err(|e| format!("cannot read the {what} {shown}: {e}"))?;
    if meta.file_type().is_symlink() {
        return Err(format!(
            "the {what} {shown} is a link: refusing to follow it; remove it, or {setting}"
        ));
    }
    if !meta.is_dir() {
        return Err(format!("the {what} {shown} is not a directory; {setting}"));
    }
    match cuba_protocol::win::private_dir_problem(dir) {
        Ok(None) => Ok(()),
        // Wine keeps no access lists on files (every file reads as open to everyone): what
        // cannot be checked is said in the log and in `daemon status`, not refused.
        Ok(Some(problem)) if cuba_protocol::win::wine().is_some() => {
            tracing::warn!("the {what} {shown} is {problem} (Wine keeps no file access lists)");
            Ok(())
        }
        Ok(Some(problem)) => Err(format!(
            "the {what} {shown} is {problem}: give it to this user alone (`icacls`), or {setting}"
        )),
        Err(e) => Err(format!("cannot read who may use the {what} {shown}: {e}")),
    }
}

#[cfg(test)]
#[cfg(unix)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_dir_is_made_private_and_an_open_one_refused_with_the_fix() {
        let root = tempfile::tempdir().unwrap();
        let made = root.path().join("a/b");
        ensure(&made, "socket directory", "set X").unwrap();
        assert_eq!(fs::metadata(&made).unwrap().mode() & 0o777, 0o700);

        let open = root.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o755)).unwrap();
        let e = ensure(&open, "state directory", "set CUBA_EXEC_STATE_DIR").unwrap_err();
        assert!(e.contains("open to other users (mode 755)"), "{e}");
        assert!(e.contains(&format!("chmod 700 {}", open.display())), "{e}");

        // A link to a private directory: refused, not followed.
        let link = root.path().join("link");
        std::os::unix::fs::symlink(&made, &link).unwrap();
        let e = ensure(&link, "state directory", "set X").unwrap_err();
        assert!(
            e.contains("is a symbolic link: refusing to follow it"),
            "{e}"
        );

        // /tmp: shared (and not this user's, unless root runs this: then it is open).
        assert!(ensure(Path::new("/tmp"), "socket directory", "set X").is_err());
    }
}
