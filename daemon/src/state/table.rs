//! The process table: every record by id, behind one std Mutex that is never held across an
//! `.await`. Its fields are private; records are reserved, found, finished and pruned through
//! this API, and the one [`Table::finish`] path writes the journal, the audit line, the event
//! and the notifications for every end.
//!
//! Lock order: the table's lock, then a record's (`Proc::lock`), never the other way round;
//! neither is held while the journal or the audit log writes.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use cuba_protocol::{now_ms, ClientInfo, ErrorKind, EventKind, ProcKind, ProtocolError};
use tokio::sync::watch;

use crate::parts::output::{Output, Spool};
use crate::parts::tree::{Scope, Tracked};
use crate::state::audit::{Audit, Peer};
use crate::state::events::{Events, Ring};
use crate::state::journal::{Journal, Logged, Record};
use crate::state::record::{Outcome, Proc, ProcData, Writer};
use crate::state::state_dir::StateDir;
use crate::state::tokens::{Done, Tokens};

mod contents;
mod prune;
mod select;

use contents::live;
pub use contents::Contents;

pub use crate::state::new_record::NewRecord;

/// What the table needs to know to make records.
#[derive(Debug, Clone)]
pub struct Settings {
    pub state: StateDir,
    /// This state directory's token, in every process's marker.
    pub instance: String,
    pub daemon_pid: u32,
    /// Most processes running at once.
    pub max_procs: usize,
    /// Memory buffer and spool cap per process.
    pub buffer_size: usize,
    pub spool_cap: u64,
    /// Most finished records kept: beyond it the oldest are pruned before their TTL.
    pub max_finished: usize,
}

/// What [`Table::reserve`] found: a new record, or (asked to reuse one) the running process of
/// the same name and command.
pub enum Reserved {
    /// A new record, with the right to write it.
    New(Writer),
    Existing(Arc<Proc>),
}

pub struct Table {
    settings: Settings,
    /// std Mutex: held for a lookup or an insertion, never across an await.
    contents: Mutex<Contents>,
    changed: watch::Sender<()>,
    journal: Arc<Journal>,
    audit: Audit,
    /// The event log, persisted with the journal.
    events: Arc<Events>,
    /// The request tokens of records (and stdin writes to them), dropped with their record.
    tokens: Tokens,
}

impl Table {
    /// The table of `contents`; the tokens of restored records are remembered again.
    pub fn new(
        settings: Settings,
        mut contents: Contents,
        journal: Journal,
        audit: Audit,
    ) -> Table {
        let running: Vec<(u64, ProcKind, Option<String>)> = contents
            .procs
            .iter()
            .filter_map(|(id, p)| {
                let rec = p.lock();
                (!rec.finished()).then(|| (*id, rec.info().kind, rec.info().name.clone()))
            })
            .collect();
        (contents.live, contents.running) = (BTreeSet::new(), 0);
        contents.names.clear();
        for (id, kind, name) in running {
            contents.enter(id, kind, name.as_ref());
        }
        let tokens = Tokens::default();
        for (id, p) in &contents.procs {
            if let Some(stamp) = p.lock().token {
                let existing = false;
                tokens.remember(stamp, Done::Record { id: *id, existing });
            }
        }
        let journal = Arc::new(journal);
        let ring = Ring::new(crate::state::events::KEEP, Default::default(), 1);
        Table {
            settings,
            contents: Mutex::new(contents),
            changed: watch::Sender::new(()),
            events: Arc::new(Events::new(journal.clone(), ring)),
            journal,
            audit,
            tokens,
        }
    }

    /// The event log.
    pub fn events(&self) -> &Arc<Events> {
        &self.events
    }

    /// Logs `kind` about record `p` (seen by whoever may see `p`).
    pub fn event(&self, p: &Proc, kind: EventKind) {
        let tenant = p.lock().tenant.clone();
        self.events.emit(Some(p.id), tenant.as_deref(), kind);
    }

    /// Logs that `p` ended, as its row says.
    pub fn exited(&self, p: &Proc) {
        let info = p.info();
        let (state, exit_code, signal) = (info.state, info.exit_code, info.signal);
        self.event(
            p,
            EventKind::Exited {
                state,
                exit_code,
                signal,
            },
        );
    }

    pub fn tokens(&self) -> &Tokens {
        &self.tokens
    }

    fn lock(&self) -> MutexGuard<'_, Contents> {
        self.contents.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The id the next record will get.
    #[cfg(unix)]
    pub fn next_id(&self) -> u64 {
        self.lock().next_id
    }

    #[cfg(any(unix, test))]
    pub fn state_dir(&self) -> &StateDir {
        &self.settings.state
    }

    pub fn audit(&self) -> &Audit {
        &self.audit
    }

    #[cfg(unix)]
    pub fn daemon_pid(&self) -> u32 {
        self.settings.daemon_pid
    }

    /// The marker planted in process `id`'s environment.
    pub fn marker(&self, id: u64) -> String {
        format!("{}{id}", self.marker_prefix())
    }

    /// What every marker of this daemon's processes starts with (`NAME=<instance>.`).
    pub fn marker_prefix(&self) -> String {
        format!("CUBA_EXEC_PROCESS={}.", self.settings.instance)
    }

    pub fn get(&self, id: u64) -> Result<Arc<Proc>, ProtocolError> {
        self.lock()
            .procs
            .get(&id)
            .cloned()
            .ok_or_else(|| not_found(id))
    }

    pub fn all(&self) -> Vec<Arc<Proc>> {
        self.lock().procs.values().cloned().collect()
    }

    pub fn running(&self) -> Vec<Arc<Proc>> {
        let contents = self.lock();
        live(&contents)
            .filter(|p| !p.lock().finished())
            .cloned()
            .collect()
    }

    /// Processes running now (commands in a session are counted with their shell, not alone).
    pub fn count_running(&self) -> usize {
        self.lock().running
    }

    /// Where escapees of a tree can be: children of the daemon (it is their subreaper) that
    /// are not the tracked processes themselves.
    pub fn scope(&self) -> Scope {
        let contents = self.lock();
        let known = live(&contents)
            .filter_map(|p| {
                let rec = p.lock();
                (!rec.finished()).then_some(rec.info().pid as i32)
            })
            .collect();
        Scope {
            parents: HashSet::from([self.settings.daemon_pid as i32]),
            known,
        }
    }

    /// A new `Running` record, checked against `max_procs` under the same lock that inserts it,
    /// so concurrent spawns cannot overshoot the limit. With `reuse`, a running process of the
    /// same name and command is returned instead, found under that lock too.
    pub fn reserve(&self, new: NewRecord, reuse: bool) -> Result<Reserved, ProtocolError> {
        let mut contents = self.lock();
        if reuse {
            let same = |p: &&Arc<Proc>| {
                let rec = p.lock();
                // Only the caller's own: a confined caller neither finds another's nor is found.
                !rec.finished()
                    && rec.info().name == new.name
                    && rec.info().command == new.command
                    && rec.tenant == new.tenant
            };
            let same = match &new.name {
                Some(name) => contents.named(name).find(same),
                None => live(&contents).find(same),
            };
            if let Some(p) = same {
                return Ok(Reserved::Existing(p.clone()));
            }
        }
        // A name already running is allowed (names are labels), but said: a second `web` is
        // more often a mistake than meant.
        let namesake = new.name.as_ref().and_then(|name| {
            contents
                .named(name)
                .find(|p| {
                    let rec = p.lock();
                    !rec.finished()
                        && rec.info().name.as_ref() == Some(name)
                        && rec.tenant == new.tenant
                })
                .map(|p| p.id)
        });
        let running = contents.running;
        let max = self.settings.max_procs;
        if new.kind != ProcKind::InSession && running >= max {
            drop(contents);
            let detail = format!("refused `{}`: {running} processes running", new.command);
            let limit = "max_procs".to_string();
            let kind = EventKind::LimitHit { limit, detail };
            self.events.emit(None, new.tenant.as_deref(), kind);
            return Err(ProtocolError::new(
                ErrorKind::Limit,
                format!(
                    "{running} processes are running, the most allowed (max_procs = {max}); \
                     stop one (send_signal / cubactl kill ID) or raise CUBA_EXEC_MAX_PROCS"
                ),
            ));
        }
        let id = contents.next_id;
        contents.next_id += 1;
        let spool = Spool::create(self.settings.state.spool(id), self.settings.spool_cap);
        let (token, tenant) = (new.token, new.tenant.clone());
        let (kind, name) = (new.kind, new.name.clone());
        let mut info = new.row(id);
        if let (Some(other), Some(name)) = (namesake, &info.name) {
            info.notice = Some(format!(
                "process {other} is also named {name} and still running (`start` with `ensure`, \
                 `cubactl start --ensure`, returns that one instead of starting another)"
            ));
        }
        let output = Output::new(self.settings.buffer_size, Some(spool));
        let mut data = ProcData::reserved(info, output);
        data.token = token;
        data.tenant = tenant;
        let (p, writer) = Proc::create(data);
        contents.procs.insert(id, p);
        contents.enter(id, kind, name.as_ref());
        // Past the cap on finished records (with some slack, so the pruning's file removals
        // come in batches rather than on every spawn), the oldest go now.
        let max = self.settings.max_finished;
        let over = contents.procs.len() > max + running + max / 20 + 1;
        drop(contents);
        if over {
            self.prune_where(None, None);
        }
        Ok(Reserved::New(writer))
    }

    /// Process `p` was started (or failed to) for `client` on the connection from `peer`: the
    /// audit's decision line and the journal's start line. Before its supervisor exists, so
    /// these lines precede its end line.
    pub fn started(
        &self,
        (client, peer): (&ClientInfo, Peer),
        p: &Proc,
        start_time: crate::platform::StartTime,
    ) {
        let (info, token, unresolved, tenant) = {
            let rec = p.lock();
            let tenant = rec.tenant.as_deref().map(String::from);
            (rec.snapshot(), rec.token, rec.unresolved.clone(), tenant)
        };
        self.audit.allowed((client, peer), &info, &unresolved);
        // A record that failed to start is journalled as started too, but never ran.
        if info.pid != 0 {
            let (command, name) = (info.command.clone(), info.name.clone());
            let tenant = tenant.as_deref();
            let kind = EventKind::Started { command, name };
            self.events.emit(Some(p.id), tenant, kind);
        }
        self.journal.started(&Record {
            marker: self.marker(p.id),
            info,
            start_time,
            token,
            tenant,
            output: None,
        });
    }

    /// Journals record `p`, which never started (a command denied while it awaited approval):
    /// its id stays taken across a restart, and it is listed after one. No audit line: the
    /// ask and its answer are the audit's account of it.
    pub fn never_started(&self, p: &Proc) {
        let (info, token, tenant) = {
            let rec = p.lock();
            (
                rec.snapshot(),
                rec.token,
                rec.tenant.as_deref().map(String::from),
            )
        };
        self.journal.started(&Record {
            marker: self.marker(p.id),
            info,
            start_time: crate::platform::StartTime::UNKNOWN,
            token,
            tenant,
            output: None,
        });
    }

    /// Ends record `p` with `outcome`, now: its row, the journal's end line, the audit's end
    /// line, its waiters and the table's watchers. False (and nothing written) if it had ended.
    pub fn finish(&self, p: &Writer, outcome: Outcome) -> bool {
        let (kind, name) = {
            let mut rec = p.lock();
            if !rec.end(outcome, now_ms()) {
                return false;
            }
            rec.stdin = None;
            // What is left of the tree keeps the checker's copy until its last process ends.
            #[cfg(unix)]
            {
                rec.exec_listener = None;
            }
            (rec.info().kind, rec.info().name.clone())
        };
        self.lock().leave(p.id, kind, name.as_ref());
        let info = p.info();
        self.journal.ended(&info);
        self.audit.ended(&info);
        self.exited(p);
        p.notify();
        self.changed();
        true
    }

    /// Keeps the output of finished `p` in the journal if it is short (then it needs no spool):
    /// whether it did. Called once all its output is in.
    pub fn keep_output(&self, p: &Proc) -> bool {
        let inline = Some(p.lock())
            .filter(|rec| rec.finished())
            .and_then(|rec| rec.output.inline());
        let kept = inline.is_some();
        if let Some(inline) = inline {
            self.journal.output(p.id, inline);
        }
        kept
    }

    /// Live records and the events kept, as the journal keeps them (for compaction).
    fn records(&self) -> ((BTreeMap<u64, Record>, Vec<Logged>), u64) {
        let (records, next_id) = self.rows();
        ((records, self.events.kept()), next_id)
    }

    fn rows(&self) -> (BTreeMap<u64, Record>, u64) {
        let contents = self.lock();
        let records = contents
            .procs
            .iter()
            .map(|(id, p)| {
                let rec = p.lock();
                let rec = Record {
                    info: rec.snapshot(),
                    start_time: rec
                        .root
                        .as_ref()
                        .map_or(crate::platform::StartTime::UNKNOWN, |r| r.start_time),
                    marker: self.marker(*id),
                    token: rec.token,
                    tenant: rec.tenant.as_deref().map(String::from),
                    output: rec.finished().then(|| rec.output.inline()).flatten(),
                };
                (*id, rec)
            })
            .collect();
        (records, contents.next_id)
    }

    /// A receiver that wakes on every later change of the table (a row added, ended, removed,
    /// or waiting for input).
    pub fn subscribe(&self) -> watch::Receiver<()> {
        self.changed.subscribe()
    }

    pub fn changed(&self) {
        self.changed.send_replace(());
    }
}

impl Tracked for Table {
    fn scope(&self) -> Scope {
        Table::scope(self)
    }
}

/// The answer for an id with no record (or none its caller may see: the same words, so a
/// confined caller cannot tell another's record from a pruned one).
pub fn not_found(id: u64) -> ProtocolError {
    ProtocolError::new(
        ErrorKind::NotFound,
        format!("no process with id {id} (finished records are pruned after their TTL)"),
    )
}

#[cfg(test)]
pub mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::parts::reaper::Exit;
    use crate::state::tokens::Stamp;
    use cuba_protocol::{Owner, ProcState, ProcessInfo, SpawnRequest};
    use std::path::Path;
    use std::time::Duration;

    /// A row for tests: a running command of id `id`.
    pub fn row(id: u64) -> ProcessInfo {
        new_record("true", ProcKind::Command).row(id)
    }

    pub fn new_record(command: &str, kind: ProcKind) -> NewRecord {
        NewRecord {
            owner: Owner {
                kind: cuba_protocol::ClientKind::Other,
                name: "test".into(),
                pid: 1,
            },
            name: Some("n".into()),
            command: command.into(),
            cwd: "/".into(),
            timeout_ms: None,
            kind,
            tty: None,
            session: None,
            token: None,
            tenant: None,
            port: None,
        }
    }

    /// A table with room for `max_procs` in a fresh state directory.
    pub fn table(dir: &Path, max_procs: usize) -> Table {
        let state = StateDir::new(dir.to_path_buf());
        let journal = Journal::create(state.journal(), &BTreeMap::new(), 1, &[]).unwrap();
        let audit = Audit::new(state.audit(), false, 1 << 20);
        let settings = Settings {
            state,
            instance: "t".into(),
            daemon_pid: std::process::id(),
            max_procs,
            buffer_size: 4096,
            spool_cap: 1 << 20,
            max_finished: 1000,
        };
        let contents = Contents {
            next_id: 1,
            ..Contents::default()
        };
        Table::new(settings, contents, journal, audit)
    }

    pub fn reserve(t: &Table, command: &str, kind: ProcKind, reuse: bool) -> Reserved {
        t.reserve(new_record(command, kind), reuse).unwrap()
    }

    pub fn new(r: Reserved) -> Writer {
        match r {
            Reserved::New(p) => p,
            Reserved::Existing(p) => panic!("expected a new record, got {}", p.id),
        }
    }

    #[test]
    fn reserving_counts_against_max_procs_and_ids_rise() {
        let dir = tempfile::tempdir().unwrap();
        let t = table(dir.path(), 2);
        let a = new(reserve(&t, "a", ProcKind::Command, false));
        let b = new(reserve(&t, "b", ProcKind::Session, false));
        assert_eq!((a.id, b.id), (1, 2));
        // Full: the next command is refused, a command in a session is not a process of its own.
        let err = t
            .reserve(new_record("c", ProcKind::Command), false)
            .err()
            .unwrap();
        assert_eq!(err.kind, ErrorKind::Limit);
        assert!(err.message.contains("max_procs = 2"), "{}", err.message);
        new(reserve(&t, "in", ProcKind::InSession, false));
        assert_eq!(t.count_running(), 2);
        // A finished one frees its place.
        t.finish(&a, Outcome::of_exit(None, Exit::Code(0)));
        assert_eq!(t.count_running(), 1);
        new(reserve(&t, "c", ProcKind::Command, false));
        assert_eq!(t.get(99).err().unwrap().kind, ErrorKind::NotFound);
    }

    #[test]
    fn reuse_finds_the_running_process_of_the_same_name_and_command() {
        let dir = tempfile::tempdir().unwrap();
        let t = table(dir.path(), 5);
        let a = new(reserve(&t, "serve", ProcKind::Command, true));
        match reserve(&t, "serve", ProcKind::Command, true) {
            Reserved::Existing(p) => assert_eq!(p.id, a.id),
            Reserved::New(p) => panic!("started a duplicate {}", p.id),
        }
        // Another command, or the same one once ended: new records.
        new(reserve(&t, "other", ProcKind::Command, true));
        t.finish(&a, Outcome::of_exit(None, Exit::Code(0)));
        new(reserve(&t, "serve", ProcKind::Command, true));
    }

    #[test]
    fn the_running_count_and_names_follow_starts_and_ends() {
        let dir = tempfile::tempdir().unwrap();
        let t = table(dir.path(), 5);
        let notice = |p: &Proc| p.info().notice.unwrap_or_default();
        // All named `n` (new_record's name).
        let a = new(reserve(&t, "a", ProcKind::Command, false));
        assert_eq!(notice(&a), "");
        let b = new(reserve(&t, "b", ProcKind::Command, false));
        assert!(
            notice(&b).contains("process 1 is also named n"),
            "{}",
            notice(&b)
        );
        t.finish(&a, Outcome::of_exit(None, Exit::Code(0)));
        let c = new(reserve(&t, "c", ProcKind::Command, false));
        assert!(
            notice(&c).contains("process 2 is also named n"),
            "{}",
            notice(&c)
        );
        // Ended twice counts once.
        t.finish(&b, Outcome::of_exit(None, Exit::Code(0)));
        t.finish(&b, Outcome::lost("again".into()));
        t.finish(&c, Outcome::of_exit(None, Exit::Code(0)));
        assert_eq!(t.count_running(), 0);
        assert!(t.lock().names.is_empty(), "no name left for ended records");
        let d = new(reserve(&t, "d", ProcKind::Command, true));
        assert_eq!(notice(&d), "");
        // Another table made from these records counts the running one again.
        let restored = Contents {
            procs: t.lock().procs.clone(),
            next_id: 9,
            ..Contents::default()
        };
        let other = tempfile::tempdir().unwrap();
        let u = table(other.path(), 5);
        let u = Table::new(
            u.settings.clone(),
            restored,
            Journal::create(
                StateDir::new(other.path().to_path_buf()).journal(),
                &BTreeMap::new(),
                1,
                &[],
            )
            .unwrap(),
            Audit::new(
                StateDir::new(other.path().to_path_buf()).audit(),
                false,
                1 << 20,
            ),
        );
        assert_eq!(u.count_running(), 1);
        match reserve(&u, "d", ProcKind::Command, true) {
            Reserved::Existing(p) => assert_eq!(p.id, d.id),
            Reserved::New(p) => panic!("started a duplicate {}", p.id),
        }
    }

    #[test]
    fn finish_writes_the_end_once_and_prune_takes_only_drained_ends() {
        let dir = tempfile::tempdir().unwrap();
        let t = table(dir.path(), 5);
        let a = new(reserve(&t, "a", ProcKind::Command, false));
        let b = new(reserve(&t, "b", ProcKind::Command, false));
        let mut changes = t.subscribe();
        changes.borrow_and_update();
        assert!(t.finish(&a, Outcome::of_exit(None, Exit::Code(3))));
        assert!(changes.has_changed().unwrap());
        assert!(!t.finish(&a, Outcome::lost("again".into())), "ended once");
        let info = a.info();
        assert_eq!((info.state, info.exit_code), (ProcState::Exited, Some(3)));
        assert!(info.ended_at_ms.is_some());
        let journal = std::fs::read_to_string(t.state_dir().journal()).unwrap();
        assert_eq!(journal.matches("\"End\"").count(), 1, "{journal}");
        // Not drained yet: kept; drained: pruned; the running one stays.
        assert_eq!(t.prune(Duration::ZERO), 0);
        a.lock().drained = true;
        assert_eq!(t.prune(Duration::ZERO), 1);
        assert!(t.get(a.id).is_err());
        assert_eq!(t.get(b.id).unwrap().id, b.id);
        assert_eq!(t.running().len(), 1);
    }

    #[test]
    fn finished_records_beyond_the_cap_go_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = table(dir.path(), 5);
        t.settings.max_finished = 5;
        let running = new(reserve(&t, "stays", ProcKind::Command, false));
        for i in 0..40 {
            let p = new(reserve(&t, &format!("c{i}"), ProcKind::Command, false));
            t.finish(&p, Outcome::of_exit(None, Exit::Code(0)));
            p.lock().set_drained();
            assert!(
                t.all().len() <= 8,
                "bounded while spawning: {}",
                t.all().len()
            );
        }
        // The periodic prune trims to the cap exactly, TTL or not; the running one is kept.
        t.prune(Duration::from_secs(3600));
        let ids: Vec<u64> = t.all().iter().map(|p| p.id).collect();
        assert_eq!(ids, [running.id, 37, 38, 39, 40, 41]);
    }

    #[tokio::test]
    async fn a_records_token_is_journalled_remembered_again_and_dropped_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let t = table(dir.path(), 5);
        let req = SpawnRequest {
            command: "true".into(),
            token: Some(cuba_protocol::RequestToken([5; 16])),
            ..SpawnRequest::default()
        };
        let stamp = Stamp::of_spawn(&req).unwrap();
        let owner = new_record("x", ProcKind::Command).owner;
        let p = new(t
            .reserve(NewRecord::of(owner, &req, Path::new("/")), false)
            .unwrap());
        let client = cuba_protocol::client::this_client(cuba_protocol::ClientKind::Other, "t");
        let peer = Peer { uid: 0, pid: None };
        t.started((&client, peer), &p, crate::platform::StartTime::UNKNOWN);
        let journal = std::fs::read_to_string(t.state_dir().journal()).unwrap();
        let loaded = Journal::load(&t.state_dir().journal()).unwrap();
        assert_eq!(loaded.records[&p.id].token, Some(stamp), "{journal}");
        // A table made from restored contents knows the token again.
        let restored = Contents {
            procs: t.lock().procs.clone(),
            next_id: 9,
            ..Contents::default()
        };
        let other = tempfile::tempdir().unwrap();
        let again = table(other.path(), 5);
        let again = Table::new(
            again.settings.clone(),
            restored,
            Journal::create(other.path().join("j"), &BTreeMap::new(), 9, &[]).unwrap(),
            Audit::new(other.path().join("a"), false, 1 << 20),
        );
        let claim = again.tokens().claim(stamp).await.unwrap();
        assert!(
            matches!(claim, crate::state::tokens::Claim::Again(Done::Record { id, .. }) if id == p.id)
        );
        // Pruned: forgotten.
        t.finish(&p, Outcome::of_exit(None, Exit::Code(0)));
        p.lock().drained = true;
        t.prune(Duration::ZERO);
        let claim = t.tokens().claim(stamp).await.unwrap();
        assert!(matches!(claim, crate::state::tokens::Claim::First(_)));
    }
}
