//! The desktop notification of a question: `notify-send` (Linux, where a desktop session is
//! reachable), `osascript` (macOS), or the program `notify` names (run as `PROGRAM TITLE
//! BODY`). It only tells the person that something waits and how to answer; it takes no answer.
//! Started and left: the daemon's reaper collects it like any stray child.
//!
//! It is a reader of the event log, as any channel that tells a person is: it reacts to each
//! `AskRaised` while that ask still waits.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Weak};

use cuba_protocol::{Ask, AskKind, EventKind, ProcessInfo};

use super::Asks;
use crate::base::config::Notify;
use crate::state::events::View;

/// Starts the reader of the log that notifies of each new question (none with `notify = off`).
pub fn start(asks: &Arc<Asks>) {
    if matches!(asks.notify, Notify::Off) {
        return;
    }
    let log = asks.table.events().clone();
    let mut changes = log.subscribe();
    // New questions only: one asked before this start has no reader left to be told by.
    let mut since = log.next_seq();
    let weak: Weak<Asks> = Arc::downgrade(asks);
    asks.runtime.spawn(async move {
        while changes.changed().await.is_ok() {
            let batch = log.read(Some(since), None, View::All, 0);
            since = batch.next;
            let Some(asks) = weak.upgrade() else { return };
            for event in batch.events {
                if let EventKind::AskRaised { ask, .. } = event.kind {
                    told(&asks, ask);
                }
            }
        }
    });
}

/// Tells the person of ask `id` if it still waits.
fn told(asks: &Asks, id: u64) {
    let found = asks
        .lock()
        .get(&id)
        .map(|e| (e.process.clone(), e.ask.clone()));
    if let Some((process, ask)) = found {
        let info = process.lock().snapshot();
        tell(&asks.notify, &info, &ask);
    }
}

/// The title and body for `ask` about `info`.
fn text(info: &ProcessInfo, ask: &Ask) -> (String, String) {
    let id = info.id;
    match ask.kind {
        AskKind::Password => (
            "cuba-exec: a password is asked for".to_string(),
            format!(
                "{} asks for a password in process {id} (`{}`): {}\nAnswer in a terminal: \
                 cubactl answer {id}",
                ask.rule, info.command, ask.what
            ),
        ),
        _ => (
            "cuba-exec: approve?".to_string(),
            format!(
                "{} wants to run `{}` in {} ({})\nAnswer: cubactl approve {id}  /  cubactl deny \
                 {id}",
                info.owner.name, ask.what, ask.cwd, ask.rule
            ),
        ),
    }
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The command that shows `title` and `body` as `setting` says; `None`: nothing to run here.
fn command(setting: &Notify, title: &str, body: &str) -> Option<Command> {
    match setting {
        Notify::Off => None,
        Notify::Program(p) => {
            let mut c = Command::new(p);
            c.arg(title).arg(body);
            Some(c)
        }
        Notify::Auto if cfg!(target_os = "macos") => {
            let quote = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
            let script = format!(
                "display notification \"{}\" with title \"{}\"",
                quote(body),
                quote(title)
            );
            let mut c = Command::new(Path::new("/usr/bin/osascript"));
            c.arg("-e").arg(script);
            Some(c)
        }
        Notify::Auto => {
            // Only where a desktop session can show it.
            let session = ["DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS"]
                .iter()
                .any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()));
            let program = on_path("notify-send").filter(|_| session)?;
            let mut c = Command::new(program);
            c.args(["--app-name=cuba-exec", "--urgency=critical", title, body]);
            Some(c)
        }
    }
}

/// Tells the person that `ask` about `info` waits for them.
fn tell(setting: &Notify, info: &ProcessInfo, ask: &Ask) {
    let (title, body) = text(info, ask);
    let Some(mut cmd) = command(setting, &title, &body) else {
        return;
    };
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Err(e) = cmd.spawn() {
        tracing::warn!(
            "cannot show a desktop notification ({:?}): {e}",
            cmd.get_program()
        );
    }
}
