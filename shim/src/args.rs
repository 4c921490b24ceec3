//! Tool arguments. The doc comments become the JSON schema the model reads: they are written
//! for the model. Unknown fields are refused, so a misspelt argument is an error, not a no-op.

use std::collections::BTreeMap;

use cuba_protocol::{PortWish, StreamFilter};
use schemars::JsonSchema;
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use crate::schema::input_schema;

/// Arguments of a struct with a flattened part (`RunArgs`, `StartArgs`). Serde refuses their
/// unknown fields without naming the known ones; this names them, as it does for the other
/// tools, so a misspelt argument comes with its spelling.
#[derive(Debug)]
pub struct Strict<T>(pub T);

impl<'de, T: DeserializeOwned + JsonSchema + 'static> Deserialize<'de> for Strict<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Strict<T>, D::Error> {
        let args = Map::<String, Value>::deserialize(d)?;
        let refused = match serde_json::from_value(Value::Object(args.clone())) {
            Ok(value) => return Ok(Strict(value)),
            Err(e) => e,
        };
        // Only on this error path: the schema lists every field, flattened ones included.
        let schema = input_schema::<T>();
        let Some(Value::Object(known)) = schema.get("properties") else {
            return Err(D::Error::custom(refused));
        };
        match args.keys().find(|k| !known.contains_key(*k)) {
            Some(k) => {
                let names: Vec<String> = known.keys().map(|n| format!("`{n}`")).collect();
                let names = names.join(", ");
                Err(D::Error::custom(format!(
                    "unknown field `{k}`, expected one of {names}"
                )))
            }
            None => Err(D::Error::custom(refused)),
        }
    }
}

/// `host`: a name or a group (`web*`, `a,b`), or a list of names (`["a","b"]`), taken as the
/// group `a,b`. The schema says string: tools/list is paid in every turn, and docs/tools.md
/// names the list form.
fn host_arg<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let names = match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(h)) => return Ok(Some(h)),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(D::Error::custom(format!(
                "host must be a host name, a group such as \"web*\" or \"a,b\", or a list of \
                 names, not {other}"
            )))
        }
    };
    let mut list = Vec::with_capacity(names.len());
    for n in names {
        match n {
            // A comma would split a name: a list holds names, not groups.
            Value::String(h) if !h.trim().is_empty() && !h.contains(',') => list.push(h),
            other => {
                return Err(D::Error::custom(format!(
                    "host: every item of a list is one host name, not {other}"
                )))
            }
        }
    }
    if list.is_empty() {
        return Err(D::Error::custom(
            "host: an empty list names no host; name one, or leave host out for this machine",
        ));
    }
    Ok(Some(list.join(",")))
}

// Output stream selection. Inlined, without descriptions: the field says what it is.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum StreamArg {
    // stdout and stderr, interleaved as they were produced.
    #[default]
    Both,
    Stdout,
    Stderr,
}

impl From<StreamArg> for StreamFilter {
    fn from(s: StreamArg) -> StreamFilter {
        match s {
            StreamArg::Both => StreamFilter::Both,
            StreamArg::Stdout => StreamFilter::Stdout,
            StreamArg::Stderr => StreamFilter::Stderr,
        }
    }
}

// What status and wait show.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum ViewArg {
    #[default]
    Text,
    Screen,
}

/// What `run` and `start` say the same way about a command: where and how it runs.
///
/// Flattened into both. Unknown fields are refused by the outer struct's
/// `deny_unknown_fields` (serde checks what no field took, flattened ones included; a test
/// below keeps it so). The attribute would do nothing here: a flattened struct is only
/// offered its own fields.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CommandArgs {
    // A host from list_hosts, or a group (`web*`, `a,b`, a list): the instructions say it once.
    #[serde(default, deserialize_with = "host_arg")]
    #[schemars(with = "Option<String>")]
    pub host: Option<String>,
    // The names say it: a working directory (relative: from the server's), extra variables.
    pub cwd: Option<String>,
    pub env: Option<BTreeMap<String, String>>,
    /// Hard limit, ms: then the tree is stopped.
    pub timeout_ms: Option<u64>,
    /// A terminal (REPLs, prompts, TUIs); cols×rows default 120×40.
    pub tty: Option<bool>,
    pub cols: Option<u16>,
    pub rows: Option<u16>,
    /// Categories as in run, or ["NONE"].
    pub side_effects: Option<Vec<String>>,
}

// `run` and `start` each say their own words about the fields below: the command, stdin (which
// `run` closes and `start` keeps open), shell, name and session.

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunArgs {
    /// Shell command (`/bin/sh -c`).
    pub command: String,
    /// Return after this many ms (default 10000); it runs on.
    pub yield_ms: Option<u64>,
    pub max_output: Option<u64>,
    /// e.g. /bin/bash (default /bin/sh).
    pub shell: Option<String>,
    /// Text for stdin, then closed.
    pub stdin: Option<String>,
    /// Label for list_processes.
    pub name: Option<String>,
    /// Persistent shell of this name: cd and exports carry over. Not with tty.
    pub session: Option<String>,
    #[serde(flatten)]
    pub common: CommandArgs,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartArgs {
    /// Shell command (`/bin/sh -c`).
    pub command: String,
    pub shell: Option<String>,
    /// Text for stdin, kept open.
    pub stdin: Option<String>,
    /// Label, e.g. "web".
    pub name: Option<String>,
    /// With name: reuse a running one of that name and command.
    pub ensure: Option<bool>,
    /// Persistent shell of this name.
    pub session: Option<String>,
    /// "auto" or a number: a TCP port leased to it, as $PORT.
    #[serde(default, deserialize_with = "port_arg")]
    #[schemars(with = "Option<String>")]
    pub port: Option<PortWish>,
    #[serde(flatten)]
    pub common: CommandArgs,
}

/// `port`: `"auto"`, or a port number (as a number or a string). The schema says string:
/// tools/list is paid in every turn, and docs/tools.md names the number form.
fn port_arg<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PortWish>, D::Error> {
    let number = |n: Option<u64>| match n.and_then(|n| u16::try_from(n).ok()) {
        Some(n) if n > 0 => Ok(Some(PortWish::Exact(n))),
        _ => Err(D::Error::custom(
            "port must be \"auto\" or a TCP port from 1 to 65535",
        )),
    };
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().eq_ignore_ascii_case("auto") => Ok(Some(PortWish::Auto)),
        Some(Value::String(s)) => number(s.trim().parse().ok()),
        Some(Value::Number(n)) => number(n.as_u64()),
        Some(_) => number(None),
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusArgs {
    // A host from list_hosts; the instructions say it once for every tool. A group is
    // read (a list too) to be refused with the reason: ids are per host.
    #[serde(default, deserialize_with = "host_arg")]
    #[schemars(with = "Option<String>")]
    pub host: Option<String>,
    pub id: u64,
    /// Cursor: output after it (default: the last tail_bytes).
    pub since: Option<u64>,
    /// Without since: bytes from the end (default 4096).
    pub tail_bytes: Option<u64>,
    pub stream: Option<StreamArg>,
    pub max_output: Option<u64>,
    pub view: Option<ViewArg>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitArgs {
    // A host from list_hosts; the instructions say it once for every tool. A group is
    // read (a list too) to be refused with the reason: ids are per host.
    #[serde(default, deserialize_with = "host_arg")]
    #[schemars(with = "Option<String>")]
    pub host: Option<String>,
    pub id: u64,
    /// Cursor (default 0).
    pub since: Option<u64>,
    /// Regex: return when a new line matches, e.g. "listening on".
    pub until: Option<String>,
    /// Return after this many ms without output.
    pub quiet_ms: Option<u64>,
    /// Longest wait, ms (default 30000, at most 55000).
    pub timeout_ms: Option<u64>,
    pub stream: Option<StreamArg>,
    pub max_output: Option<u64>,
    pub view: Option<ViewArg>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendInputArgs {
    // A host from list_hosts; the instructions say it once for every tool. A group is
    // read (a list too) to be refused with the reason: ids are per host.
    #[serde(default, deserialize_with = "host_arg")]
    #[schemars(with = "Option<String>")]
    pub host: Option<String>,
    pub id: u64,
    /// Text to write ("\n" is Enter).
    pub text: Option<String>,
    /// Keys after text: Enter, Tab, Esc, Backspace, Space, Up, Down, Left, Right, Home, End,
    /// PageUp, PageDown, Delete, F1-F12, C-a..C-z, M-<key>.
    pub keys: Option<Vec<String>>,
    /// Then close stdin (C-d on a terminal).
    pub eof: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendSignalArgs {
    // A host from list_hosts; the instructions say it once for every tool. A group is
    // read (a list too) to be refused with the reason: ids are per host.
    #[serde(default, deserialize_with = "host_arg")]
    #[schemars(with = "Option<String>")]
    pub host: Option<String>,
    pub id: u64,
    /// SIGTERM (default: then SIGKILL after a grace), SIGKILL, SIGINT, SIGHUP, SIGQUIT,
    /// SIGUSR1, SIGUSR2, SIGSTOP, SIGCONT.
    pub signal: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    // A host, or a group: "*" for every host, `web*`, `a,b` (the instructions say so).
    #[serde(default, deserialize_with = "host_arg")]
    #[schemars(with = "Option<String>")]
    pub host: Option<String>,
    /// running, waiting_input, exited, signaled, timed_out, killed, failed_to_start or lost.
    pub state: Option<String>,
    /// Owner, e.g. "cubactl".
    pub owner: Option<String>,
    // The name says it (an exact match).
    pub name: Option<String>,
    /// Most finished shown, newest first (default 5); running: up to 50, or this if more.
    pub limit: Option<u32>,
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    #[test]
    fn unknown_arguments_are_refused_with_the_shared_fields_flattened() {
        for bad in [
            json!({ "command": "true", "yeild_ms": 5 }),
            json!({ "command": "true", "tty": true, "colls": 80 }),
        ] {
            let e = serde_json::from_value::<RunArgs>(bad.clone()).expect_err("refused");
            assert!(e.to_string().contains("unknown field"), "{bad}: {e}");
            let e = serde_json::from_value::<StartArgs>(bad.clone()).expect_err("refused");
            assert!(e.to_string().contains("unknown field"), "{bad}: {e}");
            let e = serde_json::from_value::<Strict<RunArgs>>(bad.clone()).expect_err("refused");
            assert!(
                e.to_string()
                    .contains(", expected one of `cols`, `command`, `cwd`"),
                "{e}"
            );
        }
        let ok: RunArgs = serde_json::from_value(json!({
            "command": "true", "yield_ms": 5, "tty": true, "cols": 80, "side_effects": ["NONE"]
        }))
        .expect("every field known");
        assert_eq!(ok.yield_ms, Some(5));
        assert_eq!(ok.common.cols, Some(80));
        let ok: StartArgs = serde_json::from_value(json!({ "command": "true", "ensure": true }))
            .expect("every field known");
        assert_eq!(ok.ensure, Some(true));
        // Other errors pass through as serde wrote them.
        let e = serde_json::from_value::<Strict<RunArgs>>(json!({ "command": 5 }))
            .expect_err("refused");
        assert!(e.to_string().contains("invalid type"), "{e}");
        let e = serde_json::from_value::<Strict<RunArgs>>(json!({})).expect_err("refused");
        assert!(e.to_string().contains("missing field `command`"), "{e}");
    }

    #[test]
    fn host_is_a_name_a_group_or_a_list_of_names() {
        let status = |host: Value| {
            serde_json::from_value::<StatusArgs>(json!({ "id": 1, "host": host }))
                .map(|a| a.host)
                .map_err(|e| e.to_string())
        };
        assert_eq!(status(json!("web*")), Ok(Some("web*".into())));
        assert_eq!(status(json!(["a", "b"])), Ok(Some("a,b".into())));
        assert_eq!(status(Value::Null), Ok(None));
        for bad in [json!([]), json!(["a,b"]), json!([""]), json!(5), json!([1])] {
            assert!(status(bad.clone()).is_err(), "{bad}");
        }
        let left_out = serde_json::from_value::<StatusArgs>(json!({ "id": 1 }));
        assert_eq!(left_out.map(|a| a.host).ok(), Some(None));
        // Flattened into run's and start's arguments alike.
        let run = serde_json::from_value::<Strict<RunArgs>>(
            json!({ "command": "true", "host": ["x", "y"] }),
        );
        assert_eq!(run.map(|r| r.0.common.host).ok(), Some(Some("x,y".into())));
        // The schema still says string: tools/list is paid in every turn.
        let schema = input_schema::<RunArgs>();
        assert_eq!(schema["properties"]["host"], json!({ "type": "string" }));
    }

    #[test]
    fn the_schemas_list_every_field_and_refuse_others() {
        let props = |schema: &serde_json::Map<String, Value>| -> Vec<String> {
            let mut p: Vec<String> = schema["properties"]
                .as_object()
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default();
            p.sort();
            p
        };
        let shared = [
            "cols",
            "cwd",
            "env",
            "host",
            "rows",
            "side_effects",
            "timeout_ms",
            "tty",
        ];
        let mut run: Vec<&str> = ["command", "max_output", "name", "session", "shell"].to_vec();
        run.extend(["stdin", "yield_ms"]);
        let mut start: Vec<&str> = ["command", "ensure", "name", "session", "shell"].to_vec();
        start.extend(["port", "stdin"]);
        for (schema, own) in [
            (input_schema::<RunArgs>(), run),
            (input_schema::<StartArgs>(), start),
        ] {
            let mut want: Vec<&str> = own.into_iter().chain(shared).collect();
            want.sort_unstable();
            assert_eq!(props(&schema), want);
            assert_eq!(schema["required"], json!(["command"]));
            // Left out of the schema (bytes every session pays); serde refuses them.
            assert_eq!(schema.get("additionalProperties"), None);
        }
    }
}
