//! The journal: one JSON line per start, end and prune, in the state directory, so a restarted
//! daemon still lists finished records (and finds the trees a dead daemon left running).
//!
//! Appends are plain `write(2)`s of whole lines (a daemon killed with SIGKILL loses nothing the
//! kernel already has); a torn last line is skipped on load. The journal is compacted at start-up
//! and whenever it has grown well past the live records.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use cuba_protocol::{ProcState, ProcessInfo, Signal};
use serde::{Deserialize, Serialize};

/// A process as the journal keeps it: its row, plus what identifies its tree.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Record {
    pub info: ProcessInfo,
    /// Start time of the pid in clock ticks (`/proc/PID/stat`), to tell a reused pid.
    pub start_time: u64,
    pub marker: String,
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
}

#[derive(Serialize, Deserialize, Clone, Debug)]
enum Entry {
    NextId(u64),
    Start(Box<Record>),
    End(End),
    Prune(Vec<u64>),
}

pub struct Journal {
    path: PathBuf,
    /// std Mutex: held for one `write(2)`, never across an await.
    file: Mutex<(File, u64)>,
}

/// What a journal held: records by id, and the next id to hand out.
pub struct Loaded {
    pub records: BTreeMap<u64, Record>,
    pub next_id: u64,
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
}

fn load(path: &Path) -> io::Result<Loaded> {
    let mut loaded = Loaded {
        records: BTreeMap::new(),
        next_id: 1,
    };
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(loaded),
        Err(e) => return Err(e),
    };
    for (n, line) in BufReader::new(file).split(b'\n').enumerate() {
        let line = line?;
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
        }
    }
    Ok(loaded)
}

fn line(entry: &Entry) -> io::Result<Vec<u8>> {
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
    ) -> io::Result<Journal> {
        let lines = Self::rewrite(&path, records, next_id)?;
        let file = OpenOptions::new().append(true).open(&path)?;
        Ok(Journal {
            path,
            file: Mutex::new((file, lines)),
        })
    }

    fn rewrite(path: &Path, records: &BTreeMap<u64, Record>, next_id: u64) -> io::Result<u64> {
        let tmp = path.with_extension("tmp");
        let mut out = io::BufWriter::new(File::create(&tmp)?);
        out.write_all(&line(&Entry::NextId(next_id))?)?;
        for rec in records.values() {
            out.write_all(&line(&Entry::Start(Box::new(rec.clone())))?)?;
        }
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        fs::rename(&tmp, path)?;
        Ok(records.len() as u64 + 1)
    }

    fn append(&self, entry: &Entry) {
        let result = line(entry).and_then(|buf| {
            let mut guard = self.file.lock().unwrap_or_else(|e| e.into_inner());
            guard.0.write_all(&buf)?;
            guard.1 += 1;
            Ok(())
        });
        if let Err(e) = result {
            tracing::error!("journal {}: write failed: {e}", self.path.display());
        }
    }

    pub fn started(&self, rec: &Record) {
        self.append(&Entry::Start(Box::new(rec.clone())));
    }

    pub fn ended(&self, info: &ProcessInfo) {
        self.append(&Entry::End(End::of(info)));
    }

    /// Records a prune; compacts when the journal has grown well past the live records.
    pub fn pruned(&self, ids: Vec<u64>, live: impl FnOnce() -> (BTreeMap<u64, Record>, u64)) {
        self.append(&Entry::Prune(ids));
        let mut guard = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let (records, next_id) = live();
        if guard.1 < 1000 + 4 * records.len() as u64 {
            return;
        }
        let reopened = Self::rewrite(&self.path, &records, next_id)
            .and_then(|n| Ok((OpenOptions::new().append(true).open(&self.path)?, n)));
        match reopened {
            Ok(file) => *guard = file,
            Err(e) => tracing::error!("journal {}: compaction failed: {e}", self.path.display()),
        }
    }
}
