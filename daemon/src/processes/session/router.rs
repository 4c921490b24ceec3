//! The session shell's part of its supervisor ([`Route`]): output passes a marker scanner per
//! stream; bytes go to the session's record and, between a command's begin and end markers, to
//! that command's record. The command's end marker on both streams ends the command's record.

use std::sync::Arc;

use cuba_protocol::Stream;

use super::marker::{Piece, Scanner, SEP};
use super::Shared;
use crate::processes::supervise::Route;
use crate::state::record::{Outcome, Proc, Writer};
use crate::state::table::Table;

/// Ends command `cmd` with `outcome` (through the table: journal, audit, waiters), removes its
/// script, and spools what it printed once nothing more is appended to it.
pub fn end_command(table: &Arc<Table>, cmd: &Writer, outcome: Outcome) {
    if !table.finish(cmd, outcome) {
        return;
    }
    cmd.lock().control = None;
    let _ = std::fs::remove_file(table.state_dir().script(cmd.id));
    tokio::spawn(cmd.seal());
}

fn index(stream: Stream) -> usize {
    match stream {
        Stream::Stdout => 0,
        Stream::Stderr => 1,
    }
}

/// The session shell's part of its supervisor: sends each byte to the session's record and to
/// the running command's, and ends commands at their end markers.
pub struct Router {
    shared: Arc<Shared>,
    table: Arc<Table>,
    prefix: Vec<u8>,
    scan: [Scanner; 2],
    /// Per stream: between the current command's begin and end markers.
    inside: [bool; 2],
    /// Per stream: past the current command's end marker (or closed).
    done: [bool; 2],
    status: Option<i32>,
}

impl Router {
    pub fn new(shared: Arc<Shared>, table: Arc<Table>) -> Router {
        let mut prefix = vec![SEP];
        prefix.extend_from_slice(b"CUBA");
        prefix.extend_from_slice(shared.nonce.as_bytes());
        Router {
            shared,
            table,
            prefix,
            scan: Default::default(),
            inside: [false; 2],
            done: [false; 2],
            status: None,
        }
    }

    /// Both streams passed the end marker: the command is done, with the status it printed.
    fn complete(&mut self) {
        let status = self.status.take();
        self.reset();
        let Some(cmd) = self.shared.current().take() else {
            return;
        };
        // The status the shell printed (128 + n for a command killed by signal n).
        let stop = cmd.lock().stop;
        end_command(
            &self.table,
            &cmd,
            Outcome::of_command(stop, status, None, None),
        );
    }

    fn reset(&mut self) {
        self.inside = [false; 2];
        self.done = [false; 2];
        self.status = None;
    }
}

impl Route for Router {
    fn current(&self) -> Option<Arc<Proc>> {
        self.shared.current().as_ref().map(|c| c.proc().clone())
    }

    fn write_current(&self, write: &mut dyn FnMut(&Writer)) {
        if let Some(cmd) = self.shared.current().as_ref() {
            write(cmd);
        }
    }

    fn feed(&mut self, shell: &Writer, stream: Stream, bytes: &[u8]) {
        let i = index(stream);
        // The command's writer, held by the session, for the length of this feed.
        let current = self.shared.current();
        // Out of `self` while the closure below updates it.
        let mut scanner = std::mem::take(&mut self.scan[i]);
        let prefix = std::mem::take(&mut self.prefix);
        let mut wrote = false;
        let mut ended = false;
        let current_id = current.as_ref().map(|c| c.id);
        scanner.feed(&prefix, bytes, |piece| match piece {
            Piece::Data(data) => {
                shell.lock().output.append(stream, data);
                if let (Some(cmd), true) = (current.as_ref(), self.inside[i]) {
                    let mut c = cmd.lock();
                    c.output.append(stream, data);
                    c.last_output = std::time::Instant::now();
                    c.moved_on();
                    wrote = true;
                }
            }
            Piece::Begin(id) if current_id == Some(id) => {
                self.inside[i] = true;
            }
            Piece::End(id, status) if current_id == Some(id) => {
                self.inside[i] = false;
                self.done[i] = true;
                if stream == Stream::Stdout {
                    self.status = Some(status);
                }
                ended = self.done == [true, true];
            }
            // A marker of a command that is no longer current: nothing to route.
            Piece::Begin(_) | Piece::End(..) => {}
        });
        self.scan[i] = scanner;
        self.prefix = prefix;
        if let (Some(cmd), true) = (current.as_ref(), wrote) {
            cmd.notify();
        }
        drop(current);
        if ended {
            self.complete();
        }
    }

    fn closed(&mut self, shell: &Writer, stream: Stream) {
        let i = index(stream);
        let rest = self.scan[i].flush();
        if !rest.is_empty() {
            shell.lock().output.append(stream, &rest);
            if let (Some(cmd), true) = (self.shared.current().as_ref(), self.inside[i]) {
                cmd.lock().output.append(stream, &rest);
                cmd.notify();
            }
        }
        self.inside[i] = false;
        self.done[i] = true;
        if self.done == [true, true] && self.status.is_some() {
            self.complete();
        }
    }

    fn shell_ended(&mut self, shell: &Writer) {
        self.reset();
        self.shared.close();
        let Some(cmd) = self.shared.current().take() else {
            return;
        };
        let (stop, exit_code, signal) = {
            let s = shell.lock();
            (s.stop, s.info().exit_code, s.info().signal)
        };
        let stop = cmd.lock().stop.or(stop);
        let why = match stop {
            Some(_) => "the session was stopped while the command ran".to_string(),
            None => format!(
                "the session's shell ended while the command ran (it exited or was killed); \
                 session {} starts again on next use",
                self.shared.name
            ),
        };
        end_command(
            &self.table,
            &cmd,
            Outcome::of_command(stop, exit_code, signal, Some(why)),
        );
    }
}
