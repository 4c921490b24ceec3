//! The Unix socket rule of a sandboxed tree: which pathname sockets its `connect`s may reach,
//! and where its `bind`s may make socket files. A network namespace does not keep a command
//! from a pathname socket (a tmux server's, ssh-agent's, docker's), and Landlock cannot refuse
//! a connect to one before its ABI 9: the exec checks hand every `connect` and `bind` of such
//! a tree to the daemon, which finds the file as the caller would and asks this rule
//! (`platform::exec_check`'s `sockets.rs`).
//!
//! A connect may reach a socket under the tree's allowed directories (its roots, or its
//! working directory without roots), one the person listed (`unix_sockets`), or one the tree
//! made itself (a forkserver's, a test server's, a language server's). Paths are compared with
//! their links resolved: the rule's own once, when it is made; the socket's from the file the
//! daemon opened, so a link changed afterwards changes nothing.
//!
//! What it cannot see: a socket file of the same user that the tree may rename or link into
//! an allowed directory (from another directory it may write, such as `/tmp`) is under that
//! directory from then on.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A socket file: device, inode, and when it was made (`platform::exec_check::SocketFile`).
pub type SocketFile = (u64, u64, u64);

/// Sockets a tree made that are remembered at most: a tree that makes sockets without end
/// does not grow the daemon without end (those past it are not remembered, so a connect to
/// them is judged by the directories alone).
const MAX_MADE: usize = 4096;

/// The rule as the launch gives it: kept by the record and carried across an upgrade.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SocketRule {
    /// Where a connect may go: the confinement's roots, or the tree's working directory.
    pub dirs: Vec<PathBuf>,
    /// Sockets the person allows by name (`unix_sockets`).
    pub listed: Vec<PathBuf>,
    /// Where no connect goes even inside `dirs`, unless listed: what the sandbox hides from
    /// reading (`deny_read`: `~/.ssh`, `~/.gnupg`, whose agents' sockets are there).
    pub hidden: Vec<PathBuf>,
    /// Where a bind may make a socket file: what the write confinement lets the tree write
    /// (the daemon's bind is outside the tree's Landlock rules); `None` without one.
    pub writable: Option<Vec<PathBuf>>,
}

impl SocketRule {
    /// The rule of a tree confined to `roots` (its working directory `cwd` without any), with
    /// the sockets `listed` by the person, what the sandbox keeps `hidden` and, under write
    /// confinement, `writable`.
    pub fn new(
        (roots, cwd): (&[PathBuf], &Path),
        (listed, hidden): (&[PathBuf], &[PathBuf]),
        writable: Option<Vec<PathBuf>>,
    ) -> SocketRule {
        let dirs = match roots.is_empty() {
            true => vec![cwd.to_path_buf()],
            false => roots.to_vec(),
        };
        SocketRule {
            dirs: resolved(&dirs),
            listed: listed.to_vec(),
            hidden: resolved(hidden),
            writable: writable.as_deref().map(resolved),
        }
    }
}

/// `paths` with their links resolved, where they exist (as given where they do not).
fn resolved(paths: &[PathBuf]) -> Vec<PathBuf> {
    paths
        .iter()
        .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
        .collect()
}

/// What the tree made itself, as a hand-over carries it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SavedSockets {
    pub rule: SocketRule,
    /// Socket files.
    pub files: Vec<SocketFile>,
    /// Abstract names (without their leading NUL).
    pub names: Vec<Vec<u8>>,
}

#[derive(Default)]
struct Made {
    files: HashSet<SocketFile>,
    names: HashSet<Vec<u8>>,
}

/// A tree's rule and what the tree made: shared by its judge and its record.
#[derive(Default)]
pub struct Sockets {
    rule: SocketRule,
    /// std Mutex: held for a set's look-up or insert only.
    made: Mutex<Made>,
}

impl Sockets {
    pub fn new(rule: SocketRule) -> Sockets {
        Sockets {
            rule,
            made: Mutex::default(),
        }
    }

    /// The rule and what the tree made, taken over from another program of the daemon.
    pub fn restore(saved: SavedSockets) -> Sockets {
        let made = Made {
            files: saved.files.into_iter().collect(),
            names: saved.names.into_iter().collect(),
        };
        Sockets {
            rule: saved.rule,
            made: Mutex::new(made),
        }
    }

    pub fn saved(&self) -> SavedSockets {
        let made = self.lock();
        SavedSockets {
            rule: self.rule.clone(),
            files: made.files.iter().copied().collect(),
            names: made.names.iter().cloned().collect(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Made> {
        self.made.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a connect may reach the socket file `path` (links resolved), which is `id`;
    /// `Err` with the sentence a refusal reports.
    pub fn connect(&self, path: &Path, id: SocketFile) -> Result<(), String> {
        if self.lock().files.contains(&id) {
            return Ok(());
        }
        let hidden = self.rule.hidden.iter().find(|h| path.starts_with(h));
        if hidden.is_none() && self.rule.dirs.iter().any(|d| path.starts_with(d)) {
            return Ok(());
        }
        // By what each names now (a listed link may point somewhere new): stat'ed only here,
        // for a socket no cheaper rule allowed.
        let listed = self.rule.listed.iter().any(|l| {
            let same = |m: std::fs::Metadata| (m.dev(), m.ino()) == (id.0, id.1);
            std::fs::metadata(l).is_ok_and(same) || l.as_path() == path
        });
        let why = match hidden {
            _ if listed => return Ok(()),
            Some(h) => format!("under {}, which the sandbox hides", h.display()),
            None => "outside the allowed directories".to_string(),
        };
        Err(format!(
            "connecting to the socket {} is refused in the sandbox ({why}; list it in \
             unix_sockets to allow it)",
            path.display()
        ))
    }

    /// Whether a connect may reach the abstract name `name`: one the tree bound itself (the
    /// Landlock scope's rule, which the daemon's own connect is not under).
    pub fn connect_abstract(&self, name: &[u8]) -> Result<(), String> {
        match self.lock().names.contains(name) {
            true => Ok(()),
            false => Err(format!(
                "connecting to the abstract socket @{} is refused in the sandbox (it was not \
                 made in this command's tree)",
                String::from_utf8_lossy(name)
            )),
        }
    }

    /// Whether a bind may make the socket file `name` in directory `dir` (links resolved).
    pub fn bind(&self, dir: &Path, name: &OsStr) -> Result<(), String> {
        match &self.rule.writable {
            Some(w) if !w.iter().any(|d| dir.starts_with(d)) => Err(format!(
                "making the socket {} is refused in the sandbox (outside the directories it \
                 may write)",
                dir.join(name).display()
            )),
            _ => Ok(()),
        }
    }

    /// The tree made the socket file `id`.
    pub fn made_file(&self, id: SocketFile) {
        let mut made = self.lock();
        if made.files.len() < MAX_MADE {
            made.files.insert(id);
        }
    }

    /// The tree bound the abstract name `name`.
    pub fn made_name(&self, name: &[u8]) {
        let mut made = self.lock();
        if made.names.len() < MAX_MADE {
            made.names.insert(name.to_vec());
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::net::UnixListener;

    fn v(ps: &[&Path]) -> Vec<PathBuf> {
        ps.iter().map(|p| p.to_path_buf()).collect()
    }

    fn rule(dirs: &[&Path], listed: &[&Path], writable: Option<&[&Path]>) -> Sockets {
        let (roots, cwd) = (v(dirs), Path::new("/nonexistent"));
        Sockets::new(SocketRule::new(
            (&roots, cwd),
            (&v(listed), &[]),
            writable.map(v),
        ))
    }

    fn id(p: &Path) -> SocketFile {
        let m = std::fs::metadata(p).unwrap();
        (m.dev(), m.ino(), 0)
    }

    #[test]
    fn a_socket_under_a_root_is_allowed_and_one_outside_is_refused_by_name() {
        let (root, outside) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let inside = root.path().canonicalize().unwrap().join("sub/s");
        std::fs::create_dir(inside.parent().unwrap()).unwrap();
        let _l = UnixListener::bind(&inside).unwrap();
        let out = outside.path().canonicalize().unwrap().join("s");
        let _o = UnixListener::bind(&out).unwrap();
        let s = rule(&[root.path()], &[], None);
        assert_eq!(s.connect(&inside, id(&inside)), Ok(()));
        let refused = s.connect(&out, id(&out)).unwrap_err();
        assert!(refused.contains(&format!("the socket {}", out.display())));
        assert!(refused.contains("list it in unix_sockets"), "{refused}");
        // A sibling whose name only begins like the root's is outside it.
        let sibling = PathBuf::from(format!(
            "{}x/s",
            root.path().canonicalize().unwrap().display()
        ));
        assert!(s.connect(&sibling, (0, 1, 0)).is_err());
    }

    #[test]
    fn the_roots_are_compared_with_their_links_resolved() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let s = rule(&[&link], &[], None);
        assert_eq!(s.connect(&real.join("s"), (0, 1, 0)), Ok(()));
    }

    #[test]
    fn without_roots_the_working_directory_is_the_one_allowed() {
        let cwd = tempfile::tempdir().unwrap();
        let cwd = cwd.path().canonicalize().unwrap();
        let s = Sockets::new(SocketRule::new((&[], &cwd), (&[], &[]), None));
        assert_eq!(s.connect(&cwd.join("s"), (0, 1, 0)), Ok(()));
        assert!(s
            .connect(Path::new("/tmp/tmux-0/default"), (0, 2, 0))
            .is_err());
    }

    #[test]
    fn a_listed_socket_is_allowed_by_what_it_names_or_by_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap().join("agent.sock");
        let _l = UnixListener::bind(&real).unwrap();
        let link = dir.path().join("link.sock");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let s = rule(&[Path::new("/nonexistent-root")], &[&link], None);
        assert_eq!(s.connect(&real, id(&real)), Ok(()));
        // A listed socket that is not there yet is matched by its path.
        let later = Path::new("/run/later.sock");
        assert_eq!(rule(&[], &[later], None).connect(later, (0, 3, 0)), Ok(()));
        assert!(s.connect(Path::new("/run/other.sock"), (0, 4, 0)).is_err());
    }

    #[test]
    fn a_hidden_directory_under_a_root_is_refused_unless_listed() {
        let home = Path::new("/home/u");
        let agent = Path::new("/home/u/.gnupg/S.gpg-agent");
        let (roots, hidden) = (v(&[home]), v(&[Path::new("/home/u/.gnupg")]));
        let s = Sockets::new(SocketRule::new((&roots, home), (&[], &hidden), None));
        assert_eq!(s.connect(Path::new("/home/u/proj/s"), (0, 1, 0)), Ok(()));
        let refused = s.connect(agent, (0, 2, 0)).unwrap_err();
        assert!(
            refused.contains("under /home/u/.gnupg, which the sandbox hides"),
            "{refused}"
        );
        let listed = v(&[agent]);
        let s = Sockets::new(SocketRule::new((&roots, home), (&listed, &hidden), None));
        assert_eq!(s.connect(agent, (0, 2, 0)), Ok(()));
    }

    #[test]
    fn a_socket_the_tree_made_is_allowed_anywhere_and_survives_a_hand_over() {
        let s = rule(&[Path::new("/work")], &[], None);
        let tmp = Path::new("/tmp/pymp-x/listener");
        assert!(s.connect(tmp, (7, 9, 0)).is_err());
        s.made_file((7, 9, 0));
        assert_eq!(s.connect(tmp, (7, 9, 0)), Ok(()));
        // The same inode number given to a later file is not the file the tree made.
        assert!(s.connect(tmp, (7, 9, 1)).is_err());
        assert!(s.connect_abstract(b"srv").is_err());
        s.made_name(b"srv");
        assert_eq!(s.connect_abstract(b"srv"), Ok(()));
        let again = Sockets::restore(s.saved());
        assert_eq!(again.connect(tmp, (7, 9, 0)), Ok(()));
        assert_eq!(again.connect_abstract(b"srv"), Ok(()));
        assert_eq!(again.saved().rule, s.saved().rule);
    }

    #[test]
    fn a_bind_is_refused_only_outside_what_write_confinement_allows() {
        let s = rule(&[Path::new("/work")], &[], None);
        assert_eq!(s.bind(Path::new("/anywhere"), OsStr::new("s")), Ok(()));
        let w = [Path::new("/work"), Path::new("/tmp")];
        let s = rule(&[Path::new("/work")], &[], Some(&w));
        assert_eq!(s.bind(Path::new("/tmp/x"), OsStr::new("s")), Ok(()));
        let refused = s.bind(Path::new("/var/run"), OsStr::new("s")).unwrap_err();
        assert!(refused.contains("the socket /var/run/s"), "{refused}");
    }

    #[test]
    fn what_a_tree_made_is_remembered_up_to_a_bound() {
        let s = Sockets::default();
        for i in 0..(MAX_MADE as u64 + 10) {
            s.made_file((1, i, 0));
        }
        assert_eq!(s.saved().files.len(), MAX_MADE);
    }
}
