//! Remembered approvals: `approvals.toml` beside the settings file, a file the user reads and
//! edits. Each entry is a rule that is not asked about again (`ask_commands: git push`), where
//! (a directory and everything below it; none: anywhere), who approved it, through which
//! channel and when.
//!
//! The daemon uses what it last read or wrote: a hand edit takes effect only when a person
//! confirms it (`cubactl daemon reload`, or a restart), and until then `cubactl approvals` says
//! how the file differs. Anything that can write the file could otherwise approve anything; the
//! sandbox (`workspace-write`) keeps commands from writing it at all.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use cuba_protocol::format_utc;
use cuba_protocol::{ErrorKind, ProtocolError, Remembered};
use serde::{Deserialize, Serialize};

use crate::state::person_file::Seen;

/// The file's form.
#[derive(Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    approval: Vec<Entry>,
}

#[derive(Serialize, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct Entry {
    rule: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dir: Option<String>,
    #[serde(default)]
    by: String,
    #[serde(default)]
    channel: String,
    /// UTC, `2026-12-05T10:00:00Z`.
    #[serde(default)]
    at: String,
}

const HEADER: &str = "\
# Remembered approvals: cuba-exec does not ask about these rules again in their directory
# (and below it; no dir: anywhere). `cubactl approvals forget N` removes one. An edit by hand
# takes effect once a person runs `cubactl daemon reload` (or restarts the daemon).
";

/// The file and what the daemon uses of it.
pub struct Store {
    path: PathBuf,
    cache: Mutex<Cache>,
}

#[derive(Default)]
struct Cache {
    /// The file as the daemon last read or wrote it.
    seen: Seen,
    entries: Vec<Remembered>,
}

impl Store {
    /// The store of `path`, read now.
    pub fn new(path: PathBuf) -> Store {
        let store = Store {
            path,
            cache: Mutex::new(Cache::default()),
        };
        let lines = store.reload();
        if let Some(why) = lines.iter().find(|l| l.contains("does not read")) {
            tracing::warn!("{why}");
        }
        store
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every remembered approval in effect.
    pub fn all(&self) -> Vec<Remembered> {
        self.lock().entries.clone()
    }

    /// The remembered approval of `rule` whose directory holds `cwd`, if any.
    pub fn find(&self, rule: &str, cwd: &Path) -> Option<Remembered> {
        let cache = self.lock();
        let real = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
        cache
            .entries
            .iter()
            .find(|e| {
                e.rule == rule
                    && e.dir.as_ref().is_none_or(|d| {
                        let d = std::fs::canonicalize(d).unwrap_or_else(|_| PathBuf::from(d));
                        real.starts_with(d)
                    })
            })
            .cloned()
    }

    /// Adds `r` (replacing one of the same rule and directory, in its place: the numbers
    /// `cubactl approvals` shows stay) and writes the file.
    pub fn remember(&self, r: Remembered) -> Result<(), ProtocolError> {
        let mut cache = self.lock();
        let same = |e: &Remembered| (&e.rule, &e.dir) == (&r.rule, &r.dir);
        match cache.entries.iter().position(same) {
            Some(i) => cache.entries[i] = r,
            None => cache.entries.push(r),
        }
        self.write(&mut cache)
    }

    /// Forgets the entries `which` names; how many went.
    /// A number no approval has is a bad request; a file that cannot be written, the daemon's.
    pub fn forget(&self, which: &cuba_protocol::ForgetRequest) -> Result<usize, ProtocolError> {
        use cuba_protocol::ForgetRequest;
        let mut cache = self.lock();
        let before = cache.entries.len();
        match which {
            ForgetRequest::All => cache.entries.clear(),
            ForgetRequest::Rule(rule) => {
                let rule = rule.trim();
                cache
                    .entries
                    .retain(|e| e.rule != rule && !e.rule.ends_with(&format!(": {rule}")));
            }
            ForgetRequest::Index(n) => {
                let i = (*n as usize).checked_sub(1).filter(|i| *i < before);
                let Some(i) = i else {
                    return Err(ProtocolError::bad_request(format!(
                        "there is no remembered approval {n} (there are {before}: `cubactl \
                         approvals` lists them)"
                    )));
                };
                cache.entries.remove(i);
            }
        }
        let gone = before - cache.entries.len();
        if gone > 0 {
            self.write(&mut cache)?;
        }
        Ok(gone)
    }

    /// How the file differs from what is in effect, when it was changed by something other
    /// than the daemon: one line per approval added or removed.
    pub fn unconfirmed(&self) -> Vec<String> {
        let cache = self.lock();
        if !cache.seen.changed(&self.path) {
            return Vec::new();
        }
        let name = self.name();
        match self.read() {
            Ok(entries) => diff(&name, &cache.entries, &entries),
            Err(e) => vec![format!("{name} does not read: {e}")],
        }
    }

    /// Reads the file again and puts it in effect (a person confirmed it); what changed. A
    /// file that does not read remembers nothing: asking again is the safe side.
    pub fn reload(&self) -> Vec<String> {
        let mut cache = self.lock();
        let seen = Seen::now(&self.path);
        let name = self.name();
        let (entries, mut lines) = match self.read() {
            Ok(entries) => (entries, Vec::new()),
            Err(e) => (Vec::new(), vec![format!("{name} does not read: {e}")]),
        };
        lines.extend(diff(&name, &cache.entries, &entries));
        cache.entries = entries;
        cache.seen = seen;
        lines
    }

    fn name(&self) -> String {
        self.path.display().to_string()
    }

    fn read(&self) -> Result<Vec<Remembered>, String> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e.to_string()),
        };
        let file: File = toml::from_str(&text).map_err(|e| e.to_string())?;
        Ok(file.approval.into_iter().map(remembered).collect())
    }

    fn write(&self, cache: &mut Cache) -> Result<(), ProtocolError> {
        // A hand edit not confirmed is not lost: it is kept beside the file.
        if cache.seen.changed(&self.path) && self.path.exists() {
            let kept = self.path.with_extension("toml.edited");
            if std::fs::rename(&self.path, &kept).is_ok() {
                tracing::warn!(
                    file = %self.path.display(),
                    kept = %kept.display(),
                    "approvals file edited by hand and not reloaded; the edit is kept aside"
                );
            }
        }
        let file = File {
            approval: cache.entries.iter().map(entry).collect(),
        };
        let internal = |e: String| ProtocolError::new(ErrorKind::Internal, e);
        let body = toml::to_string(&file).map_err(|e| internal(e.to_string()))?;
        cache.seen =
            crate::state::person_file::write_whole(&self.path, &format!("{HEADER}\n{body}"))
                .map_err(|e| internal(e.to_string()))?;
        Ok(())
    }
}

/// What changed from `was` to `now`: `+` and `-` lines, each naming the rule and where.
fn diff(file: &str, was: &[Remembered], now: &[Remembered]) -> Vec<String> {
    let key = |r: &Remembered| (r.rule.clone(), r.dir.clone());
    let place = |r: &Remembered| match &r.dir {
        Some(d) => format!("{} in {d}", r.rule),
        None => format!("{} anywhere", r.rule),
    };
    let mut lines: Vec<String> = now
        .iter()
        .filter(|r| !was.iter().any(|w| key(w) == key(r)))
        .map(|r| format!("{file}: + approval {}", place(r)))
        .collect();
    lines.extend(
        was.iter()
            .filter(|w| !now.iter().any(|r| key(w) == key(r)))
            .map(|w| format!("{file}: - approval {}", place(w))),
    );
    lines
}

fn remembered(e: Entry) -> Remembered {
    Remembered {
        rule: e.rule.trim().to_string(),
        dir: e.dir.filter(|d| !d.trim().is_empty()),
        by: e.by,
        channel: e.channel,
        at_ms: parse_utc(&e.at).unwrap_or(0),
    }
}

fn entry(r: &Remembered) -> Entry {
    Entry {
        rule: r.rule.clone(),
        dir: r.dir.clone(),
        by: r.by.clone(),
        channel: r.channel.clone(),
        at: format_utc(r.at_ms),
    }
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Unix milliseconds of `2026-12-05T10:00:00Z` (seconds optional).
fn parse_utc(text: &str) -> Option<u64> {
    let t = text.trim().strip_suffix('Z')?;
    let (date, time) = t.split_once('T')?;
    let mut d = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let mut c = time.split(':').map(|p| p.parse::<i64>().ok());
    let (h, min) = (c.next()??, c.next()??);
    let s = c.next().flatten().unwrap_or(0);
    let secs = days_from_civil(y, m, day) * 86_400 + h * 3600 + min * 60 + s;
    u64::try_from(secs).ok().map(|s| s * 1000)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn approval(rule: &str, dir: Option<&str>) -> Remembered {
        Remembered {
            rule: rule.into(),
            dir: dir.map(String::from),
            by: "me (uid 1000)".into(),
            channel: "cubactl".into(),
            at_ms: 1_796_000_000_000,
        }
    }

    #[test]
    fn times_read_back_as_written() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(951_782_400_000), "2000-02-29T00:00:00Z");
        for ms in [0, 951_782_400_000, 1_796_000_000_000] {
            assert_eq!(parse_utc(&format_utc(ms)), Some(ms));
        }
        assert_eq!(
            parse_utc("2026-12-05T10:00Z"),
            parse_utc("2026-12-05T10:00:00Z")
        );
        assert_eq!(parse_utc("yesterday"), None);
    }

    #[test]
    fn remembered_by_rule_and_directory_and_edited_by_hand() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("project");
        std::fs::create_dir_all(project.join("sub")).unwrap();
        let store = Store::new(dir.path().join("cfg").join("approvals.toml"));
        assert!(store.all().is_empty());
        let p = project.display().to_string();
        store
            .remember(approval("ask_commands: git push", Some(&p)))
            .unwrap();
        store.remember(approval("ask_dirs: /srv", None)).unwrap();
        assert!(store
            .find("ask_commands: git push", &project.join("sub"))
            .is_some());
        assert!(store.find("ask_commands: git push", dir.path()).is_none());
        assert!(store
            .find("ask_dirs: /srv", Path::new("/anywhere"))
            .is_some());
        // The same rule and place again replaces it.
        store
            .remember(approval("ask_commands: git push", Some(&p)))
            .unwrap();
        assert_eq!(store.all().len(), 2);
        // The person edits the file: nothing changes until a person confirms it.
        let text = std::fs::read_to_string(store.path()).unwrap();
        assert!(text.starts_with("# Remembered approvals"), "{text}");
        let edited = text.replace("ask_dirs: /srv", "ask_commands: npm publish");
        std::fs::write(store.path(), format!("{edited}\n")).unwrap();
        assert!(store
            .find("ask_commands: npm publish", Path::new("/x"))
            .is_none());
        let pending = store.unconfirmed();
        assert_eq!(pending.len(), 2, "{pending:?}");
        assert!(pending[0].contains("+ approval ask_commands: npm publish anywhere"));
        assert!(pending[1].contains("- approval ask_dirs: /srv anywhere"));
        assert_eq!(store.reload(), pending);
        assert!(store.unconfirmed().is_empty());
        assert!(store
            .find("ask_commands: npm publish", Path::new("/x"))
            .is_some());
        assert_eq!(
            store
                .forget(&cuba_protocol::ForgetRequest::Index(2))
                .unwrap(),
            1
        );
        assert!(store
            .forget(&cuba_protocol::ForgetRequest::Index(9))
            .is_err());
        assert_eq!(
            store
                .forget(&cuba_protocol::ForgetRequest::Rule("git push".into()))
                .unwrap(),
            1
        );
        assert!(store.all().is_empty());
        // An edit that is then overwritten by the daemon is kept aside, not lost.
        store.remember(approval("ask_dirs: /srv", None)).unwrap();
        std::fs::write(store.path(), "[[approval]]\nrule = \"ask_dirs: /x\"\n").unwrap();
        store.remember(approval("ask_dirs: /y", None)).unwrap();
        let kept = std::fs::read_to_string(store.path().with_extension("toml.edited")).unwrap();
        assert!(kept.contains("ask_dirs: /x"), "{kept}");
        assert_eq!(store.all().len(), 2);
        // A file that does not parse remembers nothing once reloaded.
        std::fs::write(store.path(), "[[approval]]\nrule = 3\n").unwrap();
        assert!(store.unconfirmed()[0].contains("does not read"));
        assert!(store.reload()[0].contains("does not read"));
        assert!(store.all().is_empty());
    }

    #[test]
    fn a_number_no_approval_has_is_the_caller_s_error_and_a_failed_write_the_daemon_s() {
        let dir = tempfile::tempdir().unwrap();
        // Its directory is a file: nothing can be written there.
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let store = Store::new(file.join("approvals.toml"));
        let e = store
            .remember(approval("ask_commands: git push", Some("/p")))
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Internal, "{e:?}");
        assert!(e.message.contains("cannot make"), "{e:?}");
        let e = store
            .forget(&cuba_protocol::ForgetRequest::Index(9))
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::BadRequest, "{e:?}");
    }
}
