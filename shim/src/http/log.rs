//! The endpoint's log when it runs in the background (`cubactl http start` names the file in
//! `CUBA_EXEC_HTTP_LOG`): bounded as the daemon's audit log is — past [`MAX_BYTES`] the file
//! becomes `.1` (`.1` → `.2` → `.3`, the oldest dropped) and a new one is begun.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The environment variable naming the log file.
pub const ENV: &str = "CUBA_EXEC_HTTP_LOG";
/// A log file's size before it is rotated.
pub const MAX_BYTES: u64 = 8 << 20;
/// Rotated files kept (`.1` … `.3`).
const KEPT: u32 = 3;

struct Open {
    file: Option<File>,
    size: u64,
}

/// A log file, rotated past `max` bytes; a `MakeWriter` for tracing.
#[derive(Clone)]
pub struct Rotating {
    path: PathBuf,
    max: u64,
    open: Arc<Mutex<Open>>,
}

impl Rotating {
    pub fn new(path: &Path, max: u64) -> std::io::Result<Rotating> {
        let file = cuba_protocol::safe_fs::open_append(path)?;
        let size = file.metadata().map_or(0, |m| m.len());
        Ok(Rotating {
            path: path.to_path_buf(),
            max,
            open: Arc::new(Mutex::new(Open {
                file: Some(file),
                size,
            })),
        })
    }

    fn write_line(&self, buf: &[u8]) -> std::io::Result<usize> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.file.is_none() {
            open.file = Some(cuba_protocol::safe_fs::open_append(&self.path)?);
            open.size = 0;
        }
        if let Some(f) = open.file.as_mut() {
            f.write_all(buf)?;
        }
        open.size += buf.len() as u64;
        if open.size >= self.max {
            open.file = None;
            // A rotation that fails keeps writing to the same file, retried at the next line.
            let _ = rotate(&self.path);
        }
        Ok(buf.len())
    }
}

fn generation(path: &Path, n: u32) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// `http.log.2` → `.3`, `.1` → `.2`, `http.log` → `.1` (rename replaces the oldest).
fn rotate(path: &Path) -> std::io::Result<()> {
    for n in (1..KEPT).rev() {
        let from = generation(path, n);
        if from.exists() {
            std::fs::rename(&from, generation(path, n + 1))?;
        }
    }
    std::fs::rename(path, generation(path, 1))
}

pub struct Writer(Rotating);

impl Write for Writer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write_line(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Rotating {
    type Writer = Writer;

    fn make_writer(&'a self) -> Writer {
        Writer(self.clone())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_log_is_rotated_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("http.log");
        let log = Rotating::new(&path, 100).unwrap();
        let line = [b'x'; 60];
        for _ in 0..20 {
            Writer(log.clone()).write_all(&line).unwrap();
        }
        for n in 1..=KEPT {
            let size = std::fs::metadata(generation(&path, n)).unwrap().len();
            assert!(size <= 120, "{n}: {size}");
        }
        assert!(!generation(&path, KEPT + 1).exists());
        assert!(std::fs::metadata(&path).map_or(0, |m| m.len()) < 100);
    }
}
