//! The signals cubactl listens for, named by what they mean to it. On Unix they are SIGINT,
//! SIGTERM, SIGHUP and SIGWINCH. Windows has console control events instead: Ctrl-C is the
//! interrupt, Ctrl-Break the request to terminate, the console closing the hang-up; a console
//! program is told of no window-size change unless it reads console input events, so
//! [`Kind::WindowChange`] never arrives there.

use std::io;

/// What a signal means to cubactl.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Interrupt,
    Terminate,
    Hangup,
    WindowChange,
}

/// Listens for one kind of signal from its creation on; [`Listener::recv`] waits for the next.
pub struct Listener(Inner);

/// Starts listening for `kind` (before the moment it must not be missed).
pub fn listen(kind: Kind) -> io::Result<Listener> {
    Inner::new(kind).map(Listener)
}

impl Listener {
    /// Waits for the next signal (`None`: no more can come).
    pub async fn recv(&mut self) -> Option<()> {
        self.0.recv().await
    }
}

#[cfg(unix)]
struct Inner(tokio::signal::unix::Signal);

#[cfg(unix)]
impl Inner {
    fn new(kind: Kind) -> io::Result<Inner> {
        use tokio::signal::unix::{signal, SignalKind};
        signal(match kind {
            Kind::Interrupt => SignalKind::interrupt(),
            Kind::Terminate => SignalKind::terminate(),
            Kind::Hangup => SignalKind::hangup(),
            Kind::WindowChange => SignalKind::window_change(),
        })
        .map(Inner)
    }

    async fn recv(&mut self) -> Option<()> {
        self.0.recv().await
    }
}

#[cfg(windows)]
enum Inner {
    CtrlC(tokio::signal::windows::CtrlC),
    CtrlBreak(tokio::signal::windows::CtrlBreak),
    CtrlClose(tokio::signal::windows::CtrlClose),
    /// An event Windows does not send to a console program.
    Never,
}

#[cfg(windows)]
impl Inner {
    fn new(kind: Kind) -> io::Result<Inner> {
        use tokio::signal::windows::{ctrl_break, ctrl_c, ctrl_close};
        Ok(match kind {
            Kind::Interrupt => Inner::CtrlC(ctrl_c()?),
            Kind::Terminate => Inner::CtrlBreak(ctrl_break()?),
            Kind::Hangup => Inner::CtrlClose(ctrl_close()?),
            Kind::WindowChange => Inner::Never,
        })
    }

    async fn recv(&mut self) -> Option<()> {
        match self {
            Inner::CtrlC(s) => s.recv().await,
            Inner::CtrlBreak(s) => s.recv().await,
            Inner::CtrlClose(s) => s.recv().await,
            Inner::Never => std::future::pending().await,
        }
    }
}
