//! A command's terminal on Windows: a pseudo console (`conpty.rs`) whose output is read and
//! whose input is written by threads of their own (`threaded.rs`), behind the interface the
//! Unix terminal master has (`crate::parts::terminal::Master`): read, read now, write, resize. At the
//! program's exit the console is closed, which ends its output once what it held is read.

use std::io;
use std::sync::Mutex;

use cuba_protocol::TtySize;

use super::conpty::Pty;
use super::threaded::{Reader, Writer};

pub struct Master {
    pty: Mutex<Pty>,
    output: tokio::sync::Mutex<Reader>,
    input: tokio::sync::Mutex<Writer>,
    /// Shown where the Unix master shows its device's path.
    pub path: String,
}

impl Master {
    /// The daemon's ends of `pty`, its pipes taken over by threads.
    pub fn of(pty: Pty) -> io::Result<Master> {
        let output = Reader::spawn("cubad-tty", pty.output.try_clone()?)?;
        let input = Writer::spawn("cubad-tty-in", pty.input.try_clone()?)?;
        Ok(Master {
            pty: Mutex::new(pty),
            output: tokio::sync::Mutex::new(output),
            input: tokio::sync::Mutex::new(input),
            path: "conpty".to_string(),
        })
    }

    fn pty(&self) -> std::sync::MutexGuard<'_, Pty> {
        self.pty.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.output.lock().await.read(buf).await
    }

    /// What the console has put out already, without waiting (`WouldBlock`: nothing).
    pub fn read_now(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self.output.try_lock() {
            Ok(output) => output.read_now(buf),
            Err(_) => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    pub async fn write(&self, data: &[u8]) -> io::Result<usize> {
        self.input.lock().await.write(data).await
    }

    pub async fn write_all(&self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let n = self.write(data).await?;
            data = &data[n..];
        }
        Ok(())
    }

    pub fn resize(&self, size: TtySize) -> io::Result<()> {
        self.pty().resize(size.cols, size.rows)
    }

    /// Closes the console once its program has exited: its output then ends.
    pub fn close(&self) {
        self.pty().close();
    }

    /// The program reading the console now: Windows does not say.
    pub fn foreground(&self) -> Option<i32> {
        None
    }
}
