//! `audit [-n N] [-f] [--json]`: the daemon's audit log (`audit.jsonl` in its state dir): one
//! line per spawn decision and per process end. `-f` follows new lines as they are appended,
//! across rotations.
//!
//! Following reads to the end of the file, then sleeps until the system says the file changed
//! (growth, rename, removal) or its directory did (a new `audit.jsonl` after a rotation): see
//! `platform::watch`. The sleep ends after 1 s anyway, a safety net for a missed event, so it
//! never spins and never hangs on a stale file.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use cuba_protocol::hosts::{Bridge, HostSpec};
use cuba_protocol::safe_fs;
use serde_json::Value;

use crate::ctx::Ctx;
use crate::platform::watch::{FileWatch, Watcher};
use crate::style::{Paint, Style};
use crate::table::sanitize;

const FILE_NAME: &str = "audit.jsonl";
/// Longest wait for an event before re-checking the file anyway.
const RECHECK: Duration = Duration::from_secs(1);

#[derive(clap::Args, Debug)]
pub struct Args {
    /// How many of the last lines to print first.
    #[arg(short = 'n', long, default_value_t = 20, value_name = "N")]
    lines: usize,
    /// Keep printing lines as they are appended (follows the log across rotations); Ctrl-C
    /// stops.
    #[arg(short = 'f', long)]
    follow: bool,
    /// Print the raw JSON lines instead of a table.
    #[arg(long)]
    json: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    if let Some(host) = &ctx.host {
        // An unknown host is that error first.
        let spec = ctx.hosts().get(host).map_err(anyhow::Error::msg)?;
        // The log is a file beside that daemon; the protocol carries no audit lines.
        eprintln!(
            "cubactl audit: the audit log is a file on the daemon's machine, which --host \
             cannot read; run `cubactl audit` on {host} itself{}",
            ssh_hint(spec)
        );
        return Ok(ExitCode::from(2));
    }
    let client = ctx.connect().await?;
    let status = client
        .status()
        .await
        .context("cannot ask cubad for its state dir")?;
    drop(client);
    let path = Path::new(&status.state_dir).join(FILE_NAME);
    let printer = Printer {
        json: args.json,
        style: ctx.out,
        width: ctx.width,
    };
    let (file, last) = initial(&path, args.lines)?;
    let wants_header = !args.json && (!last.is_empty() || args.follow);
    if wants_header && !printer.header()? {
        return Ok(ExitCode::SUCCESS);
    }
    for line in &last {
        if !printer.line(line)? {
            return Ok(ExitCode::SUCCESS);
        }
    }
    if !args.follow {
        return Ok(ExitCode::SUCCESS);
    }
    tokio::task::spawn_blocking(move || follow(&path, file, &printer))
        .await
        .context("the follow task failed")??;
    Ok(ExitCode::SUCCESS)
}

/// `: ssh DEST cubactl audit` for an ssh host, the engine's `exec` for a container.
fn ssh_hint(spec: &HostSpec) -> String {
    let bin = spec.remote_bin.as_deref().unwrap_or("cubactl");
    match &spec.bridge {
        Bridge::Ssh { dest, .. } => format!(" (`ssh {dest} {bin} audit`)"),
        Bridge::Container(c) => format!(" (`{} exec {} {bin} audit`)", c.engine(), c.name),
        Bridge::Pod(p) => format!(" (`kubectl exec {} -- {bin} audit`)", p.pod),
        Bridge::Command(_) => String::new(),
    }
}

/// Opens the live file and reads it to its end; returns it (positioned there) and the last `n`
/// lines, topped up from `audit.jsonl.1` when the live file has fewer.
fn initial(path: &Path, n: usize) -> Result<(Option<File>, VecDeque<String>)> {
    let mut last = VecDeque::new();
    let file = match safe_fs::open_read(path) {
        Ok(mut f) => {
            let mut text = String::new();
            f.read_to_string(&mut text)
                .with_context(|| format!("cannot read {}", path.display()))?;
            keep_last(&mut last, &text, n);
            Some(f)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("cannot open {}", path.display())),
    };
    if last.len() < n {
        let mut older = VecDeque::new();
        if let Ok(text) = safe_fs::read_to_string(&rotated(path)) {
            keep_last(&mut older, &text, n - last.len());
        }
        older.extend(last);
        last = older;
    }
    Ok((file, last))
}

fn rotated(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".1");
    PathBuf::from(name)
}

fn keep_last(out: &mut VecDeque<String>, text: &str, n: usize) {
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if out.len() == n {
            out.pop_front();
        }
        if n > 0 {
            out.push_back(line.to_string());
        }
    }
}

struct Printer {
    json: bool,
    style: Style,
    width: Option<usize>,
}

/// `Ok(false)`: stdout is closed (`cubactl audit -f | head`), stop quietly.
fn put(text: &str) -> Result<bool> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Fixed widths (not a fitted table) so followed lines line up with the first ones.
const WIDTHS: [usize; 6] = [14, 14, 9, 14, 5, 6];

impl Printer {
    fn header(&self) -> Result<bool> {
        let cols = ["TIME", "CLIENT", "DECISION", "RULE", "ID", "EXIT"];
        let text = self.row(&cols.map(String::from), "COMMAND");
        put(&format!("{}\n", self.style.paint(Some(Paint::Bold), &text)))
    }

    fn row(&self, cols: &[String; 6], command: &str) -> String {
        let mut s = String::new();
        for (i, (c, w)) in cols.iter().zip(WIDTHS).enumerate() {
            let c: String = c.chars().take(w).collect();
            if i >= 4 {
                s.push_str(&format!("{c:>w$}  "));
            } else {
                s.push_str(&format!("{c:<w$}  "));
            }
        }
        let used = s.chars().count();
        let room = self
            .width
            .map_or(usize::MAX, |w| w.saturating_sub(used).max(10));
        let mut cmd: String = command.chars().take(room).collect();
        if command.chars().count() > room {
            cmd.pop();
            cmd.push('…');
        }
        s.push_str(&cmd);
        s
    }

    fn line(&self, line: &str) -> Result<bool> {
        if self.json {
            return put(&format!("{line}\n"));
        }
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            return put(&format!("{}\n", sanitize(line)));
        };
        let text = |k: &str| match v.get(k) {
            Some(Value::String(s)) => sanitize(s),
            Some(Value::Null) | None => "-".to_string(),
            Some(other) => other.to_string(),
        };
        let end = v.get("event").and_then(Value::as_str) == Some("end");
        let decision = if end { text("state") } else { text("decision") };
        let exit = match (v.get("exit"), v.get("signal")) {
            (Some(Value::Number(n)), _) => n.to_string(),
            (_, Some(Value::String(s))) => s.to_uppercase(),
            _ => "-".to_string(),
        };
        let time = v
            .get("ts")
            .and_then(Value::as_u64)
            .map_or("-".to_string(), local_time);
        let cols = [
            time,
            text("client"),
            decision,
            text("rule"),
            text("id"),
            exit,
        ];
        let paint = match v.get("decision").and_then(Value::as_str) {
            Some("refused") => Some(Paint::Red),
            _ if end => Some(Paint::Dim),
            _ => None,
        };
        let row = self.row(&cols, &text("command"));
        put(&format!("{}\n", self.style.paint(paint, &row)))
    }
}

/// `MM-DD HH:MM:SS` in local time.
pub(crate) fn local_time(ms: u64) -> String {
    let secs = (ms / 1000) as libc::time_t;
    // SAFETY: an all-zero `tm` is a valid value for localtime_r to overwrite.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    if !to_local(secs, &mut tm) {
        return ms.to_string();
    }
    format!(
        "{:02}-{:02} {:02}:{:02}:{:02}",
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

/// Fills `tm` with `secs` in local time; false when the C library cannot.
#[cfg(unix)]
fn to_local(secs: libc::time_t, tm: &mut libc::tm) -> bool {
    // SAFETY: localtime_r with valid pointers to locals; it is the thread-safe variant.
    !unsafe { libc::localtime_r(&secs, tm) }.is_null()
}

#[cfg(windows)]
fn to_local(secs: libc::time_t, tm: &mut libc::tm) -> bool {
    // SAFETY: localtime_s with valid pointers to locals; it is the thread-safe variant.
    unsafe { libc::localtime_s(tm, &secs) == 0 }
}

/// The file being followed: its descriptor, identity, watch, and any unfinished last line.
struct Followed {
    file: File,
    ino: FileId,
    watch: Option<FileWatch>,
    partial: Vec<u8>,
}

fn watch_file(watcher: &Watcher, path: &Path, file: File) -> Result<Followed> {
    let ino = file_id(&file)?;
    // The file may be renamed away between open and here: the directory watch and the
    // inode check below still catch up.
    let watch = watcher.add_file(path);
    Ok(Followed {
        file,
        ino,
        watch,
        partial: Vec::new(),
    })
}

fn follow(path: &Path, file: Option<File>, printer: &Printer) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    let watcher = Watcher::new(dir)?;
    let mut current = match file {
        Some(f) => Some(watch_file(&watcher, path, f)?),
        None => None,
    };
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // Whatever was appended to the file we hold (including the rest of a rotated one).
        if let Some(c) = current.as_mut() {
            if !drain(c, &mut buf, printer)? {
                return Ok(());
            }
        }
        // A new live file (rotation, or the first line ever): switch to it.
        match id_at(path) {
            Ok(id) if current.as_ref().is_none_or(|c| c.ino != id) => {
                if let Ok(f) = safe_fs::open_read(path) {
                    if let Some(old) = current.take() {
                        if let Some(w) = old.watch {
                            watcher.remove(w);
                        }
                    }
                    current = Some(watch_file(&watcher, path, f)?);
                    continue;
                }
            }
            _ => {}
        }
        watcher.wait(RECHECK)?;
    }
}

/// Reads `c` to its end, printing complete lines. `Ok(false)`: stdout is closed.
fn drain(c: &mut Followed, buf: &mut [u8], printer: &Printer) -> Result<bool> {
    loop {
        let n = match c.file.read(buf) {
            Ok(0) => return Ok(true),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("cannot read the audit log"),
        };
        c.partial.extend_from_slice(&buf[..n]);
        while let Some(at) = c.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = c.partial.drain(..=at).collect();
            let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
            if !text.trim().is_empty() && !printer.line(&text)? {
                return Ok(false);
            }
        }
    }
}

/// What tells the file at a path from the one it replaced (a rotation renames the live file
/// and starts a new one): the inode on Unix; on Windows the volume and file index.
#[cfg(unix)]
type FileId = u64;
#[cfg(windows)]
type FileId = (u32, u64);

#[cfg(unix)]
fn file_id(file: &File) -> std::io::Result<FileId> {
    use std::os::unix::fs::MetadataExt;
    Ok(file.metadata()?.ino())
}

/// The identity of the file at `path` now.
#[cfg(unix)]
fn id_at(path: &Path) -> std::io::Result<FileId> {
    use std::os::unix::fs::MetadataExt;
    Ok(std::fs::metadata(path)?.ino())
}

#[cfg(windows)]
fn file_id(file: &File) -> std::io::Result<FileId> {
    use std::os::windows::io::AsRawHandle;
    use windows_sys::Win32::Storage::FileSystem::{
        GetFileInformationByHandle, BY_HANDLE_FILE_INFORMATION,
    };
    // SAFETY: plain integers; an all-zero value is valid for the call to overwrite.
    let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: the handle is open for as long as `file` lives; one struct is written.
    if unsafe { GetFileInformationByHandle(file.as_raw_handle(), &mut info) } == 0 {
        return Err(std::io::Error::last_os_error());
    }
    let index = (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow);
    Ok((info.dwVolumeSerialNumber, index))
}

/// The identity of the file at `path` now: Windows tells it only through an open handle.
#[cfg(windows)]
fn id_at(path: &Path) -> std::io::Result<FileId> {
    file_id(&File::open(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_lines() {
        let mut out = VecDeque::new();
        keep_last(&mut out, "a\nb\n\nc\nd\n", 3);
        assert_eq!(out, ["b", "c", "d"]);
        let mut none = VecDeque::new();
        keep_last(&mut none, "a\nb\n", 0);
        assert!(none.is_empty());
    }

    #[test]
    fn a_rotated_files_successor_is_another_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join(FILE_NAME);
        std::fs::write(&path, b"a\n").expect("write");
        let held = safe_fs::open_read(&path).expect("open");
        let id = file_id(&held).expect("id of the open file");
        assert_eq!(id_at(&path).expect("id at the path"), id);
        std::fs::rename(&path, rotated(&path)).expect("rotate");
        std::fs::write(&path, b"b\n").expect("write the successor");
        assert_ne!(id_at(&path).expect("id of the successor"), id);
    }

    #[test]
    fn times_read_as_local_time() {
        let t = local_time(1_700_000_000_000);
        assert_eq!(t.len(), "MM-DD HH:MM:SS".len(), "{t}");
    }
}
