//! The journal: one JSON line per start, end, prune and event of the event log, in the state
//! directory, so a restarted daemon still lists finished records (and finds the trees a dead
//! daemon left running) and its event log goes on where it stopped.
//!
//! Appends are plain `write(2)`s of whole lines (a daemon killed with SIGKILL loses nothing the
//! kernel already has); a torn last line is skipped on load. The journal is compacted at start-up
//! and whenever it has grown well past the live records.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use cuba_protocol::safe_dir::Dir;
use cuba_protocol::{safe_fs, ErrorMarks, Event, ProcState, ProcessInfo, Signal};
use serde::{Deserialize, Serialize};

use crate::parts::output::Inline;
use crate::state::tokens::Stamp;

/// A process as the journal keeps it: its row, plus what identifies its tree.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Record {
    pub info: ProcessInfo,
    /// Start time of the pid, to tell a reused pid.
    pub start_time: crate::platform::StartTime,
    pub marker: String,
    /// The request token it was started with: a retry after a restart finds this record.
    #[serde(default)]
    pub token: Option<Stamp>,
    /// The confined caller it was started for (`Caller::tenant`): restored with it, so a
    /// restart widens nobody's reach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// A finished process's short output, kept here instead of in a spool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Inline>,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct End {
    pub id: u64,
    pub state: ProcState,
    pub exit_code: Option<i32>,
    pub signal: Option<Signal>,
    pub error: Option<String>,
    pub ended_at_ms: u64,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    /// The error lines found in its output, for a restarted daemon's row (whose output is
    /// only its spool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<ErrorMarks>,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
enum Entry {
    NextId(u64),
    Start(Box<Record>),
    End(End),
    Prune(Vec<u64>),
    /// All the output of a finished process, short enough to need no spool.
    Output {
        id: u64,
        output: Inline,
    },
    /// An event of the event log (`state::events`).
    Event(Logged),
}

/// An event as the log keeps it: with the confined caller its process was started for, so a
/// restart widens nobody's view.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Logged {
    pub event: Event,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

/// [`Entry::Event`] as it is written: borrowed.
#[derive(Serialize)]
enum EventRef<'a> {
    Event(&'a Logged),
}

/// Most events a load keeps (the highest `events_keep` allowed): the log keeps its own last N.
pub const MAX_EVENTS: usize = 65_536;

/// [`Entry::Start`] as it is written: the record borrowed, not copied (the same line).
#[derive(Serialize)]
enum StartRef<'a> {
    Start(&'a Record),
}

pub struct Journal {
    path: PathBuf,
    /// std Mutex: held for one `write(2)`, never across an await.
    file: Mutex<Writer>,
}

/// Entries held back while the file takes none (a full disk); past this the oldest are lost.
const BACKLOG: usize = 4096;

/// The open journal and what could not be written to it yet.
struct Writer {
    file: File,
    /// Lines in the file, to decide when to compact.
    lines: u64,
    /// Lines not written yet, oldest first; written before any newer one.
    backlog: VecDeque<Vec<u8>>,
    /// The last write failed part-way: the file may end inside a line.
    torn: bool,
    /// A compaction is due and runs off the runtime: the lines appended since its snapshot of
    /// the records was taken, written after that snapshot so none is lost.
    since: Option<Vec<Vec<u8>>>,
}

impl Writer {
    fn new(file: File, lines: u64) -> Writer {
        Writer {
            file,
            lines,
            backlog: VecDeque::new(),
            torn: false,
            since: None,
        }
    }

    /// Writes the backlog in order, stopping at the first failure (kept for the next try).
    fn flush(&mut self) -> io::Result<()> {
        while let Some(buf) = self.backlog.front() {
            // A torn line is ended first, so it stays one unparsable line (skipped on load).
            if self.torn {
                self.file.write_all(b"\n")?;
                self.torn = false;
            }
            if let Err(e) = self.file.write_all(buf) {
                self.torn = true;
                return Err(e);
            }
            self.backlog.pop_front();
            self.lines += 1;
        }
        Ok(())
    }
}

/// What a journal held: records by id, and the next id to hand out.
pub struct Loaded {
    pub records: BTreeMap<u64, Record>,
    pub next_id: u64,
    /// The last events (at most [`MAX_EVENTS`]), oldest first, and the seq after the highest.
    pub events: VecDeque<Logged>,
    pub next_seq: u64,
}

impl End {
    /// The journal's end line for a finished row.
    pub fn of(info: &ProcessInfo) -> End {
        End {
            id: info.id,
            state: info.state,
            exit_code: info.exit_code,
            signal: info.signal,
            error: info.error.clone(),
            ended_at_ms: info.ended_at_ms.unwrap_or(0),
            stdout_bytes: info.stdout_bytes,
            stderr_bytes: info.stderr_bytes,
            errors: info.errors.clone(),
        }
    }
}

/// Replays an end line onto the row it ends (loading the journal).
fn apply_end(info: &mut ProcessInfo, end: &End) {
    info.state = end.state;
    info.exit_code = end.exit_code;
    info.signal = end.signal;
    info.error.clone_from(&end.error);
    info.ended_at_ms = Some(end.ended_at_ms);
    info.stdout_bytes = end.stdout_bytes;
    info.stderr_bytes = end.stderr_bytes;
    info.errors.clone_from(&end.errors);
}

fn load(path: &Path) -> io::Result<Loaded> {
    let mut loaded = Loaded {
        records: BTreeMap::new(),
        next_id: 1,
        events: VecDeque::new(),
        next_seq: 1,
    };
    let file = match safe_fs::open_read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(loaded),
        Err(e) => return Err(e),
    };
    for (n, line) in BufReader::new(file).split(b'\n').enumerate() {
        let line = line?;
        if line.is_empty() {
            // Where a write torn by a full disk was ended.
            continue;
        }
        let entry: Entry = match serde_json::from_slice(&line) {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!("journal {} line {}: skipped: {e}", path.display(), n + 1);
                continue;
            }
        };
        match entry {
            Entry::NextId(id) => loaded.next_id = loaded.next_id.max(id),
            Entry::Start(rec) => {
                loaded.next_id = loaded.next_id.max(rec.info.id + 1);
                loaded.records.insert(rec.info.id, *rec);
            }
            Entry::End(end) => {
                if let Some(rec) = loaded.records.get_mut(&end.id) {
                    apply_end(&mut rec.info, &end);
                }
            }
            Entry::Prune(ids) => {
                for id in ids {
                    loaded.records.remove(&id);
                }
            }
            Entry::Output { id, output } => {
                if let Some(rec) = loaded.records.get_mut(&id) {
                    rec.output = Some(output);
                }
            }
            Entry::Event(logged) => {
                loaded.next_seq = loaded.next_seq.max(logged.event.seq + 1);
                // In order as written; one out of order (never written so) is kept out.
                if loaded
                    .events
                    .back()
                    .is_none_or(|last| last.event.seq < logged.event.seq)
                {
                    loaded.events.push_back(logged);
                }
                if loaded.events.len() > MAX_EVENTS {
                    loaded.events.pop_front();
                }
            }
        }
    }
    Ok(loaded)
}

fn line(entry: &impl Serialize) -> io::Result<Vec<u8>> {
    let mut buf = serde_json::to_vec(entry).map_err(io::Error::other)?;
    buf.push(b'\n');
    Ok(buf)
}

impl Journal {
    /// Loads the journal at `path` (missing is empty).
    pub fn load(path: &Path) -> io::Result<Loaded> {
        load(path)
    }

    /// Writes `records` as a fresh journal (atomically) and opens it for appending.
    pub fn create(
        path: PathBuf,
        records: &BTreeMap<u64, Record>,
        next_id: u64,
        events: &[Logged],
    ) -> io::Result<Journal> {
        let writer = match Self::rewrite(&path, (records, events), next_id, &[]) {
            Ok(lines) => Writer::new(safe_fs::open_append(&path)?, lines),
            Err(e) => {
                // A full disk: the journal as it was still says what it said; go on appending
                // to it (the restored states are in memory and written at the next compaction).
                tracing::warn!(
                    "journal {}: cannot compact ({e}); appending",
                    path.display()
                );
                let file = safe_fs::open_append(&path)?;
                // Counted as long: the next prune compacts it.
                Writer::new(file, u64::MAX / 2)
            }
        };
        Ok(Journal {
            path,
            file: Mutex::new(writer),
        })
    }

    fn rewrite(
        path: &Path,
        (records, events): (&BTreeMap<u64, Record>, &[Logged]),
        next_id: u64,
        then: &[Vec<u8>],
    ) -> io::Result<u64> {
        let tmp = path.with_extension("tmp");
        let name = |p: &Path| p.file_name().and_then(|n| n.to_str()).map(str::to_owned);
        let (Some(state), Some(name), Some(tmp_name)) = (path.parent(), name(path), name(&tmp))
        else {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        };
        let (name, tmp_name) = (name.as_str(), tmp_name.as_str());
        // The state directory, opened without following a link: the copy is made and renamed
        // onto the journal in the directory that was checked.
        let dir = Dir::open(state, 0, false)?;
        let written = (|| {
            // New, never through a link: it is renamed onto the journal.
            let mut out = io::BufWriter::new(dir.create_new(tmp_name)?);
            out.write_all(&line(&Entry::NextId(next_id))?)?;
            for rec in records.values() {
                out.write_all(&line(&StartRef::Start(rec))?)?;
            }
            for logged in events {
                out.write_all(&line(&EventRef::Event(logged))?)?;
            }
            for l in then {
                out.write_all(l)?;
            }
            out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
            dir.rename(tmp_name, name)
        })();
        if let Err(e) = written {
            // A half-written copy would only take the space that is missing.
            let _ = dir.remove(tmp_name);
            return Err(e);
        }
        Ok((records.len() + events.len() + then.len()) as u64 + 1)
    }

    /// Appends `entry` after any held back; what the file does not take now is held back
    /// (bounded) and written with the next entry or compaction.
    fn append(&self, entry: &impl Serialize) {
        let buf = match line(entry) {
            Ok(buf) => buf,
            Err(e) => {
                crate::base::health::JOURNAL.failed(&e);
                return;
            }
        };
        let mut w = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let was_clean = w.backlog.is_empty();
        if let Some(since) = w.since.as_mut() {
            since.push(buf.clone());
            if since.len() > BACKLOG {
                // The compaction waited too long: it is given up (the next prune asks again).
                w.since = None;
            }
        }
        w.backlog.push_back(buf);
        if w.backlog.len() > BACKLOG {
            w.backlog.pop_front();
            crate::base::health::JOURNAL.failed(&io::Error::from_raw_os_error(libc::ENOSPC));
        }
        match w.flush() {
            Ok(()) => crate::base::health::JOURNAL.set_pending(0),
            Err(e) => {
                crate::base::health::JOURNAL.held_back(&e, w.backlog.len() as u64);
                if was_clean {
                    tracing::error!(
                        "journal {}: write failed, holding entries back: {e}",
                        self.path.display()
                    );
                }
            }
        }
    }

    /// Appends an event of the log. While the disk refuses lines (a backlog is held), events
    /// are dropped rather than held: the backlog's room is for the process records, which a
    /// restart needs; the event log only misses them (and keeps its seq: see `state::events`).
    pub fn event(&self, logged: &Logged) -> bool {
        if !self
            .file
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .backlog
            .is_empty()
        {
            return false;
        }
        self.append(&EventRef::Event(logged));
        true
    }

    pub fn started(&self, rec: &Record) {
        self.append(&StartRef::Start(rec));
    }

    pub fn ended(&self, info: &ProcessInfo) {
        self.append(&Entry::End(End::of(info)));
    }

    /// Keeps the whole (short) output of finished process `id`.
    pub fn output(&self, id: u64, output: Inline) {
        self.append(&Entry::Output { id, output });
    }

    /// Records a prune. Whether the journal has grown well past the `live` records: then a
    /// snapshot of them is to be taken now and given to [`Journal::compact`].
    pub fn pruned(&self, ids: Vec<u64>, live: usize) -> bool {
        self.append(&Entry::Prune(ids));
        self.due(live)
    }

    /// Whether the journal has grown well past the `live` lines (records and events kept):
    /// then a snapshot is to be taken now and given to [`Journal::compact`].
    pub fn due(&self, live: usize) -> bool {
        let mut w = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let due = w.since.is_none() && (w.lines >= 1000 + 4 * live as u64 || !w.backlog.is_empty());
        if due {
            w.since = Some(Vec::new());
        }
        due
    }

    /// Rewrites the journal as `records` (the snapshot taken when [`Journal::pruned`] said so)
    /// and `next_id`, then the lines appended since. Blocking (the copy is synced): run off the
    /// runtime. Appends meanwhile wait for it.
    pub fn compact(&self, (records, events): (&BTreeMap<u64, Record>, &[Logged]), next_id: u64) {
        let mut guard = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let Some(since) = guard.since.take() else {
            return;
        };
        // A rewrite holds every live record's state and what came after: it replaces whatever
        // was held back.
        let reopened = Self::rewrite(&self.path, (records, events), next_id, &since)
            .and_then(|n| Ok(Writer::new(safe_fs::open_append(&self.path)?, n)));
        match reopened {
            Ok(writer) => {
                *guard = writer;
                crate::base::health::JOURNAL.set_pending(0);
            }
            Err(e) => tracing::error!("journal {}: compaction failed: {e}", self.path.display()),
        }
    }
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::fs;

    #[test]
    fn entries_a_full_disk_refuses_are_held_back_and_written_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let journal = Journal::create(path.clone(), &BTreeMap::new(), 1, &[]).unwrap();
        let real = {
            let mut w = journal.file.lock().unwrap();
            // /dev/full refuses every write with ENOSPC, as a full disk does.
            let full = std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap();
            std::mem::replace(&mut w.file, full)
        };
        journal.append(&Entry::Prune(vec![1]));
        journal.append(&Entry::Prune(vec![2]));
        // Held back, not lost. (The daemon-wide notice is not read here: it is one global, and
        // any other test's journal write in this binary clears it, in parallel.)
        assert_eq!(journal.file.lock().unwrap().backlog.len(), 2);
        // Space again: the next entry writes the held-back ones first, in order.
        journal.file.lock().unwrap().file = real;
        journal.append(&Entry::Prune(vec![3]));
        assert!(journal.file.lock().unwrap().backlog.is_empty());
        let text = fs::read_to_string(&path).unwrap();
        let pruned: Vec<&str> = text.lines().filter(|l| l.contains("Prune")).collect();
        assert_eq!(
            pruned,
            [r#"{"Prune":[1]}"#, r#"{"Prune":[2]}"#, r#"{"Prune":[3]}"#]
        );
    }

    fn record(id: u64) -> Record {
        Record {
            info: crate::state::table::tests::row(id),
            start_time: crate::platform::StartTime::UNKNOWN,
            marker: String::new(),
            token: None,
            tenant: None,
            output: None,
        }
    }

    #[test]
    fn a_compaction_keeps_what_was_appended_after_its_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let journal = Journal::create(path.clone(), &BTreeMap::new(), 1, &[]).unwrap();
        for id in 1..=1100 {
            journal.started(&record(id));
        }
        // Most records pruned: a compaction is due, and the snapshot taken now.
        assert!(journal.pruned((1..=1099).collect(), 1));
        assert!(!journal.pruned(vec![], 1), "one compaction at a time");
        let snapshot = BTreeMap::from([(1100, record(1100))]);
        // Appended before the compaction ran (it runs off the runtime).
        journal.started(&record(1101));
        journal.compact((&snapshot, &[]), 1101);
        journal.started(&record(1102));
        let loaded = Journal::load(&path).unwrap();
        let ids: Vec<u64> = loaded.records.keys().copied().collect();
        assert_eq!(ids, [1100, 1101, 1102]);
        assert_eq!(loaded.next_id, 1103);
        let lines = fs::read_to_string(&path).unwrap().lines().count();
        assert!(lines <= 5, "compacted: {lines} lines");
    }
}
