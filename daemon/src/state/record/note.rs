//! What reaches a record from outside its supervisor: a refused exec of its tree, its tree's
//! exec-check listener, a question put to the person and its answer. Those come from other
//! threads (the exec checks', the askpass connection's) while the supervisor writes the row;
//! so they are notes to the record, applied by its supervisor between two of its events, and
//! by this module's one function when no supervisor runs (before the hand-over, after the
//! end, a session's command, whose writer is its session).
//!
//! An end is final: a note never changes the state of an ended record.

#[cfg(unix)]
use std::sync::Arc;

use cuba_protocol::{Ask, ExecBlocked};

use super::{Proc, ProcData};

/// Refusals a record keeps (the audit log has every one): the first, and then those killed
/// after their exec in place of refusals at the exec.
const KEPT: usize = 8;
/// Notes waiting for the supervisor at most: past it a refusal is only in the audit log (the
/// record keeps a few anyway). Questions are bounded by the asks' own limit.
const QUEUED: usize = 1024;

/// A change to a record from outside its supervisor.
#[derive(Debug)]
pub enum Note {
    /// An exec of its tree was refused, or killed after it ran.
    // Only the exec checks (Linux) find one.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Blocked(ExecBlocked),
    /// Its tree's exec-check listener: kept for an in-place upgrade.
    #[cfg(unix)]
    Listening(Arc<std::os::fd::OwnedFd>),
    /// A question is put to the person about it: shown on the row, which waits for it.
    Asked(Ask),
    /// Question `id` was answered, or is forgotten (its process ended).
    Settled(u64),
}

/// Notes and who applies them.
#[derive(Default)]
pub(super) struct Inbox {
    /// A supervisor runs and applies the notes: they wait here for it.
    supervised: bool,
    queue: Vec<Note>,
}

impl Proc {
    /// Hands `note` to the record's writer: queued for its supervisor (which is woken), or
    /// applied now when none runs.
    pub fn note(&self, note: Note) {
        {
            let mut inbox = self.inbox();
            if inbox.supervised {
                if inbox.queue.len() >= QUEUED && matches!(note, Note::Blocked(_)) {
                    return;
                }
                inbox.queue.push(note);
                drop(inbox);
                self.noted.notify_one();
                return;
            }
        }
        self.apply(note);
    }

    /// From now on its supervisor applies the notes.
    pub fn supervised(&self) {
        self.inbox().supervised = true;
    }

    /// Applies the notes waiting (the supervisor, between two events): whether there were any.
    pub fn take_notes(&self) -> bool {
        let notes = std::mem::take(&mut self.inbox().queue);
        let any = !notes.is_empty();
        notes.into_iter().for_each(|n| self.apply(n));
        any
    }

    /// The supervisor is done: what is waiting is applied, and later notes at once.
    pub fn unsupervised(&self) {
        let notes = {
            let mut inbox = self.inbox();
            inbox.supervised = false;
            std::mem::take(&mut inbox.queue)
        };
        notes.into_iter().for_each(|n| self.apply(n));
    }

    /// Resolves when a note waits (a permit is kept if none was waiting for it).
    pub async fn noted(&self) {
        self.noted.notified().await;
    }

    fn inbox(&self) -> std::sync::MutexGuard<'_, Inbox> {
        self.inbox.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The one place a note changes a record.
    fn apply(&self, note: Note) {
        {
            let mut rec = self.data();
            match note {
                Note::Blocked(b) => rec.blocked(b),
                #[cfg(unix)]
                Note::Listening(fd) => {
                    // An ended record holds no listener: what is left of its tree keeps the
                    // checker's copy.
                    if !rec.finished() {
                        rec.exec_listener = Some(fd);
                    }
                }
                Note::Asked(ask) => rec.asked(ask),
                Note::Settled(id) => rec.settled(id),
            }
        }
        self.notify();
    }
}

impl ProcData {
    fn blocked(&mut self, b: ExecBlocked) {
        let kept = &mut self.info.blocked;
        if kept.len() < KEPT {
            kept.push(b);
        } else if b.killed {
            // A program that ran and was killed says more than one refused at its exec: it
            // takes the place of the oldest of those.
            if let Some(i) = kept.iter().position(|k| !k.killed) {
                kept.remove(i);
                kept.push(b);
            }
        }
    }

    pub(super) fn asked(&mut self, ask: Ask) {
        if self.finished() {
            return;
        }
        // A command not started waits for the answer, and then for its launch.
        if ask.kind == cuba_protocol::AskKind::Command && self.life == super::Life::Reserved {
            self.life = super::Life::Held;
        }
        self.info.asks.push(ask);
        self.render();
    }

    /// A question is answered: the row's state is what the questions left waiting make it (a
    /// command not started stays held until its launch; an exec goes on running).
    pub(super) fn settled(&mut self, id: u64) {
        let Some(i) = self.info.asks.iter().position(|a| a.id == id) else {
            return;
        };
        self.info.asks.remove(i);
        self.render();
    }
}

/// A question about `git push`, for tests.
#[cfg(test)]
pub(super) fn ask(id: u64, kind: cuba_protocol::AskKind) -> Ask {
    Ask {
        id,
        kind,
        what: "git push".into(),
        rule: "ask_commands: git push".into(),
        pid: 7,
        cwd: "/".into(),
        asked_at_ms: 0,
        deadline_ms: 1,
    }
}

#[cfg(test)]
mod tests {
    use cuba_protocol::{AskKind, ProcState};

    use super::*;
    use crate::parts::output::Output;

    fn proc() -> super::super::Writer {
        let info = crate::state::table::tests::row(1);
        Proc::create(ProcData::new(info, Output::new(1 << 20, None), false)).1
    }

    #[test]
    fn a_supervised_record_changes_only_when_its_supervisor_applies_the_notes() {
        let p = proc();
        assert_eq!(p.lock().info().state, ProcState::Running);
        p.supervised();
        p.note(Note::Asked(ask(1, AskKind::Exec)));
        assert_eq!(p.lock().info().state, ProcState::Running, "not yet applied");
        assert!(p.take_notes());
        assert_eq!(p.lock().info().state, ProcState::AwaitingApproval);
        p.note(Note::Settled(1));
        p.unsupervised();
        assert_eq!(p.lock().info().state, ProcState::Running);
        assert!(p.lock().info().asks.is_empty());
        // With no supervisor, a note is applied at once.
        p.note(Note::Asked(ask(2, AskKind::Password)));
        assert_eq!(p.lock().info().state, ProcState::WaitingInput);
    }

    #[test]
    fn a_late_note_never_changes_an_ended_record_s_state() {
        let p = proc();
        let exit = crate::platform::Exit::Code(0);
        assert!(p.lock().end(super::super::Outcome::of_exit(None, exit), 5));
        p.note(Note::Asked(ask(1, AskKind::Exec)));
        p.note(Note::Settled(1));
        let rec = p.lock();
        assert_eq!(rec.info().state, ProcState::Exited);
        assert!(rec.info().asks.is_empty());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn refusals_kept_are_few_and_a_kill_takes_an_older_refusal_s_place() {
        let p = proc();
        let blocked = |n: u32, killed| ExecBlocked {
            program: format!("/bin/p{n}"),
            argv: Vec::new(),
            rule: "blocklist".into(),
            message: String::new(),
            pid: n,
            killed,
        };
        for n in 0..20 {
            p.note(Note::Blocked(blocked(n, false)));
        }
        p.note(Note::Blocked(blocked(99, true)));
        let kept = p.lock().info().blocked.clone();
        assert_eq!(kept.len(), KEPT);
        assert_eq!(kept[0].pid, 1, "the oldest refusal made room");
        assert!(kept.last().is_some_and(|b| b.killed && b.pid == 99));
    }
}
