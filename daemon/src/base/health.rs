//! What the daemon could not write to its own files (its log, the journal, the audit log), so
//! that a full disk or a file-size limit is reported where users look (`status`, `info`) rather
//! than only in a log that cannot be written either.
//!
//! Process-wide counters: the log writer is global by nature (tracing's subscriber), and the
//! others are single files per daemon. Every writer that fails counts the loss here and goes on;
//! none of them may fail the task that was writing.

use std::io::{self, Write};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

/// One of the daemon's files, and how writing it has fared.
pub struct FileHealth {
    what: &'static str,
    /// What one entry is called, singular and plural.
    unit: (&'static str, &'static str),
    /// Entries (lines) not written.
    lost: AtomicU64,
    /// Entries held back to be written when the file takes them again (the journal's).
    pending: AtomicU64,
    /// The OS error of the last failure (0: none yet).
    errno: AtomicI32,
}

impl FileHealth {
    const fn new(what: &'static str, unit: (&'static str, &'static str)) -> FileHealth {
        FileHealth {
            what,
            unit,
            lost: AtomicU64::new(0),
            pending: AtomicU64::new(0),
            errno: AtomicI32::new(0),
        }
    }

    /// An entry could not be written because of `e`.
    pub fn failed(&self, e: &io::Error) {
        self.lost.fetch_add(1, Ordering::Relaxed);
        self.errno
            .store(e.raw_os_error().unwrap_or(libc::EIO), Ordering::Relaxed);
    }

    /// Writing failed with `e`; the entry is held back (`pending` are now).
    pub fn held_back(&self, e: &io::Error, pending: u64) {
        self.set_pending(pending);
        self.errno
            .store(e.raw_os_error().unwrap_or(libc::EIO), Ordering::Relaxed);
    }

    pub fn set_pending(&self, pending: u64) {
        self.pending.store(pending, Ordering::Relaxed);
    }

    pub fn lost(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }

    /// `"log: 12 lines not written (No space left on device)"`, or nothing if all went well.
    pub fn notice(&self) -> Option<String> {
        let (lost, pending) = (self.lost(), self.pending.load(Ordering::Relaxed));
        let unit = |n: u64| if n == 1 { self.unit.0 } else { self.unit.1 };
        let mut parts = Vec::new();
        if pending > 0 {
            parts.push(format!("{pending} {} waiting to be written", unit(pending)));
        }
        if lost > 0 {
            parts.push(format!("{lost} {} not written", unit(lost)));
        }
        (!parts.is_empty()).then(|| {
            let why = reason(&io::Error::from_raw_os_error(
                self.errno.load(Ordering::Relaxed),
            ));
            format!("{}: {} ({why})", self.what, parts.join(", "))
        })
    }
}

/// An OS error as a phrase: `no space left on device`, `file too large`.
pub fn reason(e: &io::Error) -> String {
    let text = e.to_string();
    let text = match text.find(" (os error") {
        Some(i) => &text[..i],
        None => &text,
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => "write failed".to_string(),
    }
}

pub static LOG: FileHealth = FileHealth::new("log", ("line", "lines"));
pub static JOURNAL: FileHealth = FileHealth::new("journal", ("entry", "entries"));
pub static AUDIT: FileHealth = FileHealth::new("audit log", ("line", "lines"));

/// Everything the daemon failed to write so far, one line per file.
pub fn notices() -> Vec<String> {
    [&LOG, &JOURNAL, &AUDIT]
        .into_iter()
        .filter_map(FileHealth::notice)
        .collect()
}

/// The daemon's log writer: stderr (the `cubad.log` of a daemon a client started). A line it
/// cannot write is dropped and counted, never an error: tracing's formatter reports a failing
/// writer with `eprintln!`, which panics when stderr itself is what fails, and would take down
/// whichever task was logging.
pub struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Err(e) = io::stderr().lock().write_all(buf) {
            LOG.failed(&e);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes `text` to stderr as the log does (for the audit copy), never failing.
pub fn to_stderr(text: &str) {
    let _ = LogWriter.write(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_is_counted_with_its_reason() {
        let f = FileHealth::new("spool", ("chunk", "chunks"));
        assert_eq!(f.notice(), None);
        f.failed(&io::Error::from_raw_os_error(libc::ENOSPC));
        f.failed(&io::Error::from_raw_os_error(libc::ENOSPC));
        let n = f.notice().unwrap_or_default();
        assert!(n.starts_with("spool: 2 chunks not written ("), "{n}");
        assert!(n.ends_with("(no space left on device)"), "{n}");
    }
}
