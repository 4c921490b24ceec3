//! One client's file: read it, work out its new content, and write it (or, for `--dry-run`,
//! say what would be written). Never rewrites a file it cannot parse.

use anyhow::{anyhow, bail, Result};
use serde_json::{Map, Value};
use toml_edit::DocumentMut;

use super::clients::{self, Client, Dirs, Format, Options, Server, SERVER};
use super::json_doc::{self, JsonDoc};
use super::{codex_toml, files, jsonc};

/// What this run does, the same for every client.
pub struct Plan<'a> {
    pub dirs: &'a Dirs,
    /// The server to write; `None` with `--remove`.
    pub server: Option<&'a Server>,
    pub opts: Options,
    pub dry_run: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Written,
    Updated,
    Unchanged,
    Removed,
    WouldWrite,
    WouldUpdate,
    WouldRemove,
    /// Not rewritten (JSON with comments): the user is shown what to paste.
    Manual,
}

impl Status {
    pub fn word(self) -> &'static str {
        match self {
            Status::Written => "written",
            Status::Updated => "updated",
            Status::Unchanged => "unchanged",
            Status::Removed => "removed",
            Status::WouldWrite => "would write",
            Status::WouldUpdate => "would update",
            Status::WouldRemove => "would remove",
            Status::Manual => "not written: edit it by hand",
        }
    }

    /// The `--dry-run` word for what a real run would have done.
    fn would(self) -> Status {
        match self {
            Status::Written => Status::WouldWrite,
            Status::Updated => Status::WouldUpdate,
            Status::Removed => Status::WouldRemove,
            other => other,
        }
    }
}

#[derive(Debug)]
pub struct Outcome {
    pub status: Status,
    /// Lines shown under the status line: what changed, the entry, the backup.
    pub details: Vec<String>,
    pub notes: Vec<String>,
}

/// A parsed file.
enum Doc {
    Json(JsonDoc, &'static str),
    Toml(DocumentMut),
}

pub fn apply(client: Client, plan: &Plan) -> Result<Outcome> {
    let path = files::target(&client.config_file(plan.dirs))?;
    let original = files::read(&path)?;
    let extras = match plan.server {
        Some(_) => clients::extras(client, plan.opts, &plan.dirs.show(&path)),
        None => Default::default(),
    };
    let entry = plan.server.map(|s| client.entry(s, &extras));
    let mut doc = match open(client, original.as_deref()) {
        Ok(doc) => doc,
        Err(Unparsed::Jsonc(value, container)) => {
            return Ok(by_hand(container, &value, entry.as_deref(), extras.notes))
        }
        Err(Unparsed::Invalid(why)) => {
            bail!("{} is not valid {why}; left it as it is", path.display())
        }
    };
    let edited =
        edit(&mut doc, entry.as_deref()).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    let Some((status, mut details)) = edited else {
        let notes = match entry {
            Some(_) => extras.notes,
            None => vec![format!("no {SERVER} entry to remove")],
        };
        return Ok(Outcome {
            status: Status::Unchanged,
            details: Vec::new(),
            notes,
        });
    };
    if plan.dry_run {
        details.extend(entry.as_deref().map(|new| snippet(client, new)));
        return Ok(Outcome {
            status: status.would(),
            details,
            notes: extras.notes,
        });
    }
    if let Some(original) = &original {
        let bak = files::backup(&path, original)?;
        details.push(format!("backup: {}", plan.dirs.show(&bak)));
    }
    files::replace(&path, &doc.render(), original.as_deref())?;
    Ok(Outcome {
        status,
        details,
        notes: extras.notes,
    })
}

/// Puts the entry into `doc`, or takes it out (`None`): the status and what changed, or `None`
/// when the file already says what it should.
fn edit(
    doc: &mut Doc,
    entry: Option<&[(String, Value)]>,
) -> Result<Option<(Status, Vec<String>)>, String> {
    let old = doc.entry()?;
    let Some(new) = entry else {
        return Ok(match old {
            None => None,
            Some(_) => {
                doc.remove()?;
                Some((Status::Removed, Vec::new()))
            }
        });
    };
    let new_value = as_value(new);
    if old.as_ref() == Some(&new_value) {
        return Ok(None);
    }
    doc.set(new)?;
    Ok(Some(match old {
        Some(old) => (Status::Updated, vec![change(&old, &new_value)]),
        None => (Status::Written, Vec::new()),
    }))
}

/// Why a file could not be opened for editing.
enum Unparsed {
    /// Valid only as JSON with comments (its value, and our container's name): read, never
    /// rewritten.
    Jsonc(Value, &'static str),
    /// Names the format and the parse error.
    Invalid(String),
}

fn open(client: Client, text: Option<&str>) -> Result<Doc, Unparsed> {
    match client.format() {
        Format::CodexToml => {
            let doc = codex_toml::parse(text.unwrap_or_default())
                .map_err(|e| Unparsed::Invalid(format!("TOML ({e})")))?;
            Ok(Doc::Toml(doc))
        }
        Format::Json { container, jsonc } => {
            let Some(text) = text else {
                return Ok(Doc::Json(JsonDoc::new(client.new_file_keys()), container));
            };
            match JsonDoc::parse(text) {
                Ok(doc) => Ok(Doc::Json(doc, container)),
                Err(e) => match jsonc.then(|| jsonc::parse(text)).flatten() {
                    Some(value) if value.is_object() => Err(Unparsed::Jsonc(value, container)),
                    _ => Err(Unparsed::Invalid(format!("JSON ({e})"))),
                },
            }
        }
    }
}

impl Doc {
    fn entry(&self) -> Result<Option<Value>, String> {
        match self {
            Doc::Json(doc, container) => doc.entry(container, SERVER),
            Doc::Toml(doc) => codex_toml::entry(doc, SERVER),
        }
    }

    fn set(&mut self, entry: &[(String, Value)]) -> Result<(), String> {
        match self {
            Doc::Json(doc, container) => doc.set(container, SERVER, entry),
            Doc::Toml(doc) => codex_toml::set(doc, SERVER, entry),
        }
    }

    fn remove(&mut self) -> Result<bool, String> {
        match self {
            Doc::Json(doc, container) => doc.remove(container, SERVER),
            Doc::Toml(doc) => codex_toml::remove(doc, SERVER),
        }
    }

    fn render(&self) -> String {
        match self {
            Doc::Json(doc, _) => doc.render(),
            Doc::Toml(doc) => doc.to_string(),
        }
    }
}

/// A file with comments (Zed, VS Code): unchanged when our entry is already right, else the
/// entry to paste and why it was not written.
fn by_hand(
    container: &str,
    value: &Value,
    entry: Option<&[(String, Value)]>,
    mut notes: Vec<String>,
) -> Outcome {
    let why = "the file has comments or trailing commas, which setup would lose, so it was not \
               rewritten";
    let old = value.get(container).and_then(|c| c.get(SERVER));
    let outcome = |status, details, notes| Outcome {
        status,
        details,
        notes,
    };
    match entry {
        None if old.is_none() => outcome(
            Status::Unchanged,
            Vec::new(),
            vec![format!("no {SERVER} entry to remove")],
        ),
        None => outcome(
            Status::Manual,
            Vec::new(),
            vec![format!(
                "{why}: delete \"{SERVER}\" under \"{container}\" yourself"
            )],
        ),
        Some(new) if old == Some(&as_value(new)) => outcome(Status::Unchanged, Vec::new(), notes),
        Some(new) => {
            notes.insert(
                0,
                format!(
                    "{why}: put this under \"{container}\" (create that object at the top \
                     level if it is missing; replace an older \"{SERVER}\")"
                ),
            );
            outcome(Status::Manual, vec![json_doc::fragment(SERVER, new)], notes)
        }
    }
}

fn as_value(entry: &[(String, Value)]) -> Value {
    Value::Object(entry.iter().cloned().collect::<Map<String, Value>>())
}

/// One line saying how the old entry differs: its command, else the keys that changed.
fn change(old: &Value, new: &Value) -> String {
    let command = |v: &Value| match v.get("command") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" "),
        Some(other) => other.to_string(),
        None => "(none)".into(),
    };
    let (was, now) = (command(old), command(new));
    if was != now {
        return format!("command: {was} → {now}");
    }
    let mut keys: Vec<&String> = old
        .as_object()
        .into_iter()
        .chain(new.as_object())
        .flat_map(|m| m.keys())
        .filter(|k| old.get(k.as_str()) != new.get(k.as_str()))
        .collect();
    keys.sort();
    keys.dedup();
    let keys: Vec<&str> = keys.iter().map(|k| k.as_str()).collect();
    format!("changed: {}", keys.join(", "))
}

/// The entry as it sits in the client's file, for `--dry-run`.
fn snippet(client: Client, entry: &[(String, Value)]) -> String {
    match client.format() {
        Format::CodexToml => codex_toml::snippet(SERVER, entry).trim_end().to_string(),
        Format::Json { container, .. } => {
            let mut doc = JsonDoc::new(Vec::new());
            doc.set(container, SERVER, entry)
                .expect("a new document has no container to conflict with");
            doc.render().trim_end().to_string()
        }
    }
}
