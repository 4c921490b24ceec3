//! One configuration file on disk: read it, back it up, replace it atomically with its
//! permissions kept. (On Windows a file's access is its ACL, which a new file inherits from
//! its directory, a user's own profile: there are no mode bits to keep or set.)

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use self::mode::{mode_of, set_mode, with_mode, NEW_FILE_MODE};

/// The file to write for `path`: the target of a symlink (dotfile managers link these files,
/// and renaming over the link would turn it into a plain file).
pub fn target(path: &Path) -> Result<PathBuf> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => fs::canonicalize(path)
            .with_context(|| format!("{} is a symlink to a missing file", path.display())),
        _ => Ok(path.to_path_buf()),
    }
}

/// The file's text; `None` when it does not exist.
pub fn read(path: &Path) -> Result<Option<String>> {
    match fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| anyhow::anyhow!("{} is not UTF-8 text; left it as it is", path.display())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Copies `original` (the text just read from `path`) to `<path>.bak-cubactl`, or the first
/// free `.bak-cubactl.N`, with the file's permissions. Returns the backup's path.
pub fn backup(path: &Path, original: &str) -> Result<PathBuf> {
    let mode = mode_of(path)?;
    let base = format!("{}.bak-cubactl", path.display());
    for n in 0..1000 {
        let bak = PathBuf::from(match n {
            0 => base.clone(),
            n => format!("{base}.{n}"),
        });
        // create_new: an earlier backup is never overwritten.
        match with_mode(OpenOptions::new().write(true).create_new(true), mode).open(&bak) {
            Ok(mut f) => {
                f.write_all(original.as_bytes())
                    .and_then(|()| f.sync_all())
                    .with_context(|| format!("cannot write the backup {}", bak.display()))?;
                return Ok(bak);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot create {}", bak.display())),
        }
    }
    bail!("{base}.1 … .999 all exist: remove some old backups")
}

/// Replaces `path` with `contents` through a temp file in the same directory and a rename, so
/// a reader never sees half a file. `original`: what the file held when read (`None`: it did
/// not exist); if it changed meanwhile (the client rewrote it), nothing is written.
pub fn replace(path: &Path, contents: &str, original: Option<&str>) -> Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mode = match original {
        Some(_) => mode_of(path)?,
        None => {
            fs::create_dir_all(dir)
                .with_context(|| format!("cannot create the directory {}", dir.display()))?;
            NEW_FILE_MODE
        }
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.cubactl-{}.tmp", std::process::id()));
    let written = write_new(&tmp, contents, mode).and_then(|()| {
        if read(path)?.as_deref() != original {
            bail!(
                "{} changed while cubactl was editing it (is the client running?); nothing \
                 written, run setup again",
                path.display()
            );
        }
        fs::rename(&tmp, path).with_context(|| format!("cannot replace {}", path.display()))
    });
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written?;
    // Make the rename itself durable; a failure here loses nothing already written.
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

fn write_new(path: &Path, contents: &str, mode: u32) -> Result<()> {
    let mut f = with_mode(OpenOptions::new().write(true).create_new(true), mode)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    f.write_all(contents.as_bytes())
        .and_then(|()| set_mode(&f, mode))
        .and_then(|()| f.sync_all())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// A file's mode bits: read from the file replaced, given to the one that replaces it.
#[cfg(unix)]
mod mode {
    use std::fs::{self, File, OpenOptions};
    use std::io;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    use std::path::Path;

    use anyhow::{Context, Result};

    /// A new file may hold `--env` values (tokens): only its owner reads it.
    pub const NEW_FILE_MODE: u32 = 0o600;

    /// `options` create the file with `mode` (never readable by others in between).
    pub fn with_mode(options: &mut OpenOptions, mode: u32) -> &mut OpenOptions {
        options.mode(mode)
    }

    /// `mode` exactly, whatever the umask took away at the creation.
    pub fn set_mode(f: &File, mode: u32) -> io::Result<()> {
        f.set_permissions(fs::Permissions::from_mode(mode))
    }

    pub fn mode_of(path: &Path) -> Result<u32> {
        let meta = fs::metadata(path).with_context(|| format!("cannot stat {}", path.display()))?;
        Ok(meta.permissions().mode() & 0o7777)
    }
}

/// Windows: no mode bits; access comes from the directory's ACL (see the module's doc).
#[cfg(windows)]
mod mode {
    use std::fs::{self, File, OpenOptions};
    use std::io;
    use std::path::Path;

    use anyhow::{Context, Result};

    pub const NEW_FILE_MODE: u32 = 0;

    pub fn with_mode(options: &mut OpenOptions, _mode: u32) -> &mut OpenOptions {
        options
    }

    pub fn set_mode(_f: &File, _mode: u32) -> io::Result<()> {
        Ok(())
    }

    pub fn mode_of(path: &Path) -> Result<u32> {
        fs::metadata(path).with_context(|| format!("cannot stat {}", path.display()))?;
        Ok(NEW_FILE_MODE)
    }
}
