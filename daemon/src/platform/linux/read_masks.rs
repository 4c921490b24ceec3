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
//! The grants are kept while no directory on the way to a mask changes (one `stat` each per
//! start), so the walk is paid once, not at every start.
//! Symlinks are not granted (their target is judged where it lies), and a file that is a hard
//! link of a masked file is not granted either. A mask that does not exist is skipped: made
//! later, it is masked from the next command on.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What the masks come to at one start.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Grants {
    /// Where reading files is granted (beneath each).
    pub read: Vec<PathBuf>,
    /// The masks in force (existing, resolved).
    pub masks: Vec<PathBuf>,
    /// What the walk read: each mask's existence and each holder's identity and change time.
    stamps: Vec<(PathBuf, Option<Stamp>)>,
}

/// A directory's identity and last change, or a mask's existence.
type Stamp = (u64, u64, i64, i64);

fn stamp(path: &Path) -> Option<Stamp> {
    let md = std::fs::symlink_metadata(path).ok()?;
    Some((md.dev(), md.ino(), md.mtime(), md.mtime_nsec()))
}

/// The last grants made, for the masks they were made for.
static LAST: std::sync::Mutex<Option<(Vec<PathBuf>, Arc<Grants>)>> = std::sync::Mutex::new(None);

/// [`grants`], kept while nothing it read has changed: the same `Arc` for the same grants.
pub fn cached(masks: &[PathBuf]) -> Option<Arc<Grants>> {
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((for_masks, g)) = last.as_ref() {
        if for_masks == masks && g.stamps.iter().all(|(p, s)| stamp(p) == *s) {
            return Some(g.clone());
        }
    }
    let g = Arc::new(grants(masks)?);
    *last = Some((masks.to_vec(), g.clone()));
    Some(g)
}

/// The read grants that leave `masks` unreadable; `None` when no mask exists.
pub fn grants(masks: &[PathBuf]) -> Option<Grants> {
    // Stamped before the walk: a change during it makes the next start walk again.
    let mut stamps: Vec<(PathBuf, Option<Stamp>)> =
        masks.iter().map(|m| (m.clone(), stamp(m))).collect();
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
        stamps.push((dir.clone(), stamp(&dir)));
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
        stamps,
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
        // Kept while nothing changes; walked again once a holder does.
        let (a, b) = (cached(&masks).unwrap(), cached(&masks).unwrap());
        assert!(Arc::ptr_eq(&a, &b));
        std::fs::write(home.join(".config/new"), "x").unwrap();
        let c = cached(&masks).unwrap();
        assert!(!Arc::ptr_eq(&a, &c) && c.read.contains(&home.join(".config/new")));
    }
}
