//! Deny-read masks as Landlock rules. Landlock only grants: a ruleset that handles reading
//! refuses every read no rule allows. So the masks are the complement of what is granted:
//!
//! - listing directories (`ReadDir`) is granted beneath `/`: names stay visible everywhere,
//!   a masked directory's included, its files' contents do not;
//! - reading files (`ReadFile`) is granted beneath every entry of `/` that is neither a mask
//!   nor holds one, and so on down each directory that holds a mask (`/home`, `~`,
//!   `~/.config`, …), one rule per entry.
//!
//! What it costs: the directories on the way to a mask are read at each start (a few hundred
//! rules for the defaults), and an entry made directly in one of them after the command
//! started (a new file in `~`) is unreadable to that command (readable to the next).
//! Symlinks are not granted (their target is judged where it lies), and a file that is a hard
//! link of a masked file is not granted either. A mask that does not exist is skipped: made
//! later, it is masked from the next command on.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What the masks come to at one start.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Grants {
    /// Where reading files is granted (beneath each).
    pub read: Vec<PathBuf>,
    /// The masks in force (existing, resolved).
    pub masks: Vec<PathBuf>,
}

/// The read grants that leave `masks` unreadable; `None` when no mask exists.
pub fn grants(masks: &[PathBuf]) -> Option<Grants> {
    let mut resolved: Vec<PathBuf> = masks
        .iter()
        .filter_map(|m| std::fs::canonicalize(m).ok())
        .collect();
    resolved.sort();
    resolved.dedup();
    if resolved.is_empty() {
        return None;
    }
    // A masked file's identity: another name of it (a hard link) is not granted either.
    let files: HashSet<(u64, u64)> = resolved
        .iter()
        .filter_map(|m| std::fs::metadata(m).ok())
        .filter(|md| !md.is_dir())
        .map(|md| (md.dev(), md.ino()))
        .collect();
    let mut holders: HashSet<PathBuf> = HashSet::new();
    for m in &resolved {
        holders.extend(m.ancestors().skip(1).map(Path::to_path_buf));
    }
    let masked: HashSet<&Path> = resolved.iter().map(PathBuf::as_path).collect();
    let mut read = Vec::new();
    let mut dirs = vec![PathBuf::from("/")];
    while let Some(dir) = dirs.pop() {
        // A holder that cannot be listed grants nothing beneath it: closed, not open.
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if masked.contains(path.as_path()) {
                continue;
            }
            let Ok(md) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if md.file_type().is_symlink() {
                continue;
            }
            if holders.contains(&path) && md.is_dir() {
                dirs.push(path);
                continue;
            }
            if !md.is_dir() && files.contains(&(md.dev(), md.ino())) {
                continue;
            }
            read.push(path);
        }
    }
    read.sort();
    Some(Grants {
        read,
        masks: resolved,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_grants_leave_out_the_masks_and_what_points_at_them() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().canonicalize().unwrap();
        for d in [".ssh", ".config/gh", ".config/nvim", "work/src"] {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        std::fs::write(home.join(".ssh/id_ed25519"), "key").unwrap();
        std::fs::write(home.join(".netrc"), "machine x").unwrap();
        std::fs::write(home.join(".bashrc"), "rc").unwrap();
        std::fs::hard_link(home.join(".netrc"), home.join("netrc-copy")).unwrap();
        std::os::unix::fs::symlink(home.join(".ssh/id_ed25519"), home.join("key-link")).unwrap();
        let masks = [
            home.join(".ssh"),
            home.join(".netrc"),
            home.join(".config/gh"),
            home.join(".aws"),
        ];
        let g = grants(&masks).unwrap();
        assert_eq!(
            g.masks.len(),
            3,
            "the missing one is skipped: {:?}",
            g.masks
        );
        let has = |p: &Path| g.read.iter().any(|r| r == p);
        assert!(has(&home.join("work")), "a sibling is granted whole");
        assert!(has(&home.join(".bashrc")));
        assert!(
            has(&home.join(".config/nvim")),
            "a holder is split into its entries"
        );
        assert!(!has(&home.join(".config")), "a holder is not granted whole");
        assert!(!has(&home), "nor any directory above");
        assert!(!has(&home.join(".ssh")) && !has(&home.join(".netrc")));
        assert!(
            !has(&home.join("netrc-copy")),
            "another name of a masked file"
        );
        assert!(
            !has(&home.join("key-link")),
            "a symlink is judged at its target"
        );
        assert!(
            has(Path::new("/usr")),
            "the rest of the system stays readable"
        );
        assert!(grants(&[home.join("nothing-here")]).is_none());
    }
}
