//! This terminal driving a process's pseudo-terminal as if the program ran here: keys go
//! through byte for byte, output is shown as the program wrote it, and the remote terminal
//! takes this one's size. `attach` first paints the screen as it is; `run --tty` starts with
//! the first byte. The caller holds [`crate::term::RawMode`] around all of it.

use std::io::{self, Write};
use std::time::Duration;

use anyhow::{bail, Result};
use cuba_protocol::client::Client;
use cuba_protocol::{
    FollowRequest, ProcessInfo, Request, Response, ScreenView, Signal, StreamFilter, TtySize,
};

use crate::forward::{self, DetachKey, Stopped};
use crate::signals::{self, Kind, Listener};
use crate::term;

/// How passing through ended.
pub enum Outcome {
    /// The process ended; its final record.
    Ended(Box<ProcessInfo>),
    /// The detach key was typed (or our terminal went away, or we were told to stop); the
    /// process runs on.
    Detached,
}

/// What signals sent to cubactl itself do (keys never raise them: the terminal is raw).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum OnSignal {
    /// Detach (`attach`: the process is someone else's business).
    Detach,
    /// Pass SIGINT, SIGTERM and SIGHUP on to the process (`run`: it stands for the process).
    Forward,
}

/// Modes a program may have switched on and not off when we leave it (it still runs, or it
/// died): attributes, hidden cursor, application cursor keys and keypad, bracketed paste,
/// mouse reporting. Resetting modes that were off changes nothing.
const RESET: &str =
    "\x1b[0m\x1b[?25h\x1b[?1l\x1b>\x1b[?2004l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l";

pub struct Remote<'a> {
    client: &'a Client,
    id: u64,
    /// The last byte shown was not a newline: a note after it needs a line of its own.
    mid_line: bool,
    signals: Signals,
}

/// The signals handled while attached, listened for from the start: a SIGTERM that arrives
/// while the screen is being painted must detach, not kill cubactl with the terminal raw.
struct Signals {
    int: Listener,
    term: Listener,
    hup: Listener,
    winch: Listener,
}

impl<'a> Remote<'a> {
    pub fn new(client: &'a Client, id: u64) -> io::Result<Remote<'a>> {
        Ok(Remote {
            client,
            id,
            mid_line: false,
            signals: Signals {
                int: signals::listen(Kind::Interrupt)?,
                term: signals::listen(Kind::Terminate)?,
                hup: signals::listen(Kind::Hangup)?,
                winch: signals::listen(Kind::WindowChange)?,
            },
        })
    }

    /// The process to drive, when it is known only after the signals are listened for.
    pub fn set_id(&mut self, id: u64) {
        self.id = id;
    }

    /// Gives the remote terminal this one's size (`current`: its size now), then clears this
    /// screen and paints the remote one on it, cursor included. Returns the output cursor the
    /// painted screen stands for: following from there continues it.
    pub async fn paint(&mut self, current: Option<TtySize>) -> Result<u64> {
        if let Some(size) = term::size().filter(|s| Some(*s) != current) {
            // A process that just ended cannot be resized; following it says how it ended.
            let _ = self.client.resize(self.id, size).await;
        }
        // The screen carries the output cursor it was rendered at, taken together.
        let view = self.client.screen(self.id).await?;
        write_out(&paint_bytes(&view))?;
        self.mid_line = true;
        Ok(view.cursor)
    }

    /// Shows output from `since` on and passes keys through until the process ends or the
    /// detach key (Ctrl-]) is typed; keeps the remote size equal to this terminal's.
    pub async fn pump(&mut self, since: u64, on_signal: OnSignal) -> Result<Outcome> {
        let (client, id) = (self.client, self.id);
        let Signals {
            int,
            term: term_sig,
            hup,
            winch,
        } = &mut self.signals;
        let mut frames = client
            .subscribe(Request::Follow(FollowRequest {
                id,
                since: Some(since),
                backlog: 0,
                stream: StreamFilter::Both,
            }))
            .await?;
        // One connection: a lost one ends the pump (no new one is made here).
        let one = tokio::sync::watch::channel(client.clone()).1;
        let mut input = forward::stdin(one, id, DetachKey::SendBefore, false);
        let mut input_open = true;
        let forwarding = on_signal == OnSignal::Forward;
        // A signal to cubactl: passed on to the process, or the end of attaching (true).
        let detach_on = |sig: Signal| {
            if forwarding {
                forward::signal(client, id, sig, "\r\n");
            }
            !forwarding
        };
        loop {
            tokio::select! {
                frame = frames.next() => match frame {
                    Some(Ok(Response::Output(read))) => {
                        // Dropped bytes are not worth a note here: a terminal program redraws.
                        let bytes = read.bytes();
                        if let Some(&last) = bytes.last() {
                            self.mid_line = last != b'\n';
                        }
                        write_out(&bytes)?;
                    }
                    Some(Ok(Response::Process(end))) => {
                        return Ok(Outcome::Ended(Box::new(end)));
                    }
                    Some(Ok(other)) => {
                        bail!("cubad sent an unexpected frame while following: {other:?}");
                    }
                    Some(Err(e)) => return Err(e.into()),
                    None => {
                        bail!("cubad ended the stream early; `cubactl info {id}` shows the process");
                    }
                },
                why = &mut input, if input_open => match why {
                    Ok(Stopped::DetachKey) => return Ok(Outcome::Detached),
                    // Our terminal is gone. `run` still reports how the process ends (SIGHUP
                    // reaches it below); `attach` has nothing left to show it on.
                    _ if forwarding => input_open = false,
                    _ => return Ok(Outcome::Detached),
                },
                _ = winch.recv() => {
                    if let Some(size) = term::size() {
                        // On a task: this loop must keep draining the output (see `forward`).
                        let client = client.clone();
                        tokio::spawn(async move { client.resize(id, size).await });
                    }
                }
                _ = int.recv() => if detach_on(Signal::Int) { return Ok(Outcome::Detached) },
                _ = term_sig.recv() => if detach_on(Signal::Term) { return Ok(Outcome::Detached) },
                _ = hup.recv() => if detach_on(Signal::Hup) { return Ok(Outcome::Detached) },
            }
        }
    }

    /// Leaves this terminal usable for the shell again, whatever the program did to it: back
    /// from the alternate screen when it is on one, modes reset, the cursor on a fresh line.
    /// Call it before the raw mode ends, on every way out.
    pub async fn restore(&self) {
        // A request on a connection that died is never answered: ask only a live one, and
        // not for long.
        let alternate = self.client.is_alive()
            && matches!(
                tokio::time::timeout(Duration::from_secs(2), self.client.screen(self.id)).await,
                Ok(Ok(v)) if v.alternate
            );
        let mut text = String::new();
        if alternate {
            // Back to the screen as it was before (the cursor with it).
            text.push_str("\x1b[?1049l");
        }
        text.push_str(RESET);
        if self.mid_line && !alternate {
            text.push_str("\r\n");
        }
        // Nothing more can be done if the terminal went away.
        let _ = write_out(text.as_bytes());
    }
}

/// The bytes that show `view` on this terminal exactly: colours, attributes, cursor and input
/// modes, as the daemon's terminal emulator has them (on the alternate screen when the program
/// is on it, so leaving it later brings back what was on this terminal).
fn paint_bytes(view: &ScreenView) -> Vec<u8> {
    let mut out = Vec::new();
    if view.alternate {
        out.extend_from_slice(b"\x1b[?1049h");
    }
    out.extend_from_slice(&view.formatted);
    out
}

fn write_out(bytes: &[u8]) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(bytes)?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paint_is_the_formatted_screen_on_the_right_screen() {
        let view = ScreenView {
            size: TtySize { cols: 10, rows: 3 },
            lines: vec![">>> 1".into()],
            cursor_row: 0,
            cursor_col: 5,
            alternate: false,
            title: String::new(),
            cursor: 9,
            formatted: b"\x1b[H\x1b[J>>> 1".to_vec(),
        };
        assert_eq!(paint_bytes(&view), b"\x1b[H\x1b[J>>> 1");
        let alt = ScreenView {
            alternate: true,
            ..view
        };
        assert_eq!(paint_bytes(&alt), b"\x1b[?1049h\x1b[H\x1b[J>>> 1");
    }
}
